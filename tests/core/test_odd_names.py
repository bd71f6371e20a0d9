"""Inputs found in the wild that are valid but odd: names that are not UTF-8, placeholders without values,
list files with a byte-order mark, a stray NUL byte or a path too long for the file system."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import h5py
import numpy as np
import pytest
from PIL import Image

from scanner_service.render import render
from tests.conftest import cli_json, codes, finding, run_scan, write_h5


def test_hdf5_object_names_that_are_not_utf8_are_scanned_and_reported_readably(tmp_path: Path) -> None:
    path = tmp_path / "names.h5"
    data = np.zeros(10)
    data[3] = np.nan
    with h5py.File(path, "w") as fh:
        group = fh.create_group(b"grp\xff")
        group.create_dataset(b"data\xe9", data=data)
    status, report = cli_json(path)
    assert status == 1
    nan = next(f for f in report["findings"] if f["code"] == "V001")  # type: ignore[union-attr]
    assert [(loc["dataset"], loc["index"]) for loc in nan["locations"]] == [("/grp\\xff/data\\xe9", 3)]
    assert [s["dataset"] for s in report["statistics"]] == ["/grp\\xff/data\\xe9"]  # type: ignore[union-attr]


def test_a_null_dataspace_is_a_placeholder_not_a_damaged_dataset(tmp_path: Path) -> None:
    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("meta", data=h5py.Empty("f4"))
        fh.create_dataset("x", data=np.arange(8, dtype=np.float32).reshape(4, 2))
    report = run_scan(path)
    assert codes(report) == set()
    assert [s.dataset for s in report.statistics] == ["/x"]
    alone = tmp_path / "placeholders-only.h5"  # no data at all, as a file of groups only: it passed
    with h5py.File(alone, "w") as fh:
        fh.create_dataset("data", data=h5py.Empty("f4"))
    report = run_scan(alone)
    assert codes(report) == {"S006", "S008"} and "no dataset" in (finding(report, "S006").locations[0].detail or "")


def test_file_names_that_are_not_utf8_reach_json_readably(tmp_path: Path) -> None:
    folder = tmp_path / "h5s"
    folder.mkdir()
    name = os.fsdecode(b"caf\xe9.h5")
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    data[1, 1] = np.inf
    write_h5(folder / name, {"x": data})
    status, report = cli_json(folder)
    assert status == 1
    inf = next(f for f in report["findings"] if f["code"] == "V002")  # type: ignore[union-attr]
    assert inf["locations"][0]["path"] == "caf\\xe9.h5"


@pytest.mark.parametrize("folder", [b"caf\xe9", b"tab\tdir", b"new\nline"], ids=["latin-1", "tab", "newline"])
def test_a_dataset_path_that_is_no_printable_utf8_is_scanned(tmp_path: Path, folder: bytes) -> None:
    """The report spells such a path out (``caf\\xe9``), but the shards open the real one (they were sent the
    spelled-out text: "does not exist", exit 2, on a good dataset)."""
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    data[3, 0] = np.nan
    path = tmp_path / os.fsdecode(folder) / "ok.h5"
    path.parent.mkdir()
    write_h5(path, {"x": data})
    status, report = cli_json(path)
    assert status == 1
    assert [loc["index"] for loc in finding_of(report, "V001")["locations"]] == [3]


def finding_of(report: dict[str, object], code: str) -> dict[str, Any]:
    found = next(f for f in report["findings"] if f["code"] == code)  # type: ignore[attr-defined]
    assert isinstance(found, dict)
    return found


def test_control_characters_in_names_are_spelled_out_in_every_format(tmp_path: Path) -> None:
    folder = tmp_path / "h5s"
    folder.mkdir()
    data = np.zeros((4, 2), np.float32)
    data[2, 0] = np.nan
    write_h5(folder / "ctl\x01\x1b[31mred.h5", {"x": data})
    report = run_scan(folder)
    shown = "ctl\\x01\\x1b[31mred.h5"
    assert finding(report, "V001").locations[0].path == shown
    junit = render(report, "junit")
    failures = [el.text or "" for el in ElementTree.fromstring(junit).iter("failure")]  # raises if not XML
    assert any(shown in text for text in failures)
    for fmt in ("text", "markdown", "json"):
        out = render(report, fmt)
        assert "\x1b" not in out and "\x01" not in out, fmt


def test_invisible_format_characters_in_names_are_spelled_out() -> None:
    """A byte order mark inside a concatenated list or a zero-width space makes 'img/2.jpg does not exist'
    name a file that does exist; a direction override makes a name read backwards."""
    from scanner_service.text import printable

    assert printable("\ufeffimg/2.jpg") == "\\ufeffimg/2.jpg"
    assert printable("img/3\u200b.jpg") == "img/3\\u200b.jpg"
    assert printable("cat\u202egpj.exe") == "cat\\u202egpj.exe"
    assert printable("café/狗.jpg") == "café/狗.jpg"


def test_hdf5_list_with_bom_nul_byte_and_overlong_path(tmp_path: Path) -> None:
    write_h5(tmp_path / "a.h5", {"x": np.arange(6, dtype=np.float32).reshape(3, 2)})
    lines = ["a.h5", "b\0ad.h5", "x" * 300 + ".h5", "a.h5"]
    listing = tmp_path / "train.txt"
    listing.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    status, report = cli_json(listing)
    assert status == 1  # the scan runs: the NUL byte does not make the list unreadable
    found = {f["code"]: f for f in report["findings"]}  # type: ignore[union-attr]
    assert set(found) == {"S005", "S001"}  # the BOM line names a.h5, which exists: no missing-file
    assert [loc["line"] for loc in found["S005"]["locations"]] == [2]
    assert "NUL" in found["S005"]["locations"][0]["detail"]
    assert [loc["line"] for loc in found["S001"]["locations"]] == [3]
    assert "too long" in found["S001"]["locations"][0]["detail"]
    assert report["summary"]["items_scanned"] == 6  # type: ignore[index]


@pytest.mark.parametrize("suffix", [".h5", ".jpg"])
def test_a_two_line_list_with_a_nul_byte_in_a_line_is_still_a_list(tmp_path: Path, suffix: str) -> None:
    """One NUL line of two is half the lines: the list was taken for binary data, "not a dataset" (exit 2),
    where a longer list with the same line gets list-syntax at that line."""
    if suffix == ".h5":
        write_h5(tmp_path / "a.h5", {"x": np.arange(6, dtype=np.float32).reshape(3, 2)})
    else:
        Image.fromarray(np.full((40, 40, 3), 7, np.uint8)).save(tmp_path / "a.jpg")
    listing = tmp_path / "train.txt"
    listing.write_bytes(f"a{suffix} 0\nb\0ad{suffix} 1\n".encode() if suffix == ".jpg" else b"a.h5\nb\0ad.h5\n")
    status, report = cli_json(listing)
    assert status == 1, report
    (syntax,) = [f for f in report["findings"] if f["code"] == "S005"]  # type: ignore[index]
    assert [loc["line"] for loc in syntax["locations"]] == [2] and "NUL" in syntax["locations"][0]["detail"]


def test_a_binary_file_is_still_no_hdf5_list(tmp_path: Path) -> None:
    blob = tmp_path / "weights.txt"
    blob.write_bytes(b"a.h5\0\0\n\0b.h5\0\n\0\0\0\n" * 10)
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(blob)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "not a dataset dscan can read" in proc.stderr


def test_labels_beyond_64_bits_are_invalid_labels_not_a_crash(tmp_path: Path) -> None:
    from PIL import Image

    for name in ("a", "b", "c"):
        Image.new("RGB", (40, 40), (10, 20, 30)).save(tmp_path / f"{name}.png")
    (tmp_path / "list.txt").write_text("a.png 0\nb.png 99999999999999999999999\nc.png 1e30\n")
    report = run_scan(tmp_path / "list.txt")
    invalid = finding(report, "L002")
    assert invalid is not None and invalid.count == 1
    assert [loc.line for loc in invalid.locations] == [2]
    exponent = finding(report, "S005")  # Caffe's atoi reads '1e30' as 1, int() refuses it: a malformed label
    assert exponent is not None and [loc.line for loc in exponent.locations] == [3]
    assert "I003" not in codes(report)
    assert [row.label for row in report.labels[0].histogram] == [0]  # no class id made of a wrapped cast


def test_the_largest_uint64_label_is_shown_exactly(tmp_path: Path) -> None:
    labels = np.arange(20, dtype=np.uint64) % 3
    labels[5] = np.iinfo(np.uint64).max
    path = write_h5(tmp_path / "u.h5", {"data": np.zeros((20, 2), np.float32), "label": labels})
    invalid = finding(run_scan(path, num_classes=3), "L002")
    assert [loc.detail for loc in invalid.locations] == ["label 18446744073709551615 ≥ num_classes 3"]


def test_complex_datasets_are_scanned_part_by_part_variable_length_ones_named(tmp_path: Path) -> None:
    """Complex numbers (MRI k-space, spectra) are checked as their real and imaginary parts; variable-length
    numbers are named as not scanned."""
    path = tmp_path / "odd.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", data=np.arange(6, dtype=np.float32).reshape(3, 2))
        fh.create_dataset("c", data=np.array([1 + 2j, np.nan], np.complex64))
        ragged = fh.create_dataset("v", (2,), dtype=h5py.vlen_dtype(np.float32))
        ragged[0] = np.array([1.0, np.nan], np.float32)
        ragged[1] = np.array([2.0], np.float32)
        fh.create_dataset("names", data=np.array([b"a", b"b"]))  # strings hold no numbers: not listed
    report = run_scan(path)
    assert report.info["hdf5.not_scanned"] == "1 dataset not scanned: odd.h5:/v (variable-length float32)"
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/c", 1)]
    (parts,) = [s for s in report.statistics if s.dataset == "/c"]
    assert (parts.shape, parts.count, parts.nan) == ([2, 2], 3, 1)
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert "note: 1 dataset not scanned" in proc.stdout


def test_bounds_on_options_and_a_bounded_label_report(tmp_path: Path) -> None:
    from scanner_service.config import load_config
    from scanner_service.errors import ConfigError
    from scanner_service.report import MISSING_LISTED

    path = write_h5(tmp_path / "l.h5", {"x": np.arange(20, dtype=np.float32).reshape(10, 2), "y": np.arange(10)})
    for options, message in (({"num_classes": 2_000_000}, "1000000"), ({"decoder": "raw:f9:3"}, "unknown dtype")):
        with pytest.raises(ConfigError, match=message):
            load_config(overrides=options)
    report = run_scan(path, num_classes=200_000)
    labels = report.labels[0]
    assert labels.missing_count == 200_000 - 10
    assert len(labels.missing) == MISSING_LISTED and labels.missing[:2] == [10, 11]
    assert len(labels.histogram) == 10 + MISSING_LISTED
    assert finding(report, "L003").count == 200_000 - 10


def test_a_raw_decoder_shape_may_use_commas() -> None:
    from scanner_service.records import parse_decoder

    assert str(parse_decoder("raw:float32:3,8,8")) == str(parse_decoder("raw:float32:3x8x8")) == "raw:float32:3x8x8"


def test_empty_inputs_say_they_are_empty(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_bytes(b"")
    (tmp_path / "folder" / "cat").mkdir(parents=True)
    (tmp_path / "folder" / "dog").mkdir()
    for path, why in ((tmp_path / "train.txt", "the file is empty"), (tmp_path / "folder", "holds no file")):
        command = [sys.executable, "-m", "scanner_service.cli", "scan", str(path)]
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        assert proc.returncode == 2
        assert "not a dataset dscan can read" in proc.stderr and why in proc.stderr


def two_part_virtual(path: Path, first: str, second: str) -> Path:
    """An 8×3 virtual dataset /x: rows 0-3 from ``first``:/x, rows 4-7 from ``second``:/x (fill value -1)."""
    with h5py.File(path, "w") as fh:
        layout = h5py.VirtualLayout(shape=(8, 3), dtype=np.float32)
        layout[0:4] = h5py.VirtualSource(first, "x", shape=(4, 3))
        layout[4:8] = h5py.VirtualSource(second, "x", shape=(4, 3))
        fh.create_virtual_dataset("x", layout, fillvalue=-1)
    return path


def test_a_virtual_dataset_whose_source_file_is_gone_is_missing_file(tmp_path: Path) -> None:
    """HDF5 reads the part a missing source maps as the fill value, without an error: dscan says so."""
    part = np.arange(12, dtype=np.float32).reshape(4, 3)
    write_h5(tmp_path / "part0.h5", {"x": part})
    path = two_part_virtual(tmp_path / "all.h5", "part0.h5", "part1.h5")
    status, report = cli_json(path)
    assert status == 1
    (missing,) = [f for f in report["findings"] if f["code"] == "S004"]  # type: ignore[union-attr]
    (loc,) = missing["locations"]
    assert (loc["path"], loc["dataset"]) == ("all.h5", "/x")
    assert loc["detail"] == (
        "virtual dataset maps part1.h5, which does not exist: HDF5 reads that part as the fill value (-1.0)"
    )
    (stats,) = report["statistics"]  # type: ignore[misc]
    assert stats["min"] == -1.0  # the dataset is still scanned, as training would read it

    write_h5(tmp_path / "part1.h5", {"x": part + 100})
    status, report = cli_json(path)
    assert status == 0
    assert "S004" not in {f["code"] for f in report["findings"]}  # type: ignore[union-attr]


def test_virtual_sources_found_as_hdf5_finds_them_and_missing_source_datasets(tmp_path: Path) -> None:
    """An absolute source name that no longer exists is looked up by its last component beside the virtual
    dataset, as HDF5 does (no false missing-file); a source file without the mapped dataset is S004."""
    part = np.arange(12, dtype=np.float32).reshape(4, 3)
    write_h5(tmp_path / "part0.h5", {"x": part})
    write_h5(tmp_path / "part1.h5", {"y": part})
    path = two_part_virtual(tmp_path / "all.h5", "/gone/elsewhere/part0.h5", "part1.h5")
    with h5py.File(path, "r") as fh:
        assert fh["x"][0, 1] == 1.0  # HDF5 found part0.h5 beside all.h5
    status, report = cli_json(path)
    assert status == 1
    (missing,) = [f for f in report["findings"] if f["code"] == "S004"]  # type: ignore[union-attr]
    (loc,) = missing["locations"]
    assert loc["detail"] == (
        "virtual dataset maps dataset x of part1.h5, which has no such dataset: "
        "HDF5 reads that part as the fill value (-1.0)"
    )


def virtual_over_damage(folder: Path, data: np.ndarray, rows_per_chunk: int, damaged_row: int, name: str) -> None:
    """``folder``/v.h5 with a virtual dataset ``name`` over src.h5:/x (``data``, gzip chunks of
    ``rows_per_chunk`` rows) whose chunk holding ``damaged_row`` is zeroed."""
    write_h5(folder / "src.h5", {"x": (data, {"chunks": (rows_per_chunk, data.shape[1]), "compression": "gzip"})})
    with h5py.File(folder / "src.h5", "r") as fh:
        info = fh["x"].id.get_chunk_info_by_coord((damaged_row, 0))
    raw = bytearray((folder / "src.h5").read_bytes())
    raw[info.byte_offset : info.byte_offset + info.size] = bytes(info.size)
    (folder / "src.h5").write_bytes(bytes(raw))
    with h5py.File(folder / "v.h5", "w") as fh:
        layout = h5py.VirtualLayout(shape=data.shape, dtype=data.dtype)
        layout[:] = h5py.VirtualSource("src.h5", "x", shape=data.shape)
        fh.create_virtual_dataset(name, layout, fillvalue=0)


def test_damaged_parts_of_unchunked_data_are_found_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A virtual dataset over a source with a damaged chunk: only the rows HDF5 cannot read are reported,
    with HDF5's reason; the NaNs elsewhere are found. An external raw file cut short: HDF5 reads zeros."""
    monkeypatch.chdir(tmp_path)  # HDF5 finds external raw files relative to the working folder
    data = np.ones((4000, 2), np.float32)
    data[[100, 3103], 0] = np.nan
    virtual_over_damage(tmp_path, data, rows_per_chunk=100, damaged_row=2500, name="vds")
    with h5py.File(tmp_path / "v.h5", "a") as fh:
        fh.create_dataset("ext", data=data, external=[("ext.bin", 0, h5py.h5f.UNLIMITED)])
    with open(tmp_path / "ext.bin", "r+b") as fh:
        fh.truncate(6000 * 4)
    report = run_scan(tmp_path / "v.h5", max_locations=20)
    bad = [(loc.dataset, loc.index, loc.detail) for loc in finding(report, "S002").locations]
    assert bad[0] == (
        "/ext",
        3000,
        "rows 3000-3999: the external raw data file ext.bin holds 24,000 of its "
        "32,000 bytes: HDF5 reads the rest as zeros (truncated?)",
    )
    assert bad[1][:2] == ("/vds", 2500) and bad[1][2].startswith("rows 2500-2599 unreadable: ")
    assert "read failed" not in bad[1][2]
    nan = [(loc.dataset, loc.index) for loc in finding(report, "V001").locations]
    assert nan == [("/ext", 100), ("/vds", 100), ("/vds", 3103)]
    (tmp_path / "ext.bin").unlink()  # gone: missing-file naming it (HDF5's own error names no file)
    report = run_scan(tmp_path / "v.h5", max_locations=20)
    ((dataset, detail),) = [(loc.dataset, loc.detail) for loc in finding(report, "S004").locations]
    assert dataset == "/ext" and detail.startswith("the external raw data file ext.bin that holds this dataset")


