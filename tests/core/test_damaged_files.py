"""Damaged HDF5 files and lists: every damage is a finding, and the scan goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest

from scanner_service.demo import corrupt_chunk
from tests.conftest import cli_json, codes, finding, run_scan, write_h5


def test_corrupt_gzip_chunk_is_reported_and_the_rest_is_scanned(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.normal(size=(4000, 64)).astype(np.float32)
    data[3900, 1] = np.nan  # after the damaged chunk: must still be found
    path = write_h5(tmp_path / "d.h5", {"x": (data, {"chunks": (1000, 64), "compression": "gzip"})})
    corrupt_chunk(path, "/x", (1000, 0))
    report = run_scan(path)
    bad = finding(report, "S002")
    assert bad.count == 1
    loc = bad.locations[0]
    assert (loc.dataset, loc.index, loc.chunk) == ("/x", 1000, "1,0")
    assert loc.detail.startswith("rows 1000-1999 unreadable")
    assert [loc.index for loc in finding(report, "V001").locations] == [3900]
    assert report.summary.items_scanned == 4000  # unreadable rows count as visited


def test_corrupt_chunk_that_splits_rows_costs_only_that_chunk(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.normal(size=(600, 600)).astype(np.float32)
    data[300, 10] = np.nan  # same rows as the damaged chunk, another column chunk: still found
    data[500, 590] = np.nan
    path = write_h5(tmp_path / "g.h5", {"x": (data, {"chunks": (256, 256), "compression": "gzip"})})
    corrupt_chunk(path, "/x", (256, 256))
    report = run_scan(path)
    bad = finding(report, "S002")
    assert [(loc.index, loc.chunk) for loc in bad.locations] == [(256, "1,1")]
    assert bad.locations[0].detail.startswith("rows 256-511 unreadable")
    assert [loc.index for loc in finding(report, "V001").locations] == [300, 500]
    assert report.summary.items_scanned == 600  # the damaged rows count once


def test_small_corrupt_chunk_inside_a_block_is_isolated(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.normal(size=(1000, 8)).astype(np.float32)
    data[990, 0] = np.inf
    path = write_h5(tmp_path / "s.h5", {"x": (data, {"chunks": (100, 8), "compression": "gzip"})})
    corrupt_chunk(path, "/x", (300, 0))
    report = run_scan(path)
    assert [(loc.chunk, loc.detail.split(" unreadable")[0]) for loc in finding(report, "S002").locations] == [
        ("3,0", "rows 300-399")
    ]
    assert [loc.index for loc in finding(report, "V002").locations] == [990]
    assert report.summary.items_scanned == 1000


def test_truncated_and_non_hdf5_files(tmp_path: Path, rng: np.random.Generator) -> None:
    folder = tmp_path / "set"
    good = write_h5(folder / "good.h5", {"x": rng.normal(size=(100, 4)).astype(np.float32)})
    cut = write_h5(folder / "cut.h5", {"x": rng.normal(size=(10000, 4)).astype(np.float32)})
    cut.write_bytes(cut.read_bytes()[:5000])
    (folder / "fake.h5").write_text("this is not HDF5\n")
    (folder / "empty.h5").write_bytes(b"")
    report = run_scan(folder)
    details = {loc.path: loc.detail for loc in finding(report, "S001").locations}
    assert set(details) == {"cut.h5", "empty.h5", "fake.h5"}
    assert details["empty.h5"] == "empty file (0 bytes)"
    assert "truncated" in details["cut.h5"]
    assert report.summary.items_scanned == 100
    assert good.exists()


def test_contiguous_data_cut_short_reports_missing_rows(tmp_path: Path) -> None:
    path = tmp_path / "short.h5"
    with h5py.File(path, "w", libver="latest") as fh:
        fh.create_dataset("x", data=np.ones((1000, 256), np.float32))
        offset = fh["x"].id.get_offset()
    size = path.stat().st_size
    with path.open("r+b") as raw:  # cut the data block, keep the (earlier) metadata
        raw.truncate(offset + 600 * 1024)
    assert path.stat().st_size < size
    report = run_scan(path)
    problem = (finding(report, "S002") or finding(report, "S001")).locations[0]
    assert problem.path == "short.h5"


def test_missing_filter_names_the_package(tmp_path: Path) -> None:
    path = write_h5(
        tmp_path / "b.h5", {"x": (np.ones((100, 10), np.float32), {"chunks": (10, 10), **hdf5plugin.Blosc()})}
    )
    code = (
        "import sys, json; sys.modules['hdf5plugin'] = None\n"
        "from scanner_service import scan, ScanConfig\n"
        "r = scan(sys.argv[1], ScanConfig(), workers=0)\n"
        "print(json.dumps([[f.code, [l.detail for l in f.locations]] for f in r.findings]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [["S003", ["filter blosc (id 32001) is not available: install hdf5plugin"]]]


@pytest.mark.slow
def test_plugin_filters_are_registered_for_every_way_of_reading(tmp_path: Path, rng: np.random.Generator) -> None:
    """In a fresh process, hdf5plugin's filters are registered for compound columns (PyTables and pandas
    tables), label datasets, complex data and the sources of a virtual dataset, not only for plain numbers:
    every chunk was a false corrupt-chunk and the NaN and labels in them went unseen."""
    table = np.zeros(1000, np.dtype([("a", "f4"), ("b", "f8")]))
    table["a"], table["b"] = rng.random(1000), rng.random(1000)
    table["a"][123] = np.nan
    labels = np.arange(1000) % 3
    labels[500] = -1
    waves = (rng.random((1000, 4)) + 1j * rng.random((1000, 4))).astype(np.complex64)
    waves[321, 0] = complex(np.nan, 0)
    folder = tmp_path / "data"
    folder.mkdir()
    write_h5(folder / "t.h5", {"t": (table, {"chunks": (100,), **hdf5plugin.Blosc()})})
    write_h5(folder / "y.h5", {"x": rng.random((1000, 4)).astype(np.float32)})
    with h5py.File(folder / "y.h5", "a") as fh:
        fh.create_dataset("label", data=labels, chunks=(100,), **hdf5plugin.Zstd())
    write_h5(folder / "z.h5", {"z": (waves, {"chunks": (100, 4), **hdf5plugin.LZ4()})})
    code, report = cli_json(folder)
    places = [(f["code"], loc) for f in report["findings"] for loc in f["locations"]]
    found = {(c, loc["path"], loc["dataset"], loc["index"]) for c, loc in places}
    assert found == {
        ("V001", "t.h5", "/t['a']", 123),
        ("L002", "y.h5", "/label", 500),
        ("V001", "z.h5", "/z", 321),
    }, report["findings"]
    assert code == 1

    source = tmp_path / "src.h5"
    column = rng.random(300).astype(np.float32)
    column[250] = np.nan
    write_h5(source, {"x": (column, {"chunks": (50,), **hdf5plugin.Zstd()})})
    layout = h5py.VirtualLayout(shape=(300,), dtype=np.float32)
    layout[:] = h5py.VirtualSource(str(source), "x", shape=(300,))
    with h5py.File(tmp_path / "v.h5", "w") as fh:
        fh.create_virtual_dataset("v", layout, fillvalue=0)
    code, report = cli_json(tmp_path / "v.h5")
    found = {(f["code"], loc["dataset"], loc["index"]) for f in report["findings"] for loc in f["locations"]}
    assert found == {("V001", "/v", 250)}, report["findings"]


def test_netcdf_and_matlab_files_that_are_no_hdf5_are_named_in_a_folder(tmp_path: Path) -> None:
    """In a folder of HDF5 data, a .nc or .mat file without HDF5's signature was left out without a word: an
    empty or cut netCDF-4 file (a partial download) is unreadable-file; a netCDF-3 or MATLAB v5 file, which
    dscan does not read, is named in a note."""
    write_h5(tmp_path / "day01.nc", {"t": np.ones((4, 2), np.float32)})
    (tmp_path / "day02.nc").write_bytes(b"")
    (tmp_path / "day03.nc").write_bytes(b"\x89HDF")
    (tmp_path / "day04.nc").write_bytes(b"CDF\x01" + bytes(60))
    (tmp_path / "old.mat").write_bytes(b"MATLAB 5.0 MAT-file, Platform: GLNXA64" + bytes(90))
    report = run_scan(tmp_path)
    unreadable = finding(report, "S001")
    assert [(loc.path, loc.detail) for loc in unreadable.locations] == [
        ("day02.nc", "empty file (0 bytes)"),
        ("day03.nc", "truncated: 4 bytes, the start of an HDF5 (netCDF-4) header"),
    ]
    assert report.info["hdf5.other_formats"] == (
        "2 files of a version that is no HDF5, not scanned: day04.nc (netCDF-3 classic), old.mat (MATLAB v5)"
    )
    assert report.summary.items_scanned == 4


def test_hdf5_list_file(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.normal(size=(20, 3)).astype(np.float32)
    data[5, 2] = np.nan
    write_h5(tmp_path / "parts" / "p1.h5", {"data": data, "label": np.zeros(20, np.float32)})
    write_h5(tmp_path / "parts" / "p2.h5", {"data": rng.normal(size=(20, 3)).astype(np.float32)})
    listing = tmp_path / "train_h5.txt"
    listing.write_text("parts/p1.h5\n\nparts/gone.h5\nparts/p2.h5 1\nparts/p2.h5\n")
    report = run_scan(listing)
    assert report.source.kind == "hdf5-list"
    assert [(loc.path, loc.line) for loc in finding(report, "S004").locations] == [("train_h5.txt", 3)]
    assert [(loc.path, loc.line) for loc in finding(report, "S005").locations] == [("train_h5.txt", 4)]
    nan = finding(report, "V001").locations[0]
    assert (nan.path, nan.line, nan.dataset, nan.index) == ("parts/p1.h5", 1, "/data", 5)
    assert codes(report) == {"S004", "S005", "V001"}


def test_an_hdf5_list_relative_to_the_working_folder_names_it(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Caffe opens an HDF5Data source's paths as they are written: relative to the folder caffe runs in, not
    to the list's. dscan reads them relative to the list's folder (or --root), and said only "does not exist"."""
    write_h5(tmp_path / "parts" / "p1.h5", {"data": rng.normal(size=(20, 3)).astype(np.float32)})
    listing = tmp_path / "models" / "net" / "train_h5.txt"
    listing.parent.mkdir(parents=True)
    listing.write_text("parts/p1.h5\nparts/gone.h5\n")
    monkeypatch.chdir(tmp_path)
    report = run_scan(listing)
    hint = f"(it exists in {tmp_path}: the list's paths are relative to that folder; scan with --root {tmp_path})"
    assert [loc.detail for loc in finding(report, "S004").locations] == [
        f"parts/p1.h5 does not exist {hint}",
        "parts/gone.h5 does not exist",
    ]
    assert run_scan(listing, root=str(tmp_path)).summary.items_scanned == 20


