"""HDF5 datasets whose values are not judged (text, opaque blobs, variable-length numbers) are still read
through: a loader that reads them fails on a damaged chunk as it does on numbers."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from scanner_service.demo import corrupt_chunk
from tests.conftest import finding, run_scan


def _beside_data(path: Path, name: str, values: np.ndarray, dtype: object = None) -> Path:
    with h5py.File(path, "w") as fh:
        fh.create_dataset(name, data=values, dtype=dtype, chunks=(50,), compression="gzip")
        fh["x"] = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        fh["label"] = np.arange(200) % 4
    return path


def test_a_damaged_chunk_of_file_names_is_corrupt_chunk_for_its_rows(tmp_path: Path) -> None:
    names = np.array([f"train/{i:05d}.jpg" for i in range(200)], dtype=object)
    path = _beside_data(tmp_path / "names.h5", "filenames", names, h5py.string_dtype())
    assert not run_scan(path).findings  # clean text: nothing to report
    corrupt_chunk(path, "/filenames", (100,))
    report = run_scan(path)
    damaged = finding(report, "S002")
    assert [(loc.dataset, loc.index, loc.chunk) for loc in damaged.locations] == [("/filenames", 100, "2")]
    assert damaged.locations[0].detail.startswith("rows 100-149 unreadable: ")
    assert report.summary.items_scanned == 600  # the names' rows count as read, as the data's and labels' do


def test_damaged_opaque_blobs_and_variable_length_numbers_are_found(tmp_path: Path) -> None:
    blobs = np.array([np.void(bytes([i % 251]) * 40) for i in range(200)])
    path = _beside_data(tmp_path / "blobs.h5", "blobs", blobs)
    corrupt_chunk(path, "/blobs", (0,))
    assert [loc.index for loc in finding(run_scan(path), "S002").locations] == [0]
    ragged = np.empty(200, object)
    for i in range(200):
        ragged[i] = np.arange(i % 7, dtype=np.float32)
    path = _beside_data(tmp_path / "ragged.h5", "points", ragged, h5py.vlen_dtype(np.float32))
    corrupt_chunk(path, "/points", (150,))
    report = run_scan(path)
    assert [loc.index for loc in finding(report, "S002").locations] == [150]
    assert report.info["hdf5.not_scanned"] == "1 dataset not scanned: ragged.h5:/points (variable-length float32)"


def test_class_names_as_text_are_no_samples_beside_the_labels(tmp_path: Path) -> None:
    """Text read through counts for no length: 150 class names beside 200 labels are no label mismatch."""
    with h5py.File(tmp_path / "d.h5", "w") as fh:
        fh["x"] = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        fh["label"] = np.arange(200) % 4
        fh.create_dataset("names", data=[f"class {i}" for i in range(150)], dtype=h5py.string_dtype())
        fh["title"] = "a scalar string"
    report = run_scan(tmp_path / "d.h5")
    assert not report.findings
    assert report.summary.items_scanned == 200 + 200 + 150 + 1


def test_a_damaged_chunk_of_a_boolean_column_is_found(tmp_path: Path) -> None:
    """Booleans not named as labels (a ``valid`` mask) are read through as the other unjudged values are."""
    path = _beside_data(tmp_path / "flags.h5", "valid", np.arange(200) % 3 > 0)
    corrupt_chunk(path, "/valid", (100,))
    assert [(loc.dataset, loc.index) for loc in finding(run_scan(path), "S002").locations] == [("/valid", 100)]


def test_a_damaged_chunk_of_text_is_one_finding_whatever_the_block_size(tmp_path: Path) -> None:
    """Variable-length values are read a bounded number of rows at a time: in whole chunks, so that one damaged
    chunk of 1,000 rows is one finding (it was two, 3000-3071 and 3072-3999)."""
    path = tmp_path / "text.h5"
    with h5py.File(path, "w") as fh:
        rows = [f"row {i}" * 3 for i in range(10_000)]
        fh.create_dataset("s", data=rows, dtype=h5py.string_dtype(), chunks=(1000,), compression="gzip")
    corrupt_chunk(path, "/s", (3000,))
    damaged = finding(run_scan(path), "S002")
    assert damaged.count == 1
    assert [(loc.index, loc.detail.split(":")[0]) for loc in damaged.locations] == [(3000, "rows 3000-3999 unreadable")]
