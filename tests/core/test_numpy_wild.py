"""NumPy files the way numpy and other tools really write them: archives with duplicate member names, headers
written by Python 2 or by hand, ``--labels`` naming a file, boolean masks."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import cli_json, finding, run_scan


def places(report: Any, code: str) -> list[tuple[str, str | None, int | None]]:
    found = finding(report, code)
    return [] if found is None else [(loc.path, loc.dataset, loc.index) for loc in found.locations]


def npy_bytes(array: np.ndarray[Any, Any]) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def test_duplicate_member_names_scan_what_numpy_reads(tmp_path: Path) -> None:
    """zipfile lets a name be written twice (it warns); ``np.load(...)['x']`` reads the last one. Two members of
    one name and different shapes crashed the merge of their statistics."""
    x = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    x[17, 2] = np.nan
    path = tmp_path / "dup.npz"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")
        zf.writestr("x.npy", npy_bytes(np.full((3, 2), np.inf)))
        zf.writestr("x.npy", npy_bytes(x))
    with np.load(path) as npz:
        assert npz["x"].shape == (50, 4)  # what numpy reads
    for workers in (0, 2):
        report = run_scan(path, workers=workers)
        assert places(report, "V001") == [("dup.npz", "x", 17)]
        assert finding(report, "V002") is None  # the shadowed member is not numpy's x
        assert "dup.npz:x" in report.info["numpy.not_scanned"] and "same name" in report.info["numpy.not_scanned"]
        assert report.source.items == 50
    status, out = cli_json(path)
    assert status == 1 and [f["code"] for f in out["findings"]] == ["V001"]


def hand_written(path: Path, header: str, data: bytes) -> Path:
    """A version 1.0 ``.npy`` with this header text, as a Python 2 numpy or another tool writes it."""
    text = header.encode("latin1")
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data)
    return path


def cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", "-j0", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_python2_header_is_read_without_a_warning_on_stderr(tmp_path: Path) -> None:
    """numpy on Python 2 wrote shapes as ``(20L, 4L)``: numpy reads them, with a UserWarning pointing into
    dscan's source, twice (planning and reading)."""
    x = np.ones((20, 4), np.float32)
    x[13, 2] = np.nan
    path = hand_written(
        tmp_path / "old.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (20L, 4L), }\n", x.tobytes()
    )
    proc = cli(path)
    assert proc.returncode == 1 and proc.stderr == ""
    assert '"index": 13' in proc.stdout


def test_labels_option_may_name_the_file(tmp_path: Path) -> None:
    """``--labels y_train.npy`` (the file's name, as ``ls`` shows it) names the same array as ``--labels
    y_train``."""
    np.save(tmp_path / "X_train.npy", np.ones((30, 3), np.float32))
    np.save(tmp_path / "y_train.npy", np.arange(30) % 3)
    np.save(tmp_path / "classes.npy", np.arange(30) % 5)
    for name in ("classes", "classes.npy"):
        proc = cli(tmp_path, "--labels", name, "--num-classes", "3")
        assert proc.returncode == 1, proc.stderr
        assert '"stream": "classes"' in proc.stdout and "label 4" in proc.stdout


def test_a_boolean_mask_is_named_in_a_note(tmp_path: Path) -> None:
    """A boolean array that is no label holds no NaN, Inf or overflow: it is not scanned, and a note says so
    (not a silent scan of 0 samples)."""
    np.save(tmp_path / "mask.npy", np.ones((40, 8), bool))
    report = run_scan(tmp_path / "mask.npy")
    assert report.source.items == 0
    assert "mask.npy (booleans" in report.info["numpy.not_scanned"]


def test_bzip2_and_lzma_members_are_scanned(tmp_path: Path) -> None:
    """``zipfile`` writes members compressed with bzip2 or LZMA, and ``np.load`` reads them: their values are
    scanned (they were skipped with a note, and the scan passed over a NaN); damaged data is a finding."""
    x = np.random.default_rng(3).normal(size=(3000, 5)).astype(np.float32)
    x[2345, 4] = np.nan
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        path = tmp_path / f"m{method}.npz"
        with zipfile.ZipFile(path, "w", compression=method) as zf:
            zf.writestr("x.npy", npy_bytes(x))
            zf.writestr("y.npy", npy_bytes(np.arange(3000) % 4))
        with np.load(path) as npz:
            assert np.isnan(npz["x"][2345, 4])
        for workers, sizes in ((0, {}), (2, {"block_bytes": 512})):
            report = run_scan(path, workers=workers, **sizes)
            assert places(report, "V001") == [(path.name, "x", 2345)], method
            assert report.source.items == 6000 and "numpy.not_scanned" not in report.info
            assert finding(report, "S002") is None
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 4] ^= 0xFF  # inside x's compressed data
        damaged = tmp_path / f"damaged{method}.npz"
        damaged.write_bytes(bytes(raw))
        status, out = cli_json(damaged)
        assert status == 1 and any(f["code"] in ("S001", "S002") for f in out["findings"]), out["findings"]


def test_archives_named_for_splits_are_label_streams_of_their_own(tmp_path: Path) -> None:
    """train.npz and val.npz each holding x and y are two splits: their members y were one stream (at '.'), so
    a class missing from val.npz went unreported."""
    for split in ("train", "val"):
        labels = np.arange(200) % 4
        if split == "val":
            labels[labels == 3] = 0
        np.savez(tmp_path / f"{split}.npz", x=np.random.default_rng(1).random((200, 3)), y=labels)
    report = run_scan(tmp_path, num_classes=4)
    assert [(loc.path, loc.dataset, loc.detail) for loc in finding(report, "L003").locations] == [
        ("val.npz", "y", "class 3")
    ]