def test_scan_never_writes_to_the_dataset(tmp_path: Path, rng: np.random.Generator) -> None:
    path = write_h5(tmp_path / "ro.h5", {"x": rng.normal(size=(100, 4)).astype(np.float32)})
    path.chmod(0o444)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    run_scan(path, workers=1)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro.h5"]


def test_a_damaged_chunk_index_costs_only_its_own_dataset(tmp_path: Path, rng: np.random.Generator) -> None:
    """HDF5's visit of a file stops at an object whose chunk index it cannot read; the other datasets are
    still scanned, as h5py still reads them."""
    path = tmp_path / "two.h5"
    big = rng.standard_normal((40000, 32)).astype(np.float32)
    big[123, 4] = np.nan
    with h5py.File(path, "w") as fh:
        fh.create_dataset("big", data=big, chunks=(4096, 32), compression="gzip", shuffle=True)
        small = rng.standard_normal((4000, 32)).astype(np.float32)
        fh.create_dataset("small", data=small, chunks=(200, 32), compression="gzip")
    clean = path.read_bytes()
    for node in [i for i in range(len(clean)) if clean.startswith(b"TREE", i)]:  # a node that breaks /small only
        damaged = bytearray(clean)
        damaged[node + 40] ^= 0x5A
        path.write_bytes(bytes(damaged))
        with h5py.File(path, "r") as fh:
            try:
                fh["small"][()]
            except KeyError:
                continue
            except (OSError, RuntimeError, ValueError):  # its chunks cannot be found (not its name: KeyError)
                if np.array_equal(fh["big"][()], big, equal_nan=True):
                    break
    else:
        raise AssertionError("no chunk index node whose damage breaks /small alone")
    report = run_scan(path)
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/big", 123)]
    assert {loc.dataset for loc in finding(report, "S002").locations} == {"/small"}
    assert "S001" not in codes(report)


