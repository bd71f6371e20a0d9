"""Shared test helpers: small HDF5 builders and a CLI runner."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from scanner_service import Report, ScanConfig, scan


def write_h5(path: Path, datasets: dict[str, Any], **opts: Any) -> Path:
    """Write ``datasets`` (name -> array, or (array, create_dataset kwargs)) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w", **opts) as fh:
        for name, spec in datasets.items():
            data, kwargs = spec if isinstance(spec, tuple) else (spec, {})
            fh.create_dataset(name, data=data, **kwargs)
    return path


def run_scan(path: Path, workers: int = 0, **options: Any) -> Report:
    return scan(path, ScanConfig(**options), workers=workers)


def cli_json(path: Path) -> tuple[int, dict[str, Any]]:
    """``dscan scan PATH --format json -j1`` in a fresh process: (exit status, the report); no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", "-j1"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def nested_dtype(*meta: tuple[str, str]) -> np.dtype[Any]:
    """A table with nested fields: a point, 3 points per row (a sub-array of a table), a table in a table, a
    field named like labels in a nested one (``meta['y']``), text in a nested one; ``meta``: more fields of it."""
    return np.dtype(
        [
            ("pos", [("x", "<f4"), ("y", "<f4")]),
            ("label", "<i8"),
            ("pts", [("a", "<f4"), ("b", "<f2")], (3,)),
            ("meta", [("inner", [("z", "<f8")]), ("name", "S4"), ("y", "<i8"), *meta]),
        ]
    )


def nested_table(rows: int, nan_rows: list[int], overflow_row: int, dtype: np.dtype[Any] | None = None) -> Any:
    """``nested_dtype`` rows with a defect in a leaf of each kind of nesting: NaN at ``['pos']['y']`` rows
    ``nan_rows``, a float16 overflow at ``['pts']['a']`` row ``overflow_row``, -Inf at ``['meta']['inner']['z']``
    on the last row, ``['pts']['b']`` constant; flat labels 0..2, nested ``meta['y']`` values no class id could
    be."""
    rng = np.random.default_rng(rows)
    table = np.zeros(rows, dtype or nested_dtype())
    table["pos"]["x"], table["pos"]["y"] = np.arange(rows), rng.normal(size=rows)
    table["pos"]["y"][nan_rows] = np.nan
    table["label"] = np.arange(rows) % 3
    table["pts"]["a"] = rng.normal(size=(rows, 3))
    table["pts"]["a"][overflow_row, 1] = 7e4
    table["pts"]["b"] = 1.0
    table["meta"]["inner"]["z"] = rng.normal(size=rows)
    table["meta"]["inner"]["z"][rows - 1] = -np.inf
    table["meta"]["y"] = 1000 + rng.integers(0, 50, rows)
    return table


def quiet_scan(path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``dscan scan PATH --format json ARGS`` as users run it (the console script, in a fresh process):
    (exit status, the report), asserting that nothing reached standard error beside it (a library's own
    messages, a log line, a traceback)."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dscan"), "scan", str(path), "--format", "json", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.stderr == "", proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def finding(report: Report, code: str) -> Any:
    """The finding with ``code``, or None."""
    return next((f for f in report.findings if f.code == code), None)


def codes(report: Report) -> set[str]:
    return {f.code for f in report.findings}


@pytest.fixture
def h5(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str = "data.h5", **datasets: Any) -> Path:
        return write_h5(tmp_path / name, datasets)

    return make


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


NOBODY = 65534


def become_nobody() -> None:
    """This process (a forked child) from now on runs as user and group nobody, with no other group."""
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def as_nobody(work: Callable[[], object]) -> object:
    """``work()`` in a forked child that runs as user nobody when this process is root (root reads every file,
    whatever its mode); its result, or the text of what it raised."""
    import pickle

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        try:
            if os.geteuid() == 0:
                with contextlib.suppress(Exception):  # once as root: what it imports on the way is imported (the
                    work()  # other user may not read the checkout, nor Python's own library)
                become_nobody()
            try:
                result: object = work()
            except Exception as exc:
                result = f"{type(exc).__name__}: {exc}"
            os.write(write, pickle.dumps(result))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def let_nobody_in(folder: Path) -> None:
    """Let other users through ``folder`` and the folders above it up to the system's temporary folder (pytest
    makes its own private to their owner), for :func:`as_nobody`."""
    folder.chmod(folder.stat().st_mode | 0o755)
    for above in folder.parents:
        if above == Path(tempfile.gettempdir()):
            break
        above.chmod(above.stat().st_mode | 0o111)
