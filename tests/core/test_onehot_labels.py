"""One-hot and multi-hot label arrays (N×K, Keras ``to_categorical``): read as label streams, their invalid rows
at their index, through the CLI's JSON report, for HDF5 files and ``.npy`` files alike."""

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

N, K = 600, 10


def _write_h5(folder: Path, arrays: dict[str, np.ndarray[Any, Any]]) -> Path:
    path = folder / "data.h5"
    with h5py.File(path, "w") as fh:
        for name, data in arrays.items():
            fh.create_dataset(name, data=data)
    return path


def _write_npy(folder: Path, arrays: dict[str, np.ndarray[Any, Any]]) -> Path:
    for name, data in arrays.items():
        np.save(folder / f"{name}.npy", data)
    return folder


WRITERS: dict[str, Callable[[Path, dict[str, np.ndarray[Any, Any]]], Path]] = {"hdf5": _write_h5, "npy": _write_npy}


@pytest.fixture(params=sorted(WRITERS))
def write(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[np.ndarray[Any, Any]], Path]:
    """Writes X_train (N×4) and the given y_train beside it in the format of the parameter."""

    def make(y: np.ndarray[Any, Any]) -> Path:
        x = np.random.default_rng(1).random((y.shape[0], 4)).astype(np.float32)
        return WRITERS[request.param](tmp_path, {"X_train": x, "y_train": y})

    return make