def test_a_corrupt_chunk_of_a_table_or_of_labels_costs_only_its_rows(tmp_path: Path, rng: np.random.Generator) -> None:
    table = np.zeros(20_000, dtype=[("a", "f4"), ("b", "f8")])
    table["a"] = rng.standard_normal(20_000)
    table["b"] = rng.standard_normal(20_000)
    table["a"][15_000] = np.nan  # after the damaged chunk: still found
    labels = (np.arange(20_000) % 10).astype(np.int64)
    labels[15_000] = 11
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("table", data=table, chunks=(1000,), compression="gzip")
        fh.create_dataset("label", data=labels, chunks=(1000,), compression="gzip")
    corrupt_chunk(path, "/table", (5000,))
    corrupt_chunk(path, "/label", (5000,))
    report = run_scan(path, num_classes=10)
    damaged = sorted(
        (loc.dataset, loc.index, loc.chunk, loc.detail.split(":")[0]) for loc in finding(report, "S002").locations
    )
    assert damaged == [
        ("/label", 5000, "5", "rows 5000-5999 unreadable"),
        ("/table['a']", 5000, "5", "rows 5000-5999 unreadable"),
        ("/table['b']", 5000, "5", "rows 5000-5999 unreadable"),
    ]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/table['a']", 15_000)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "L002").locations] == [("/label", 15_000)]
    assert "L003" not in codes(report)  # every class is still seen in the readable rows