def test_an_external_raw_file_beside_the_hdf5_file_but_not_in_the_current_folder_is_named_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HDF5 looks for a relative external raw file in the current folder, so a scan from elsewhere cannot read
    one that lies beside the HDF5 file; "does not exist" sent its user looking for a file that was there."""
    data_dir, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data_dir.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(data_dir)
    with h5py.File(data_dir / "e.h5", "w") as fh:
        values = np.arange(20, dtype=np.float32).reshape(10, 2)
        fh.create_dataset("x", data=values, external=[("e.raw", 0, h5py.h5f.UNLIMITED)])
    assert codes(run_scan(data_dir / "e.h5")) == set()
    monkeypatch.chdir(elsewhere)
    ((detail),) = [loc.detail for loc in finding(run_scan(data_dir / "e.h5"), "S004").locations]
    assert f"is not in the current folder ({elsewhere}) nor under HDF5_EXTFILE_PREFIX" in detail
    assert "one lies beside the HDF5 file, read only from that folder or with HDF5_EXTFILE_PREFIX='${ORIGIN}'" in detail


WRITER = """
import sys, time, h5py, numpy as np
data = np.ones((2000, 4), np.float32)
data[777, 3] = np.nan
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    ds = f.create_dataset("x", shape=(0, 4), maxshape=(None, 4), chunks=(500, 4), dtype="f4")
    f.swmr_mode = True
    ds.resize((2000, 4))
    ds[:] = data
    ds.flush()
    print("ready", flush=True)
    time.sleep(60)
