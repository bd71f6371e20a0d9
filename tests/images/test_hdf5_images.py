"""HDF5 datasets of encoded images (one JPEG, PNG ... file per row): every row is judged by the image checks,
at its dataset and index, whatever the layout h5py stores the bytes in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from imagetools import codes, finding, jpeg, png, pooled_scan, zero_block

from scanner_service import ScanConfig
from scanner_service.demo import corrupt_chunk
from scanner_service.sources.base import Shard
from scanner_service.sources.hdf5 import Hdf5Source
from scanner_service.sources.hdf5_nonnumeric import row_values
from tests.conftest import cli_json, run_scan

ROWS = 24


def _damaged(rng: np.random.Generator) -> tuple[list[bytes], dict[int, str]]:
    """``ROWS`` clean images (JPEGs, a PNG every fifth row) with defects at known rows, and the code each
    defective row must get."""
    images = [png(rng) if i % 5 == 4 else jpeg(rng) for i in range(ROWS)]
    truth = {3: "I003", 8: "I002", 11: "I004", 14: "I003", 19: "I001"}
    images[3] = images[3][: len(images[3]) // 2]  # a JPEG cut in half
    images[8] = b"<!DOCTYPE html><html>not found</html>"  # an error page saved as an image
    images[11] = zero_block(images[11], 2048)  # libjpeg warns: Pillow's load() says nothing
    idat = images[14].index(b"IDAT")
    crc = idat + 4 + int.from_bytes(images[14][idat - 4 : idat], "big")
    images[14] = images[14][:crc] + bytes(4) + images[14][crc + 4 :]  # a PNG whose IDAT CRC fails
    images[19] = b""
    return images, truth


def _write(path: Path, images: list[bytes], layout: str, **kwargs: Any) -> Path:
    width = max(map(len, images))
    with h5py.File(path, "w") as fh:
        if layout == "vlen":
            ds = fh.create_dataset("images", (len(images),), dtype=h5py.vlen_dtype(np.uint8), **kwargs)
            for i, b in enumerate(images):
                ds[i] = np.frombuffer(b, np.uint8)
        elif layout == "opaque":
            fh.create_dataset("images", data=np.array([np.void(b.ljust(width, b"\0")) for b in images]), **kwargs)
        else:
            fh.create_dataset("images", data=np.array(images, dtype=f"S{width}"), **kwargs)
        fh["label"] = np.arange(len(images)) % 3
    return path


def _rows(report: Any, code: str) -> list[int]:
    found = finding(report, code)
    return [] if found is None else [loc.index for loc in found.locations]


@pytest.mark.parametrize("layout", ["vlen", "opaque", "fixed-bytes"])
def test_every_row_of_encoded_images_is_judged_at_its_index(tmp_path: Path, layout: str) -> None:
    images, truth = _damaged(np.random.default_rng(1))
    report = run_scan(_write(tmp_path / "images.h5", images, layout, chunks=(4,), compression="gzip"))
    for code in ("I001", "I002", "I003", "I004"):
        assert _rows(report, code) == sorted(i for i, c in truth.items() if c == code), (code, report.findings)
    located = finding(report, "I003").locations[0]
    assert (located.path, located.dataset, located.index) == ("images.h5", "/images", 3)
    assert "I006" not in codes(report), "zero padding of fixed-size rows is the storage's, not trailing data"
    assert "hdf5.not_scanned" not in report.info
    assert any(key.startswith("decoder.") for key in report.info), report.info  # who judged the images
    assert report.source.items == 2 * ROWS  # rows read: the images and their labels


def test_bytes_after_an_image_are_trailing_data_unless_they_are_the_padding(tmp_path: Path) -> None:
    """In fixed-size rows the zeros after a short image fill the slot; other bytes there are still trailing
    data, and so are zeros after an image stored at its own length."""
    rng = np.random.default_rng(2)
    images = [jpeg(rng) for _ in range(6)]
    images[2] += b"PK\x03\x04 a zip appended"
    images[4] += bytes(64)
    for layout in ("opaque", "vlen"):
        report = run_scan(_write(tmp_path / f"{layout}.h5", images, layout))
        assert _rows(report, "I006") == ([2] if layout == "opaque" else [2, 4]), (layout, report.findings)


def test_a_damaged_chunk_of_images_costs_its_rows_and_the_others_are_judged(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    images = [jpeg(rng) for _ in range(16)]
    images[13] = images[13][:300]
    path = _write(tmp_path / "images.h5", images, "opaque", chunks=(4,), compression="gzip")
    corrupt_chunk(path, "/images", (4,))
    report = run_scan(path)
    damaged = finding(report, "S002")
    assert [(loc.dataset, loc.index) for loc in damaged.locations] == [("/images", 4)]
    assert damaged.locations[0].detail.startswith("rows 4-7 unreadable: "), damaged
    assert _rows(report, "I003") == [13]


def test_labels_beside_the_images_are_a_label_stream_of_the_same_length(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    path = tmp_path / "images.h5"
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset("images", (10,), dtype=h5py.vlen_dtype(np.uint8))
        for i in range(10):
            ds[i] = np.frombuffer(jpeg(rng), np.uint8)
        fh["label"] = np.arange(9) % 2
    mismatch = finding(run_scan(path), "L001")
    assert mismatch is not None and "10 samples but /label has 9 labels" in mismatch.locations[0].detail


def test_shards_of_a_few_images_name_the_same_rows(tmp_path: Path) -> None:
    images, truth = _damaged(np.random.default_rng(5))
    path = _write(tmp_path / "images.h5", images, "vlen", chunks=(2,))
    whole, sharded = run_scan(path), run_scan(path, workers=2, shard_bytes=16_384, block_bytes=4096)
    assert whole.summary.shards == 1 and sharded.summary.shards >= 8  # shards of two or three images
    for code in ("I001", "I002", "I003", "I004"):
        assert _rows(sharded, code) == _rows(whole, code) == sorted(i for i, c in truth.items() if c == code)


def test_a_scalar_dataset_is_one_image_and_the_cli_reports_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    path = tmp_path / "one.h5"
    with h5py.File(path, "w") as fh:
        fh["cover"] = np.void(jpeg(rng)[:400])
        fh["x"] = np.ones((4, 3), np.float32)
    status, report = cli_json(path)
    assert status == 1
    bad = next(f for f in report["findings"] if f["code"] == "I003")
    assert [(loc["dataset"], loc.get("index")) for loc in bad["locations"]] == [("/cover", None)]


def test_bytes_that_are_no_images_stay_unscanned(tmp_path: Path) -> None:
    path = tmp_path / "blobs.h5"
    with h5py.File(path, "w") as fh:
        fh["blobs"] = np.array([np.void(zlib.compress(bytes([i]) * 64)) for i in range(3)])
        fh["x"] = np.arange(6, dtype=np.float32).reshape(3, 2)
    report = run_scan(path)
    assert report.info["hdf5.not_scanned"].startswith("1 dataset not scanned: blobs.h5:/blobs (opaque bytes")
    assert not any(f.code.startswith("I") for f in report.findings)


def test_row_values_keep_the_padding_of_fixed_size_rows_and_the_length_of_variable_ones() -> None:
    fixed = np.array([np.void(b"ab\0\0"), np.void(b"cdef")])
    assert [bytes(v) for v in row_values(fixed, fixed.dtype)] == [b"ab\0\0", b"cdef"]
    strings = np.array([b"ab", b"cdef"], dtype="S4")
    assert [bytes(v) for v in row_values(strings, strings.dtype)] == [b"ab\0\0", b"cdef"]
    vlen = np.empty(2, object)
    vlen[0], vlen[1] = np.frombuffer(b"ab", np.uint8), np.frombuffer(b"", np.uint8)
    assert [bytes(v) for v in row_values(vlen, h5py.vlen_dtype(np.uint8))] == [b"ab", b""]


class KillingHdf5(Hdf5Source):
    """An HDF5 source whose reader dies of SIGSEGV on the image at row 5 (a decoder crash)."""

    kind = "test-killing-hdf5"

    def read(self, shard: Shard) -> Iterator[Any]:
        for item in super().read(shard):
            if getattr(item, "kind", "") == "image" and item.location.index == 5:
                os.kill(os.getpid(), signal.SIGSEGV)
            yield item


@pytest.mark.slow
def test_an_image_that_crashes_the_reader_costs_its_row_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    images = [jpeg(rng) for _ in range(12)]
    images[9] = images[9][:500]
    path = _write(tmp_path / "images.h5", images, "vlen", chunks=(4,), compression="gzip")
    merged = pooled_scan(KillingHdf5, path, ScanConfig(), monkeypatch)
    corrupt = merged.findings["I003"].sorted_locations()
    assert [(loc.dataset, loc.index) for loc in corrupt] == [("/images", 5), ("/images", 9)]
    assert (
        corrupt[0].detail
        == "reading or decoding this image crashed the reader: the reader process was killed by SIGSEGV"
    )
    assert merged.items == 24  # every row counted: the images (one reported as a crash) and the labels


def test_copies_of_an_image_under_two_labels_of_the_dataset_beside_are_a_label_conflict(tmp_path: Path) -> None:
    """The class ids of the label dataset beside the images (of their split, when a group holds several) go
    with each image: a copy under another class is a label conflict, one under the same class a plain copy."""
    rng = np.random.default_rng(8)
    images = [jpeg(rng) for _ in range(12)]
    images[9], images[10] = images[2], images[5]
    path = tmp_path / "split.h5"
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset("X_train", (12,), dtype=h5py.vlen_dtype(np.uint8))
        for i, b in enumerate(images):
            ds[i] = np.frombuffer(b, np.uint8)
        fh["y_train"] = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 2, 0])  # row 9 (a copy of row 2): 1, not 2
        fh["y_test"] = np.arange(12) % 2  # as long, another split's
    found = finding(run_scan(path), "I013")
    assert [(loc.index, loc.detail) for loc in found.locations] == [
        (2, "2 identical copies: also split.h5:/X_train[9]; label conflict: labels 1, 2"),
        (5, "2 identical copies: also split.h5:/X_train[10]"),
    ]


def test_a_dataset_per_image_of_its_file_bytes_is_judged_as_that_image(tmp_path: Path) -> None:
    """``fh[name] = np.frombuffer(open(p, 'rb').read(), np.uint8)``, one dataset per image file (in groups per
    sample, or named by file): each is one image at its dataset, not a run of numbers; numbers stay numbers."""
    rng = np.random.default_rng(9)
    path = tmp_path / "files.h5"
    with h5py.File(path, "w") as fh:
        for i in range(6):
            data = jpeg(rng) if i != 2 else jpeg(rng)[:700]
            fh[f"train/{i:03d}.jpg"] = np.frombuffer(data, np.uint8)
            fh[f"samples/{i}/image"] = np.frombuffer(png(rng) if i != 4 else b"\x89PNG\r\n\x1a\n" + bytes(40), np.uint8)
            fh[f"samples/{i}/label"] = i % 2
        fh["tokens"] = np.arange(300, dtype=np.uint8)  # numbers, whatever their type
        fh["bm"] = np.frombuffer(b"BM" + bytes(98), np.uint8)  # 'BM' without its size: numbers (no I003 here)
    report = run_scan(path)
    bad = finding(report, "I003")
    assert [(loc.dataset, loc.index) for loc in bad.locations] == [("/samples/4/image", None), ("/train/002.jpg", None)]
    assert not any(f.code.startswith("I") and f.code != "I003" for f in report.findings), report.findings
    assert report.info["decoder.jpeg"] and report.info["decoder.png"]


def _vlen(fh: h5py.File, name: str, rows: list[bytes], **kwargs: Any) -> None:
    ds = fh.create_dataset(name, (len(rows),), dtype=h5py.vlen_dtype(np.uint8), **kwargs)
    for i, b in enumerate(rows):
        ds[i] = np.frombuffer(b, np.uint8)


def test_images_compressed_by_a_plugin_filter_are_judged_in_a_fresh_process(tmp_path: Path) -> None:
    """hdf5plugin's filters are registered before the first value is read: a Zstd-compressed dataset of images
    was named as not scanned, unless a numeric dataset with a plugin filter came first."""
    import hdf5plugin

    rng = np.random.default_rng(10)
    images = [jpeg(rng) for _ in range(12)]
    images[5] = images[5][:300]
    path = tmp_path / "zstd.h5"
    with h5py.File(path, "w") as fh:
        _vlen(fh, "images", images, chunks=(4,), **hdf5plugin.Zstd())
    status, report = cli_json(path)
    assert status == 1
    bad = next(f for f in report["findings"] if f["code"] == "I003")
    assert [loc["index"] for loc in bad["locations"]] == [5]


def test_an_error_page_or_an_empty_first_row_does_not_hide_the_images(tmp_path: Path) -> None:
    """Whether a dataset holds images is told from rows spread over it, not from the first alone; a sample's
    image dataset whose bytes are an error page is one when the same dataset of the other samples is."""
    rng = np.random.default_rng(11)
    images = [jpeg(rng) for _ in range(12)]
    images[7] = images[7][:400]
    page = b"<html><body>404 Not Found</body></html>"
    with h5py.File(tmp_path / "first.h5", "w") as fh:
        _vlen(fh, "empty_first", [b"", *images[1:]])
        _vlen(fh, "page_first", [page, *images[1:]])
        fh["padded"] = np.array([np.void(b.ljust(6000, b"\0")) for b in [page, *images[1:]]])
    report = run_scan(tmp_path / "first.h5")
    assert [(loc.dataset, loc.index) for loc in finding(report, "I001").locations] == [("/empty_first", 0)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "I002").locations] == [
        ("/padded", 0),
        ("/page_first", 0),
    ]
    assert [loc.index for loc in finding(report, "I003").locations] == [7, 7, 7]
    with h5py.File(tmp_path / "groups.h5", "w") as fh:
        for i in range(10):
            fh.create_dataset(f"{i:06d}/image", (), dtype=h5py.vlen_dtype(np.uint8))
            fh[f"{i:06d}/image"][()] = np.frombuffer(page if i == 6 else images[i], np.uint8)
            fh[f"{i:06d}/label"] = i % 2
            fh[f"files/{i:03d}.jpg"] = np.frombuffer(page if i == 3 else jpeg(rng), np.uint8)
    report = run_scan(tmp_path / "groups.h5")
    assert [loc.dataset for loc in finding(report, "I002").locations] == ["/000006/image", "/files/003.jpg"]
    assert "hdf5.not_scanned" not in report.info


def test_text_and_blobs_that_start_like_an_image_by_chance_stay_text(tmp_path: Path) -> None:
    """Two letters (a BMP's ``BM``) or one blob in eight starting like a JPEG make no dataset of images."""
    blobs = [bytes(np.random.default_rng(i).integers(0, 256, 300, dtype=np.uint8)) for i in range(40)]
    blobs[0] = b"\xff\xd8\xff" + blobs[0][3:]
    with h5py.File(tmp_path / "text.h5", "w") as fh:
        fh["x"] = np.random.default_rng(0).normal(size=(10, 3))
        fh["make"] = np.array([b"BMW", b"Audi"] * 5)
        _vlen(fh, "blobs", blobs)
    report = run_scan(tmp_path / "text.h5")
    assert not report.findings, report.findings


def test_copies_in_slots_of_other_sizes_are_duplicates_and_trailing_data_excludes_the_padding(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    train = [jpeg(rng) for _ in range(8)]
    test = [jpeg(rng, 150, 200), train[3]]
    train[5] += b"\x01" * 300
    with h5py.File(tmp_path / "slots.h5", "w") as fh:
        for name, rows in (("train_images", train), ("test_images", test)):
            width = max(map(len, rows)) + 5000
            fh[name] = np.array([np.void(r.ljust(width, b"\0")) for r in rows])
    report = run_scan(tmp_path / "slots.h5")
    copies = finding(report, "I013").locations
    assert [(loc.dataset, loc.index) for loc in copies] == [("/test_images", 1)], copies
    trailing = finding(report, "I006").locations
    assert [(loc.index, loc.detail.split(" bytes")[0]) for loc in trailing] == [(5, "300")]


def test_a_damaged_first_chunk_costs_its_rows_and_the_later_images_are_judged(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    images = [jpeg(rng) for _ in range(32)]
    images[20] = images[20][:500]
    path = tmp_path / "first_chunk.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset(
            "images", data=np.array([np.void(b.ljust(9000, b"\0")) for b in images]), chunks=(8,), compression="gzip"
        )
    corrupt_chunk(path, "/images", (0,))
    report = run_scan(path)
    assert [(loc.index, loc.detail.split(":")[0]) for loc in finding(report, "S002").locations] == [
        (0, "rows 0-7 unreadable")
    ]
    assert [loc.index for loc in finding(report, "I003").locations] == [20]


def test_variable_length_images_larger_than_the_sampled_ones_are_read_a_few_at_a_time(tmp_path: Path) -> None:
    """Blocks of variable-length rows are sized from sampled rows: where those are small and the others 2 MB,
    one block held the whole dataset. A block now holds at most ``IMAGE_BLOCK_ROWS`` images, and the reader
    sizes the next ones by the largest it has met. (HDF5 allocates variable-length data itself: the peak is
    the process's own, in a fresh one.)"""
    rng = np.random.default_rng(14)
    big = b"\x89PNG\r\n\x1a\n" + bytes(rng.integers(0, 256, 2 << 20, dtype=np.uint8))  # no valid PNG: I003
    path, small = tmp_path / "growing.h5", tmp_path / "small.h5"
    with h5py.File(path, "w") as fh:
        rows = [jpeg(rng, 16, 16) if i % 6 == 0 else big for i in range(96)]  # rows 0, 12, 24 ... are sampled
        _vlen(fh, "images", rows, chunks=(16,))
    with h5py.File(small, "w") as fh:
        _vlen(fh, "images", [big, jpeg(rng)])
    code = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from scanner_service import ScanConfig, scan\n"
        "config = ScanConfig(block_bytes=1 << 20, shard_bytes=1 << 30)\n"
        "scan(Path(sys.argv[2]), config, workers=0)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "report = scan(Path(sys.argv[1]), config, workers=0)\n"
        "grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grew, next(f.count for f in report.findings if f.code == 'I003'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(small)], capture_output=True, text=True, check=True
    )
    grew_kb, corrupt = map(int, done.stdout.split())
    assert corrupt == 80
    assert grew_kb < 60_000, grew_kb  # 16 rows of 2 MB at most (the whole dataset, 160 MB, in one block before)


def test_bytes_beside_images_that_are_no_image_by_name_stay_what_they_are(tmp_path: Path) -> None:
    """Token ids beside the cameras of each frame, a licence note or a checksum among a group's image files:
    neither shares a name with images elsewhere nor claims an image format, so none becomes an image."""
    rng = np.random.default_rng(15)
    path = tmp_path / "rig.h5"
    with h5py.File(path, "w") as fh:
        for i in range(3):
            for camera in ("front", "left", "right", "back"):
                fh[f"frame_{i}/{camera}"] = np.frombuffer(jpeg(rng, 32, 32), np.uint8)
            fh[f"frame_{i}/caption_tokens"] = rng.integers(0, 255, 30, dtype=np.uint8)
        for i in range(10):
            fh[f"images/{i:04d}.jpg"] = np.frombuffer(jpeg(rng, 32, 32), np.uint8)
        fh["images/license"] = np.bytes_(b"CC-BY-4.0")
        fh["images/checksum_u8"] = rng.integers(0, 255, 32, dtype=np.uint8)
    assert not [f for f in run_scan(path).findings if f.code.startswith("I")]


def test_small_arrays_of_bytes_that_are_no_images_keep_the_fast_path(tmp_path: Path) -> None:
    """A 1-D array of bytes leaves the batched reading of small datasets only when it starts like an image:
    20,000 token-id arrays took five times as long, each walked and read on its own."""
    from scanner_service.sources.hdf5 import Hdf5Source

    rng = np.random.default_rng(16)
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w") as fh:
        fh["tokens"] = rng.integers(0, 255, 100, dtype=np.uint8)
        fh["photo"] = np.frombuffer(jpeg(rng, 32, 32), np.uint8)
    plan = Hdf5Source(path, ScanConfig()).plan()
    segments = {seg["dataset"]: seg for shard in plan.shards for seg in shard.spec["segments"]}
    assert "small" in segments["/tokens"] and "read_as" not in segments["/tokens"]
    assert segments["/photo"]["read_as"] == "image" and "small" not in segments["/photo"]
    assert "at" in segments["/photo"]  # contiguous bytes: read with one pread, no dataset opened


def test_image_files_read_by_offset_or_through_hdf5_get_the_same_verdicts(tmp_path: Path) -> None:
    """An image file's bytes stored contiguous (1-D ``uint8``, or one opaque value) are read at their offset
    (past a MATLAB-style user block too); chunked or with attributes, through HDF5: the same verdicts."""
    rng = np.random.default_rng(17)
    files = [jpeg(rng, 40, 40) for _ in range(6)]
    files[2], files[4] = files[2][:350], files[4] + b"junk after the end"
    found = {}
    for layout in ("contiguous", "chunked", "attributes", "opaque", "opaque, attributes"):
        path = tmp_path / f"{layout}.h5"
        with h5py.File(path, "w", userblock_size=512) as fh:
            for i, data in enumerate(files):
                kwargs = {"chunks": (64,)} if layout == "chunked" else {}
                value = np.void(data) if layout.startswith("opaque") else np.frombuffer(data, np.uint8)
                ds = fh.create_dataset(f"{i}.jpg", data=value, **kwargs)
                if layout.endswith("attributes"):
                    ds.attrs["source"] = "camera"
        report = run_scan(path)
        found[layout] = sorted((f.code, loc.dataset) for f in report.findings for loc in f.locations)
    assert set(map(tuple, found.values())) == {(("I003", "/2.jpg"), ("I006", "/4.jpg"))}, found
