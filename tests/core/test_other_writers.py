"""HDF5 as other writers lay it out: netCDF-4's dimensions and coordinate variables, PyTables' indexes.

The structures are written with h5py exactly as those libraries write them (attributes included), so the tests
need neither library.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from scanner_service.errors import ConfigError
from tests.conftest import codes, finding, run_scan

PLACEHOLDER = "This is a netCDF dimension but not a netCDF variable.         8"


def test_netcdf_dimension_placeholders_are_no_data(tmp_path: Path, rng: np.random.Generator) -> None:
    """netCDF-4 stores a dataset of zeros for each dimension without a coordinate variable (an unlimited one has
    shape (0,)): it is the library's bookkeeping, not a constant feature nor an empty dataset of the user's."""
    path = tmp_path / "clean.nc"
    with h5py.File(path, "w") as fh:
        fh["data"] = rng.normal(size=(40, 3, 8, 8)).astype(np.float32)
        for name, size in (("sample", 0), ("c", 3), ("h", 8), ("w", 8)):
            fh.create_dataset(name, shape=(size,), maxshape=(None,), dtype=np.float32, fillvalue=0)
            fh[name].make_scale(PLACEHOLDER.replace("8", str(size)))
    report = run_scan(path)
    assert codes(report) == set()
    assert report.summary.items_scanned == 40
    note = report.info["hdf5.not_scanned"]
    assert note.startswith("4 datasets not scanned") and "clean.nc:/c (a netCDF-4 dimension without a variable" in note


def test_coordinate_variables_are_not_class_labels(tmp_path: Path, rng: np.random.Generator) -> None:
    """A raster's ``y`` coordinate (a dimension scale) is no label dataset, unless --labels names it."""
    path = tmp_path / "raster.nc"
    with h5py.File(path, "w") as fh:
        fh["ndvi"] = rng.normal(size=(100, 80, 120)).astype(np.float32)
        for name, values in (("time", np.arange(100.0)), ("y", np.linspace(4.5e6, 4.6e6, 80)), ("x", np.arange(120.0))):
            fh[name] = values
            fh[name].make_scale(name)
            fh["ndvi"].dims[("time", "y", "x").index(name)].attach_scale(fh[name])
    report = run_scan(path, num_classes=10)
    assert not {"L001", "L002", "L003"} & codes(report)
    assert report.labels == []
    chosen = run_scan(path, labels="y")  # asked for: checked as labels
    assert "80 labels" in finding(chosen, "L001").locations[0].detail


def test_pytables_indexes_are_the_writers_own(tmp_path: Path, rng: np.random.Generator) -> None:
    """pandas' ``to_hdf(format="table", data_columns=True)`` keeps PyTables indexes under ``_i_<table>``: empty
    and constant arrays of its own, skipped; the table's columns are scanned."""
    path = tmp_path / "frame.h5"
    table = np.zeros(1000, dtype=[("index", "<i8"), ("a", "<f8"), ("b", "<f8")])
    table["index"] = np.arange(1000)
    table["a"] = rng.normal(size=1000)
    table["b"] = rng.normal(size=1000)
    table["b"][123] = np.nan
    with h5py.File(path, "w") as fh:
        fh.create_dataset("df/table", data=table).attrs["CLASS"] = np.bytes_(b"TABLE")
        fh.create_group("df/_i_table").attrs["CLASS"] = np.bytes_(b"TINDEX")
        index = fh.create_group("df/_i_table/index")
        index.attrs["CLASS"] = np.bytes_(b"INDEX")
        index.create_dataset("abounds", shape=(0,), maxshape=(None,), dtype=np.float64)
        index.create_dataset("indicesLR", data=np.zeros(4096, np.int64))
        index.create_dataset("sortedLR", data=np.zeros(4096, np.float64))
    report = run_scan(path)
    assert codes(report) == {"V001"}
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/df/table['b']", 123)]
    assert "3 datasets not scanned" in report.info["hdf5.not_scanned"]
    assert "(a PyTables index)" in report.info["hdf5.not_scanned"]


def test_netcdf4_and_matlab_files_of_a_folder_are_scanned(tmp_path: Path, rng: np.random.Generator) -> None:
    """netCDF-4 (.nc) and MATLAB v7.3 (.mat, after a 512-byte user block) files are HDF5: a folder scan reads
    them by their signature; a netCDF-3 or MATLAB v5 file of the same names is no HDF5 and is left alone."""
    folder = tmp_path / "data"
    folder.mkdir()
    with h5py.File(folder / "part0.h5", "w") as fh:
        fh["x"] = rng.normal(size=(100, 4)).astype(np.float32)
    with h5py.File(folder / "part1.nc", "w") as fh:
        x = rng.normal(size=(100, 4)).astype(np.float32)
        x[42, 1] = np.nan
        fh["x"] = x
    with h5py.File(folder / "part2.mat", "w", userblock_size=512) as fh:
        y = rng.normal(size=(4, 100))
        y[2, 17] = np.inf
        fh["x"] = y
    (folder / "old.nc").write_bytes(b"CDF\x01" + bytes(60))  # netCDF-3 classic
    (folder / "old.mat").write_bytes(b"MATLAB 5.0 MAT-file" + bytes(120))
    report = run_scan(folder)
    assert report.source.files == 3
    assert [(loc.path, loc.index) for loc in finding(report, "V001").locations] == [("part1.nc", 42)]
    assert [(loc.path, loc.index) for loc in finding(report, "V002").locations] == [("part2.mat", 2)]
    only = tmp_path / "only"
    only.mkdir()
    (folder / "part1.nc").rename(only / "part1.nc")
    assert [loc.index for loc in finding(run_scan(only), "V001").locations] == [42]  # detected as HDF5