def nan_at(rows: int, row: int, rng: np.random.Generator) -> np.ndarray:
    values = rng.random((rows, 4)).astype(np.float32)
    values[row, 1] = np.nan
    return values


def test_one_damaged_object_costs_only_itself(tmp_path: Path, rng: np.random.Generator) -> None:
    """A damaged attribute heap, a damaged subgroup link table: the file was dropped whole (S001), and the NaN
    in every readable dataset beside them went unreported."""
    import re

    attr = tmp_path / "attr.h5"
    with h5py.File(attr, "w") as fh:
        fh.create_dataset("x", data=nan_at(100, 42, rng)).attrs["NAME"] = "feature matrix"  # in the global heap
        fh["z"] = nan_at(100, 7, rng)
    raw = attr.read_bytes()
    attr.write_bytes(raw.replace(b"GCOL", b"XXXX", 1))  # the global heap holding the string attribute
    report = run_scan(attr)
    assert sorted((loc.dataset, loc.index) for loc in finding(report, "V001").locations) == [("/x", 42), ("/z", 7)]
    groups = tmp_path / "groups.h5"
    with h5py.File(groups, "w", libver="earliest") as fh:
        for g in ("g1", "g2", "g3"):
            fh[f"{g}/x"] = nan_at(100, 9, rng)
    raw = groups.read_bytes()
    heap = [m.start() for m in re.finditer(b"HEAP", raw)][1]  # [0] is the root group's, [1] is /g1's
    groups.write_bytes(raw[:heap] + b"XXXX" + raw[heap + 4 :])
    report = run_scan(groups)
    assert [loc.dataset for loc in finding(report, "V001").locations] == ["/g2/x", "/g3/x"]
    (lost,) = finding(report, "S001").locations
    assert lost.dataset == "/g1" and "links cannot be read" in (lost.detail or "")


def test_a_member_whose_link_cannot_be_described_is_lost_not_skipped(tmp_path: Path, rng: np.random.Generator) -> None:
    """A damaged key in a group's B-tree node (a heap offset past the group's local heap): the group lists the
    member, but HDF5 can neither describe its link nor open it. It was skipped as if it were a soft link: the
    NaN in it unreported and the file passed. It is unreadable-file at its name; the rest is scanned."""
    import re

    path = tmp_path / "lost.h5"
    with h5py.File(path, "w", libver="earliest") as fh:
        fh.create_group("grp/sub").create_dataset("data", data=nan_at(300, 5, rng), chunks=(32, 4))
        fh["label"] = np.arange(300) % 3
    raw = path.read_bytes()
    nodes = [m.start() for m in re.finditer(b"TREE", raw) if raw[m.start() + 4] == 0]  # group nodes (type 0)
    lost_one = None
    for node in nodes:  # the node of /grp/sub (the file's layout decides which one it is)
        damaged = bytearray(raw)
        damaged[node + 29] = 0xBC  # byte 5 of the node's first key: an offset far past the local heap
        path.write_bytes(bytes(damaged))
        report = run_scan(path)
        found = finding(report, "S001")
        if found is not None and [loc.dataset for loc in found.locations] == ["/grp/sub/data"]:
            lost_one = found.locations[0]
            break
    assert lost_one is not None, "no damaged node costs /grp/sub/data alone"
    assert "cannot be opened" in (lost_one.detail or "") and "local heap" in (lost_one.detail or "")
    assert not report.summary.passed and report.labels[0].total == 300  # the labels beside it are read


