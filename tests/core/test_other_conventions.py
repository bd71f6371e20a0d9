"""Labels as other conventions name and lay them out: the deeplearning.ai course files (``train_set_y``),
camelCase names (``trainY``), MATLAB's column vectors (a 1×N row in HDF5)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from tests.conftest import codes, finding, run_scan, write_h5

MATLAB_HEADER = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Nov 23 2026 HDF5 schema 1.00 ."


def _labels(n: int, k: int, bad: int, value: int) -> np.ndarray:
    y = (np.arange(n) % k).astype(np.int64)
    y[bad] = value
    return y


def test_labels_named_with_a_filler_word_or_in_camel_case_are_class_labels(tmp_path: Path) -> None:
    """``train_set_y`` (the deeplearning.ai course's cat/non-cat files) and ``trainY`` were no labels: a label
    beyond --num-classes in them passed unseen, and the report said no labels were found."""
    for name in ("train_set_y", "trainY", "testLabels", "Y_train"):
        data = {"train_set_x": np.zeros((209, 4, 4, 3), np.uint8), name: _labels(209, 2, 100, 2)}
        report = run_scan(write_h5(tmp_path / f"{name}.h5", data), num_classes=2)
        assert [(loc.dataset, loc.index) for loc in finding(report, "L002").locations] == [(f"/{name}", 100)], name
    others = {"train_set_x": np.zeros((50, 3), np.float32), "set_labels": np.arange(50), "imgY": np.arange(50)}
    report = run_scan(write_h5(tmp_path / "others.h5", others), num_classes=2)
    assert report.labels == []  # a filler word or a camelCase word is no split: no label name of their own


def test_a_matlab_column_vector_of_labels_is_read_as_n_labels(tmp_path: Path) -> None:
    """A MATLAB N×1 label vector is a 1×N row in HDF5: it was taken for a one-hot array of one row and no label
    check ran. Read as N labels, a bad one is named by its sample; the length is that of MATLAB's samples
    (HDF5's last axis of the transposed samples × features matrix), not HDF5's first axis."""
    path = tmp_path / "train.mat"
    y = _labels(300, 3, 150, 7).astype(np.float64).reshape(1, 300)
    with h5py.File(path, "w", userblock_size=512) as fh:
        fh["X"] = np.random.default_rng(0).normal(size=(250, 300))  # MATLAB's 300 samples × 250 features
        fh["y"] = y
        fh.create_dataset("w", data=y, chunks=(1, 64))  # chunked too
    with path.open("r+b") as fh:
        fh.write(MATLAB_HEADER)
    report = run_scan(path, num_classes=3, labels="y")
    assert [(loc.dataset, loc.index) for loc in finding(report, "L002").locations] == [("/y", 150)]
    assert "L001" not in codes(report)
    assert "read as N labels" in report.info["hdf5.matlab"]
    named = run_scan(path, num_classes=3, labels="w")
    assert [(loc.dataset, loc.index) for loc in finding(named, "L002").locations] == [("/w", 150)]
    plain = write_h5(tmp_path / "plain.h5", {"X": np.zeros((250, 300)), "y": y})  # no MATLAB file: as before
    assert run_scan(plain, num_classes=3).labels[0].kind == "continuous"


def test_numpy_files_named_in_camel_case_are_labels_of_their_split(tmp_path: Path) -> None:
    """``trainX.npy`` and ``trainY.npy`` (as Keras tutorials name them): the labels are checked, as the split train."""
    np.save(tmp_path / "trainX.npy", np.zeros((120, 3), np.float32))
    np.save(tmp_path / "trainY.npy", _labels(120, 3, 7, 5))
    report = run_scan(tmp_path, num_classes=3)
    assert [(loc.path, loc.index) for loc in finding(report, "L002").locations] == [("trainY.npy", 7)]