def test_declared_missing_values_are_found(tmp_path: Path, rng: np.random.Generator) -> None:
    """CF readers (xarray, netCDF4) read a dataset's ``_FillValue``/``missing_value`` as missing, NaN; in a
    netCDF-4 file, rows never written hold netCDF's default fill (9.97e36) and read as missing too."""
    path = tmp_path / "era.nc"
    a = rng.normal(size=(100, 4)).astype(np.float32)
    a[60:] = np.float32(9.969209968386869e36)  # never written: netCDF's default fill
    b = rng.normal(size=(100, 4))
    b[[5, 77], 2] = -9999.0
    c = rng.integers(0, 9, size=(100, 3)).astype(np.int16)
    c[31, 0] = -1
    with h5py.File(path, "w") as fh:
        fh.attrs["_NCProperties"] = np.bytes_(b"version=2,netcdf=4.9.2,hdf5=1.14.3")
        fh["a"] = a
        fh["b"] = b
        fh["b"].attrs["_FillValue"] = np.float64(-9999.0)
        fh["c"] = c
        fh["c"].attrs["missing_value"] = np.int16(-1)
    report = run_scan(path, max_locations=1000)
    missing = finding(report, "V006")
    rows = [(loc.dataset, loc.index) for loc in missing.locations]
    assert rows == [("/a", r) for r in range(60, 100)] + [("/b", 5), ("/b", 77), ("/c", 31)]
    assert missing.values == 40 * 4 + 2 + 1
    assert missing.locations[0].detail == "4 values = 9.96921e+36 (declared missing)"
    assert missing.locations[-1].detail == "1 value = -1 (declared missing)"
    plain = tmp_path / "plain.h5"  # the same values without a declaration are data
    with h5py.File(plain, "w") as fh:
        fh["a"] = a
        fh["b"] = b
    assert "V006" not in codes(run_scan(plain))


def test_a_label_column_of_a_table_is_checked_as_labels(tmp_path: Path, rng: np.random.Generator) -> None:
    """pandas' ``to_hdf(format="table", data_columns=["label"])`` stores the label as a column of the table:
    checked as class labels (named by --labels as ``/df/table['label']`` too), the other columns as data."""
    path = tmp_path / "frame.h5"
    table = np.zeros(1000, dtype=[("index", "<i8"), ("x", "<f8"), ("label", "<i8")])
    table["x"] = rng.normal(size=1000)
    table["label"] = np.arange(1000) % 3
    table["label"][[5, 900]] = [-1, 7]
    with h5py.File(path, "w") as fh:
        fh["df/table"] = table
    report = run_scan(path, num_classes=3)
    invalid = finding(report, "L002")
    assert [(loc.dataset, loc.index) for loc in invalid.locations] == [
        ("/df/table['label']", 5),
        ("/df/table['label']", 900),
    ]
    (labels,) = report.labels
    assert labels.dataset == "/df/table['label']"
    named = run_scan(path, labels="/df/table['label']")
    assert [loc.index for loc in finding(named, "L002").locations] == [5]  # -1; no class count given


def test_class_names_stored_as_text_are_named_not_checked(tmp_path: Path, rng: np.random.Generator) -> None:
    """Labels stored as strings are no class ids: the report says so, and --labels naming them says why the
    label checks cannot run (it used to say there was no such dataset)."""
    path = tmp_path / "names.h5"
    with h5py.File(path, "w") as fh:
        fh["data"] = rng.normal(size=(80, 3)).astype(np.float32)
        fh["label"] = np.array([b"cat", b"dog"] * 40)
        fh["names"] = np.array([b"a"] * 80)  # text that no one calls labels: no word about it
    report = run_scan(path)
    assert report.info["hdf5.not_scanned"] == (
        "1 dataset not scanned: names.h5:/label (class names as text: the label checks need integer class ids)"
    )
    with pytest.raises(ConfigError, match="holds class names as text"):
        run_scan(path, labels="label")


def test_a_matlab_file_says_its_arrays_are_transposed(tmp_path: Path, rng: np.random.Generator) -> None:
    """MATLAB v7.3 stores a samples × features matrix as features × samples HDF5: the report says how to read
    its indices (they count along MATLAB's last dimension)."""
    path = tmp_path / "train.mat"
    with h5py.File(path, "w", userblock_size=512) as fh:
        x = rng.normal(size=(20, 1000))  # MATLAB's 1000×20
        x[3, 500] = np.nan
        fh["X"] = x
    with path.open("r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Nov 23 2026 HDF5 schema 1.00 .")
    report = run_scan(path)
    assert [loc.index for loc in finding(report, "V001").locations] == [3]
    assert report.info["hdf5.matlab"].startswith("MATLAB v7.3 file (train.mat): MATLAB stores arrays column-major")
    plain = tmp_path / "plain.h5"  # a user block without MATLAB's header: no such note
    with h5py.File(plain, "w", userblock_size=512) as fh:
        fh["X"] = rng.normal(size=(20, 10))
    assert "hdf5.matlab" not in run_scan(plain).info