def _scan(path: Path, *options: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", "-j1", *options],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _finding(report: dict[str, Any], code: str) -> dict[str, Any] | None:
    return next((f for f in report["findings"] if f["code"] == code), None)


def _onehot(ids: np.ndarray[Any, Any], dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    return np.eye(K, dtype=dtype)[ids]


def _ids(seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).permutation(np.arange(N) % K)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.bool_], ids=["float", "int", "bool"])
def test_clean_onehot_has_no_finding_and_k_classes(write: Callable[..., Path], dtype: Any) -> None:
    status, report = _scan(write(_onehot(_ids(), dtype)))
    assert status == 0, report["findings"]
    assert report["findings"] == []
    (table,) = report["labels"]
    assert table["stream"].endswith("y_train")
    assert table["kind"] == "classes"
    assert table["num_classes"] == K
    assert table["total"] == N
    assert [row["count"] for row in table["histogram"]] == [N // K] * K
    (note,) = [v for k, v in report["info"].items() if k.startswith("labels.onehot ")]
    assert note.startswith(f"{N:,} rows of {K} columns, one-hot labels"), note  # the key names the stream


def test_missing_class_column_is_l003(write: Callable[..., Path]) -> None:
    ids = _ids()
    ids[ids == 7] = 3
    _, report = _scan(write(_onehot(ids)))
    l003 = _finding(report, "L003")
    assert l003 is not None and l003["count"] == 1
    assert l003["locations"][0]["detail"] == "class 7"
    assert _finding(report, "L002") is None


def test_all_zero_row_is_l002_at_its_index(write: Callable[..., Path]) -> None:
    y = _onehot(_ids())
    y[123] = 0
    _, report = _scan(write(y))
    l002 = _finding(report, "L002")
    assert l002 is not None and l002["count"] == 1
    (loc,) = l002["locations"]
    assert loc["index"] == 123
    assert loc["detail"] == "one-hot row with no 1 (all zeros)"


def test_double_one_row_and_bad_values_are_l002(write: Callable[..., Path]) -> None:
    y = _onehot(_ids())
    y[40, (np.argmax(y[40]) + 1) % K] = 1
    y[77, 0] = -1
    y[90, 0] = np.nan  # nan-value's, not label-invalid's
    _, report = _scan(write(y))
    l002 = _finding(report, "L002")
    assert l002 is not None
    by_index = {loc["index"]: loc["detail"] for loc in l002["locations"]}
    assert set(by_index) == {40, 77}
    assert by_index[40].startswith("2 classes set in a one-hot row")
    assert by_index[77].startswith("negative value -1")
    v001 = _finding(report, "V001")
    assert v001 is not None and [loc["index"] for loc in v001["locations"]] == [90]
    (note,) = [v for k, v in report["info"].items() if k.startswith("labels.onehot ")]
    assert note.endswith("; 1 row holds NaN or Inf (reported by nan-value or inf-value)"), note


def test_num_classes_below_k_makes_higher_columns_invalid(write: Callable[..., Path]) -> None:
    _, report = _scan(write(_onehot(_ids())), "--num-classes", "8")
    l002 = _finding(report, "L002")
    assert l002 is not None and l002["count"] == 2 * N // K
    assert "≥ num_classes 8" in l002["locations"][0]["detail"]
    assert any("--num-classes 8 differs from its 10 columns" in text for text in report["info"].values())


def test_multihot_with_all_zero_row_is_no_l002(write: Callable[..., Path]) -> None:
    rng = np.random.default_rng(3)
    y = (rng.random((N, K)) < 0.3).astype(np.uint8)
    y[:, 9] = 0  # a class never positive
    y[5] = 0  # no label: legitimate in multi-label data
    _, report = _scan(write(y))
    assert _finding(report, "L002") is None
    l003 = _finding(report, "L003")
    assert l003 is not None and [loc["detail"] for loc in l003["locations"]] == ["class 9"]
    assert _finding(report, "L005") is None
    assert any("multi-hot" in text for text in report["info"].values())
    (table,) = report["labels"]
    counts = {row["label"]: row["count"] for row in table["histogram"]}
    assert counts[0] == int(y[:, 0].sum())


def test_multihot_batch_absence_counts_positives(write: Callable[..., Path]) -> None:
    rng = np.random.default_rng(4)
    y = (rng.random((N, K)) < 0.3).astype(np.uint8)
    y[:, 4] = 0
    y[[10, 300], 4] = 1  # class 4: 2 positives of 600 rows
    _, report = _scan(write(y), "--batch-size", "32")
    l004 = _finding(report, "L004")
    assert l004 is not None and l004["count"] == 1
    assert l004["locations"][0]["detail"].startswith("class 4: 2 of 600 samples")


def test_soft_labels_are_no_finding_but_a_note(write: Callable[..., Path]) -> None:
    y = _onehot(_ids()) * 0.9 + 0.1 / K  # label smoothing
    status, report = _scan(write(y.astype(np.float32)))
    assert status == 0
    assert report["findings"] == []
    assert any("soft labels" in text for text in report["info"].values())


def test_label_findings_do_not_depend_on_sharding(write: Callable[..., Path], tmp_path: Path) -> None:
    ids = _ids()
    ids[ids == 7] = 3
    y = _onehot(ids)
    y[[5, 250, 599]] = 0
    y[321, (ids[321] + 1) % K] = 1
    path = write(y)
    config = tmp_path / "dscan.toml"
    config.write_text("[tool.dscan]\nshard_bytes = 2048\nblock_bytes = 512\n")
    results = []
    for workers in ("-j0", "-j2"):
        command = [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", workers]
        proc = subprocess.run(
            [*command, "--config", str(config), "--batch-size", "16"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        report = json.loads(proc.stdout)
        assert report["summary"]["shards"] > 4
        results.append(([f for f in report["findings"] if f["code"].startswith("L")], report["labels"]))
    _, whole = _scan(path, "--batch-size", "16")
    assert results[0] == results[1]
    assert results[0][0] == [f for f in whole["findings"] if f["code"].startswith("L")]
    l002 = next(f for f in results[0][0] if f["code"] == "L002")
    assert [loc["index"] for loc in l002["locations"]] == [5, 250, 321, 599]
    assert {f["code"] for f in results[0][0]} >= {"L002", "L003"}


def test_a_damaged_chunk_of_hdf5_onehot_labels_is_reported_once(tmp_path: Path) -> None:
    """One-hot rows are read twice (as data, then as labels): the damaged chunk was reported by both passes, the
    same location twice and a count of 2 for one chunk."""
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("X_train", data=np.random.default_rng(1).random((N, 4)).astype(np.float32))
        fh.create_dataset("y_train", data=_onehot(_ids()), chunks=(100, K), compression="gzip")
        info = fh["y_train"].id.get_chunk_info_by_coord((300, 0))
    with path.open("r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(b"\xde\xad\xbe\xef" * 4)
    status, report = _scan(path)
    damaged = _finding(report, "S002")
    assert status == 1 and damaged is not None and damaged["count"] == 1
    assert [(loc["dataset"], loc["index"], loc["chunk"]) for loc in damaged["locations"]] == [("/y_train", 300, "3,0")]