"""


def test_a_file_a_writer_holds_open_in_swmr_mode_is_read_as_swmr_readers_read_it(tmp_path: Path) -> None:
    path = tmp_path / "live.h5"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        with pytest.raises(OSError, match="already open for write"):
            h5py.File(path, "r", locking=False)
        report = run_scan(path)
        assert [loc.index for loc in finding(report, "V001").locations] == [777]
        assert report.summary.items_scanned == 2000
    finally:
        writer.kill()  # a writer that dies leaves the mark: loaders still cannot open the file
        writer.communicate()
    with pytest.raises(OSError, match="already open for write"):
        h5py.File(path, "r", locking=False)
    report = run_scan(path)  # it passed: a file no training loader can open
    (marked,) = finding(report, "S001").locations
    assert "marked open for writing (SWMR)" in (marked.detail or "") and "h5clear -s" in (marked.detail or "")
    assert [loc.index for loc in finding(report, "V001").locations] == [777]


def test_a_damaged_run_in_a_large_unchunked_block_is_found_to_the_row(tmp_path: Path) -> None:
    """100,000 rows read as one block: the 50 rows of a damaged source chunk are found exactly, and the NaN
    and Inf right next to them are scanned."""
    data = np.full((100_000, 2), 1.5, np.float32)
    data[61695, 0], data[61760, 1] = np.nan, np.inf
    virtual_over_damage(tmp_path, data, rows_per_chunk=50, damaged_row=61700, name="v")
    report = run_scan(tmp_path / "v.h5")
    (bad,) = finding(report, "S002").locations
    assert bad.index == 61700 and bad.detail is not None and bad.detail.startswith("rows 61700-61749 unreadable")
    assert [loc.index for loc in finding(report, "V001").locations] == [61695]
    assert [loc.index for loc in finding(report, "V002").locations] == [61760]


def test_notes_reach_every_human_readable_format(tmp_path: Path) -> None:
    """What the scan left out is said in text, markdown (CI summaries, PR comments) and JUnit (the suite's
    output), not only on the terminal."""
    path = tmp_path / "odd.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", data=np.arange(6, dtype=np.float32).reshape(3, 2) + [[0, 1]] * 3)
        ragged = fh.create_dataset("v", (1,), dtype=h5py.vlen_dtype(np.float32))
        ragged[0] = np.array([1.0], np.float32)
    expected = "1 dataset not scanned: odd.h5:/v (variable-length float32)"
    for fmt, marker in (("text", "note: "), ("markdown", "## Notes"), ("junit", "<system-out>note: ")):
        out = subprocess.run(
            [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", fmt],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert marker in out and expected.replace("_", "\\_" if fmt == "markdown" else "_") in out, (fmt, out)


def test_dollar_signs_in_markdown_text_are_no_math() -> None:
    """GitHub renders text between two '$' as a formula: 'price$1$.jpg' would lose its dollars."""
    from scanner_service.render.markdown import _text

    assert _text("copies: price$1$.jpg, a_b.jpg") == "copies: price\\$1\\$.jpg, a\\_b.jpg"