def test_types_numpy_cannot_hold_and_files_without_data(tmp_path: Path, rng: np.random.Generator) -> None:
    """A 24-bit integer dataset (24-bit PCM audio from C writers) stopped the scan with a traceback; a file of
    groups and attributes only passed without a word."""
    odd = tmp_path / "pcm.h5"
    with h5py.File(odd, "w") as fh:
        fh["x"] = nan_at(50, 3, rng)
        pcm = h5py.h5t.STD_I32LE.copy()
        pcm.set_size(3)
        h5py.h5d.create(fh.id, b"pcm24", pcm, h5py.h5s.create_simple((20, 4)))
    report = run_scan(odd)
    assert [loc.index for loc in finding(report, "V001").locations] == [3]
    assert any("pcm24" in name and "NumPy" in name for name in report.info["hdf5.not_scanned"].split("; "))
    empty = tmp_path / "groups-only.h5"
    with h5py.File(empty, "w") as fh:
        fh.create_group("runs/2024").attrs["note"] = "nothing yet"
    report = run_scan(empty)
    assert codes(report) == {"S006", "S008"} and "no dataset" in (finding(report, "S006").locations[0].detail or "")


def _crashing_h5(bad: Path, rng: np.random.Generator) -> None:
    """An HDF5 file whose visit segfaults HDF5: two flipped bytes in a v2 B-tree chunk index header."""
    with h5py.File(bad, "w", libver="latest") as fh:
        fh.create_dataset("d", data=nan_at(4096, 5, rng), chunks=(256, 4), maxshape=(None, None))
    raw = bytearray(bad.read_bytes())
    at = raw.index(b"BTHD")
    raw[at + 12 : at + 14] = b"\xa5\x5a"
    bad.write_bytes(bytes(raw))


def test_a_file_whose_structure_crashes_hdf5_costs_only_itself(tmp_path: Path, rng: np.random.Generator) -> None:
    """Two flipped bytes in a v2 B-tree chunk index header make HDF5 segfault while visiting the file's objects:
    the scan died without a report, the NaN of the good file beside it unreported."""
    folder = tmp_path / "runs"
    write_h5(folder / "good.h5", {"x": nan_at(4096, 10, rng)})
    _crashing_h5(folder / "bad.h5", rng)
    report = run_scan(folder)
    (lost,) = finding(report, "S001").locations
    assert lost.path == "bad.h5" and "killed by SIGSEGV" in (lost.detail or "")
    assert [(loc.path, loc.index) for loc in finding(report, "V001").locations] == [("good.h5", 10)]