def test_arrays_whose_values_are_not_scanned_are_still_read_whole(tmp_path: Path) -> None:
    """Text, opaque bytes or dates are not scanned for values, but ``np.load`` fails on a short file or a member
    failing its CRC-32 whatever the type: those are corrupt-chunk findings too (they passed)."""
    rng = np.random.default_rng(0)
    names = np.array([f"cat{i}" for i in range(5000)])
    for name, array in (("text", names), ("void", np.frombuffer(rng.bytes(16 * 5000), dtype="V16"))):
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        with path.open("r+b") as fh:
            fh.truncate(40_000)
        found = finding(run_scan(path), "S002")
        assert found is not None and "missing: the file ends after" in (found.locations[0].detail or ""), name
    archive = tmp_path / "a.npz"
    np.savez(archive, names=names, x=rng.random((100, 4)))
    data = bytearray(archive.read_bytes())
    data[5000] ^= 0xFF  # inside the names member's data
    archive.write_bytes(bytes(data))
    with np.load(archive) as loaded, pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
        loaded["names"]
    found = finding(run_scan(archive), "S002")
    assert found is not None and [(loc.dataset, (loc.detail or "")[:32]) for loc in found.locations] == [
        ("names", "its bytes do not match its CRC-3")
    ]
    clean = tmp_path / "clean.npz"
    np.savez(clean, names=names, x=rng.random((100, 4)))
    assert finding(run_scan(clean), "S002") is None


def test_members_zipfile_refuses_to_open_are_unreadable(tmp_path: Path) -> None:
    """``zipfile`` (np.load) checks each member's local header on opening it: a name that differs from the
    directory's (one damaged bit) or a flag it does not implement makes it raise; those members passed."""
    rng = np.random.default_rng(1)
    arrays = {"x": rng.standard_normal((200, 8)).astype(np.float32), "y": np.arange(200) % 10}
    renamed, patched = tmp_path / "renamed.npz", tmp_path / "patched.npz"
    for path in (renamed, patched):
        np.savez(path, **arrays)
    data = bytearray(renamed.read_bytes())
    data[30 + 4] ^= 0x08  # the first local header's name: x.npy -> x.npq
    renamed.write_bytes(bytes(data))
    data = bytearray(patched.read_bytes())
    central = data.rindex(b"PK\x01\x02y.npy"[:4], 0, data.rindex(b"y.npy"))  # the directory entry of y
    data[central + 8] |= 0x20  # flag bit 5: compressed patched data
    patched.write_bytes(bytes(data))
    for path, member, why in (
        (renamed, "x.npy", "its local header names it 'x.npq'"),
        (patched, "y.npy", "compressed patched data (flag bit 5)"),
    ):
        with np.load(path) as loaded, pytest.raises((zipfile.BadZipFile, NotImplementedError)):
            loaded[member[:-4]]
        found = finding(run_scan(path), "S001")
        assert found is not None and [loc.dataset for loc in found.locations] == [member], path
        assert (found.locations[0].detail or "").startswith(why), found.locations[0].detail


@pytest.mark.parametrize(("method", "named"), [(151, "which no zip writer uses"), (93, "(zstandard)")])
def test_a_member_of_a_compression_method_numpy_cannot_read_is_unreadable(
    tmp_path: Path, method: int, named: str
) -> None:
    """A member whose directory entry names a compression method zipfile does not implement (a damaged field,
    or a writer's zstandard): np.load raises on it, and it passed with a note. The other member is scanned."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((200, 6)).astype(np.float32)
    x[33, 2] = np.nan
    path = tmp_path / "method.npz"
    np.savez_compressed(path, x=x, y=np.arange(200) % 4)
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    assert data[central + 46 : central + 51] == b"x.npy"
    data[central + 10 : central + 12] = method.to_bytes(2, "little")
    path.write_bytes(bytes(data))
    with np.load(path) as loaded, pytest.raises(NotImplementedError):
        loaded["x"]
    report = run_scan(path)
    (lost,) = finding(report, "S001").locations
    assert lost.dataset == "x" and named in (lost.detail or "") and "numpy cannot read" in (lost.detail or "")
    assert not report.summary.passed and report.labels[0].total == 200


def test_a_member_that_decodes_short_in_a_whole_archive_is_named_damaged_not_cut(tmp_path: Path) -> None:
    """A member whose deflate stream ends before its size (damaged data that still ends cleanly: np.load fails on
    its CRC-32) read "row 999 missing: the member's data ends early", as if cut. It says the data is damaged."""
    x = np.random.default_rng(3).standard_normal((1000, 8)).astype(np.float32)
    whole = io.BytesIO()
    np.save(whole, x)
    npy = whole.getvalue()
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", npy[: len(npy) - 40])  # one row and a bit short
    data = bytearray(path.read_bytes())
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # the declared size, in both headers
        pos = data.index(sig)
        data[pos + at : pos + at + 4] = len(npy).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with np.load(path) as loaded, pytest.raises((zipfile.BadZipFile, ValueError, OSError, EOFError)):
        loaded["x"]
    found = finding(run_scan(path), "S002")
    assert found is not None and [(loc.dataset, loc.index) for loc in found.locations] == [("x", 998)]
    assert "compressed data is damaged" in (found.locations[0].detail or ""), found.locations[0].detail
