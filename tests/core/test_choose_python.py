"""scripts/choose-python: the interpreter .venv is made with (the system's python3 first, then PATH's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "choose-python"


@pytest.fixture
def bins(tmp_path: Path) -> dict[str, Path]:
    """Two usable interpreters (this one), an unusable one (too old, or without venv: its check fails), each in
    a folder of its own as ``python3``, and a folder without any."""
    made = {}
    for name in ("good", "other", "old", "empty"):
        folder = tmp_path / name
        folder.mkdir()
        made[name] = folder
    (made["good"] / "python3").symlink_to(sys.executable)
    (made["other"] / "python3").symlink_to(sys.executable)
    old = made["old"] / "python3"
    old.write_text("#!/bin/sh\nexit 1\n")
    old.chmod(0o755)
    return made


def choose(path: list[Path], system: Path, python: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env["PATH"] = os.pathsep.join([*map(str, path), os.path.dirname(_bash())])
    env["DSCAN_SYSTEM_PYTHON"] = str(system)
    if python is not None:
        env["PYTHON"] = python
    return subprocess.run([_bash(), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def _bash() -> str:
    for candidate in ("/bin/bash", "/usr/bin/bash"):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("bash is needed to run the install scripts")


def test_the_systems_python_comes_before_the_one_on_path(bins: dict[str, Path]) -> None:
    system = bins["good"] / "python3"
    result = choose([bins["other"]], system)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(system)


def test_paths_python_when_the_system_has_none_or_an_unusable_one(bins: dict[str, Path]) -> None:
    for system in (bins["empty"] / "python3", bins["old"] / "python3"):
        result = choose([bins["good"]], system)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(bins["good"] / "python3")


def test_python_set_by_the_user_is_the_one_used(bins: dict[str, Path]) -> None:
    chosen = bins["good"] / "python3"
    result = choose([bins["old"]], bins["old"] / "python3", python=str(chosen))
    assert (result.returncode, result.stdout.strip()) == (0, str(chosen))
    refused = choose([bins["good"]], bins["good"] / "python3", python=str(bins["old"] / "python3"))
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert "is not Python 3.11 or newer with venv" in refused.stderr


def test_no_usable_python_is_a_clear_error(bins: dict[str, Path]) -> None:
    result = choose([bins["old"]], bins["empty"] / "python3")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Python 3.11 or newer with venv is needed" in result.stderr
