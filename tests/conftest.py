"""Shared test helpers: small HDF5 builders and a CLI runner."""

from __future__ import annotations

import json
import subprocess
import sys
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