def test_a_reader_crash_prints_no_fault_dump(tmp_path: Path, rng: np.random.Generator) -> None:
    """With Python's fault handler on (``PYTHONFAULTHANDLER``; pytest turns it on too), each reader child
    killed by a damaged file printed "Fatal Python error: Segmentation fault" and a traceback beside the
    report that already names the file and the signal."""
    _crashing_h5(tmp_path / "bad.h5", rng)
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    for workers in ("0", "1"):
        proc = subprocess.run(
            [sys.executable, "-m", "scanner_service.cli", "scan", str(tmp_path / "bad.h5"), "-j", workers],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 1 and "killed by SIGSEGV" in proc.stdout, proc.stdout + proc.stderr
        assert "Fatal Python error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_chunk_that_crashes_its_filter_is_one_finding_for_its_rows(tmp_path: Path, rng: np.random.Generator) -> None:
    """A Blosc chunk whose header makes the plugin segfault: the shard was split down to single rows, one
    finding (and one dead worker, ~0.1 s) per row of the chunk: 1,000 findings and a minute and a half."""
    path = tmp_path / "blosc.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", data=nan_at(3000, 2500, rng), chunks=(1000, 4), **hdf5plugin.Blosc())
        info = fh["x"].id.get_chunk_info(1)
    with open(path, "r+b") as fh:
        for at, value in ((14, 242), (16, 227), (18, 122)):  # header bytes of chunk 1 (rows 1000-1999)
            fh.seek(info.byte_offset + at)
            fh.write(bytes([value]))
    crash = subprocess.run([sys.executable, "-c", f"import h5py, hdf5plugin; h5py.File({str(path)!r})['x'][1000:2000]"])
    assert crash.returncode != 0  # the plugin kills whoever reads the chunk (or, now and then, only fails)
    report = run_scan(path, workers=1)
    (lost,) = finding(report, "S002").locations
    assert lost.index == 1000 and (lost.detail or "").startswith("rows 1000-1999 "), lost
    killed = "killed by" in (lost.detail or "")
    assert not killed or (lost.detail or "").startswith("rows 1000-1999 (one chunk of 1,000 rows")
    assert [loc.index for loc in finding(report, "V001").locations] == [2500]


def test_a_dangling_link_in_an_hdf5_folder_is_a_missing_file(tmp_path: Path, rng: np.random.Generator) -> None:
    """A link whose target is gone was left out without a word: the dataset lost a file."""
    folder = tmp_path / "shards"
    write_h5(folder / "part-0.h5", {"x": nan_at(10, 1, rng)})
    (folder / "part-1.h5").symlink_to(tmp_path / "moved" / "part-1.h5")
    report = run_scan(folder)
    (gone,) = finding(report, "S004").locations
    assert gone.path == "part-1.h5" and "does not exist" in (gone.detail or "")
    assert [loc.index for loc in finding(report, "V001").locations] == [1]


def test_a_dataset_of_no_sample_at_all_fails_and_one_empty_part_warns(tmp_path: Path) -> None:
    """An empty part of a dataset is empty-dataset, a warning; when nothing holds a sample, training cannot
    start (a shuffling sampler raises on zero samples): no-samples, an error. It passed with a warning."""
    np.save(tmp_path / "rows.npy", np.zeros((0, 4), np.float32))
    np.savez(tmp_path / "nothing.npz")
    with h5py.File(tmp_path / "groups.h5", "w") as fh:
        fh.create_group("g")
    (tmp_path / "list.csv").write_text("path,label\n")
    for name in ("rows.npy", "nothing.npz", "groups.h5", "list.csv"):
        report = run_scan(tmp_path / name)
        assert codes(report) == {"S006", "S008"}, (name, codes(report))
        assert [(loc.path, loc.detail) for loc in finding(report, "S008").locations] == [
            (name, "0 samples in the whole dataset")
        ]
        assert report.exit_code() == 1
    folder = tmp_path / "mixed"
    write_h5(folder / "data.h5", {"x": np.arange(6, dtype=np.float32).reshape(3, 2)})
    with h5py.File(folder / "empty.h5", "w"):
        pass
    report = run_scan(folder)
    assert codes(report) == {"S006"} and report.exit_code() == 0  # one empty file among others: a warning
    assert codes(run_scan(tmp_path / "groups.h5", ignore=["S008"])) == {"S006"}


def test_an_unknown_filter_is_named_by_its_id_once(tmp_path: Path) -> None:
    """A filter id nobody registered read "filter id 32500 (id 32500)", under "1 dataset use ..."."""
    x = np.arange(60, dtype=np.float32).reshape(10, 6)
    with h5py.File(tmp_path / "odd.h5", "w") as fh:
        d = fh.create_dataset(
            "x", shape=x.shape, dtype=x.dtype, chunks=(5, 6), compression=32500, allow_unknown_filter=True
        )
        for row in (0, 5):
            d.id.write_direct_chunk((row, 0), x[row : row + 5].tobytes())
    found = finding(run_scan(tmp_path / "odd.h5"), "S003")
    assert found is not None and found.message == "unavailable compression filter in 1 dataset"
    assert [loc.detail for loc in found.locations] == [
        "filter id 32500 is not available: install the filter's HDF5 plugin"
    ]
