"""HDF5 defects found by seeding datasets with known defects and comparing the report with the truth."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import h5py
import numpy as np
import pytest

from scanner_service import ScanConfig, scan
from tests.conftest import finding, run_scan, write_h5


def test_uint64_labels_beyond_int64_are_invalid_not_negative_classes(tmp_path: Path) -> None:
    labels = (np.arange(100) % 3).astype(np.uint64)
    labels[10] = np.iinfo(np.uint64).max  # -1 (an "ignore" marker) written into an unsigned column
    labels[20] = 1 << 63
    path = write_h5(tmp_path / "u.h5", {"data": np.arange(200, dtype=np.float32).reshape(100, 2), "label": labels})
    report = run_scan(path)
    found = finding(report, "L002")
    assert [(loc.index, loc.detail) for loc in found.locations] == [
        (10, "label 18446744073709551615 does not fit int64 (cast to int64, as loaders do, it is -1)"),
        (20, "label 9223372036854775808 does not fit int64 (cast to int64, as loaders do, it is -9223372036854775808)"),
    ]
    assert [bar.label for bar in report.labels[0].histogram] == [0, 1, 2]
    with_k = finding(run_scan(path, num_classes=3), "L002")
    assert [loc.detail for loc in with_k.locations] == [
        "label 18446744073709551615 ≥ num_classes 3",
        "label 9223372036854775808 ≥ num_classes 3",
    ]


def test_labels_option_as_a_bare_name_finds_labels_in_every_group(tmp_path: Path) -> None:
    """``--labels cls`` names the datasets called ``cls`` wherever they are, as the default names do; it was
    refused as naming no dataset when they lay in groups (train/cls, test/cls)."""
    datasets: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        datasets[f"{split}/x"] = np.arange(150, dtype=np.float32).reshape(50, 3)
        datasets[f"{split}/cls"] = np.arange(50) % 3
    datasets["test/cls"][7] = 5
    path = write_h5(tmp_path / "splits.h5", datasets)
    report = run_scan(path, labels="cls", num_classes=3)
    assert sorted(lab.dataset for lab in report.labels) == ["/test/cls", "/train/cls"]
    assert [(loc.dataset, loc.index) for loc in finding(report, "L002").locations] == [("/test/cls", 7)]
    one = run_scan(path, labels="train/cls", num_classes=3)  # a path still names one dataset
    assert [lab.dataset for lab in one.labels] == ["/train/cls"]


def test_labels_option_as_a_bare_name_finds_a_table_column(tmp_path: Path) -> None:
    table = np.zeros(60, dtype=[("x", "<f8"), ("cls", "<i8")])
    table["x"] = np.arange(60)
    table["cls"] = np.arange(60) % 4
    path = write_h5(tmp_path / "frame.h5", {"df/table": table})
    report = run_scan(path, labels="cls", num_classes=3)
    assert [lab.dataset for lab in report.labels] == ["/df/table['cls']"]
    assert [loc.index for loc in finding(report, "L002").locations][:2] == [3, 7]


def _damage_chunk(path: Path, name: str, coord: tuple[int, ...]) -> None:
    with h5py.File(path, "r") as fh:
        info = fh[name].id.get_chunk_info_by_coord(coord)
    with path.open("r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(b"\xde\xad\xbe\xef" * 4)


def test_a_damaged_chunk_of_complex_or_2d_table_data_is_named_and_its_neighbours_scanned(tmp_path: Path) -> None:
    """Complex data and 2-D tables chunked along their second axis too: the damaged chunk is named (it was the
    first chunk of its row, 3,0) and the readable chunks beside it are scanned (a NaN there was missed)."""
    rng = np.random.default_rng(5)
    z = (rng.random((100, 64)) + 1j * rng.random((100, 64))).astype(np.complex64)
    z[35, 0] = complex(np.nan, 1)  # chunk 3,0: readable
    z[99, 63] = complex(0, np.inf)
    table = np.zeros((100, 8), dtype=[("x", "<f4"), ("w", "<f8")])
    table["x"] = rng.random((100, 8))
    table["x"][32, 7] = np.nan  # chunk 3,1: readable
    path = write_h5(
        tmp_path / "c.h5",
        {
            "Z": (z, {"chunks": (10, 16), "compression": "gzip"}),
            "T": (table, {"chunks": (10, 4), "compression": "gzip"}),
        },
    )
    _damage_chunk(path, "Z", (30, 32))
    _damage_chunk(path, "T", (30, 0))
    report = run_scan(path)
    corrupt = finding(report, "S002")
    assert sorted((loc.dataset, loc.index, loc.chunk) for loc in corrupt.locations) == [
        ("/T['w']", 30, "3,0"),
        ("/T['x']", 30, "3,0"),
        ("/Z", 30, "3,2"),
    ]
    nan = finding(report, "V001")
    assert sorted((loc.dataset, loc.index) for loc in nan.locations) == [("/T['x']", 32), ("/Z", 35)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V002").locations] == [("/Z", 99)]
    assert report.summary.items_scanned == 3 * 100


def test_declared_missing_values_are_not_also_float16_overflow(tmp_path: Path) -> None:
    """netCDF's default fill (9.97e36) in rows never written, and a ``_FillValue`` of 1e30, are missing-value
    (which says raw readers overflow float16 with them); they were reported again as float16-overflow, whose
    advice (rescale the feature) does not apply. A real overflow beside them still is one."""
    path = tmp_path / "era.nc"
    a = np.arange(150, dtype=np.float32).reshape(50, 3)
    a[10:12] = np.float32(9.969209968386869e36)
    a[20, 1] = 1e5
    b = np.arange(150, dtype=np.float64).reshape(50, 3)
    b[7, 2] = 1e30
    with h5py.File(path, "w") as fh:
        fh.attrs["_NCProperties"] = np.bytes_(b"version=2,netcdf=4.9.2,hdf5=1.14.3")
        fh["a"] = a
        fh["b"] = b
        fh["b"].attrs["_FillValue"] = np.float64(1e30)
    report = run_scan(path)
    assert [(loc.dataset, loc.index) for loc in finding(report, "V006").locations] == [
        ("/a", 10),
        ("/a", 11),
        ("/b", 7),
    ]
    overflow = finding(report, "V003")
    assert [(loc.dataset, loc.index) for loc in overflow.locations] == [("/a", 20)]
    assert overflow.values == 1


@pytest.mark.parametrize(
    ("shape", "chunks"),
    [((40, 32, 32, 4), None), ((40, 32, 32, 4), (8, 16, 16, 1)), ((64, 64, 64, 4), (16, 64, 64, 1))],
    ids=["contiguous", "small-chunks", "large-chunks"],
)
def test_channels_last_images_are_judged_per_channel(
    tmp_path: Path, shape: tuple[int, ...], chunks: tuple[int, ...] | None
) -> None:
    """N×H×W×C images (TensorFlow's layout): a constant alpha channel was missed (image rows were taken for
    channels), and the statistics listed one 'channel' per image row."""
    rng = np.random.default_rng(6)
    images = rng.random(shape, dtype=np.float32)
    images[..., 3] = 1.0
    images[-1, -1, -1, 0] = np.nan
    path = write_h5(tmp_path / "rgba.h5", {"images": (images, {"chunks": chunks})})
    report = run_scan(path)
    assert [loc.detail for loc in finding(report, "V004").locations] == ["channel 3 is always 1"]
    assert [loc.index for loc in finding(report, "V001").locations] == [shape[0] - 1]
    (stats,) = report.statistics
    finite = np.where(np.isnan(images), 0.0, images)
    assert [c["mean"] for c in stats.channels][1:] == pytest.approx([float(finite[..., c].mean()) for c in (1, 2, 3)])
    assert [c["std"] for c in stats.channels][1:] == pytest.approx(
        [float(finite[..., c].std()) for c in (1, 2, 3)], abs=1e-6
    )


def test_labels_of_one_split_are_not_measured_against_another_split(tmp_path: Path) -> None:
    """Keras-style files keep X_train, y_train, X_test, y_test side by side: y_train's length was compared with
    X_test (and y_test), a false label-length-mismatch; X_train of another length still is one."""
    datasets = {
        "X_train": np.arange(300, dtype=np.float32).reshape(100, 3),
        "y_train": (np.arange(100) % 10).astype(np.uint8),
        "X_test": np.arange(150, dtype=np.float32).reshape(50, 3),
        "y_test": (np.arange(50) % 10).astype(np.uint8),
    }
    path = write_h5(tmp_path / "keras.h5", datasets)
    assert finding(run_scan(path, labels="y_train", num_classes=10), "L001") is None
    datasets["y_train"] = datasets["y_train"][:99]
    short = run_scan(write_h5(tmp_path / "short.h5", datasets), labels="y_train", num_classes=10)
    assert [loc.dataset for loc in finding(short, "L001").locations] == ["/X_train"]


def test_keras_style_split_labels_are_class_labels(tmp_path: Path) -> None:
    """y_train and y_test are labels without --labels (a label beyond --num-classes in them passed unseen, and
    --num-classes was silently not applied); each is measured against its own split's samples."""
    y_train = (np.arange(100) % 10).astype(np.uint8)
    y_train[5] = 12
    datasets = {
        "X_train": np.arange(300, dtype=np.float32).reshape(100, 3),
        "y_train": y_train,
        "X_test": np.arange(120, dtype=np.float32).reshape(40, 3),
        "test_labels": (np.arange(41) % 10).astype(np.uint8),
        "y_pred_train": np.zeros(100, np.uint8) + np.arange(100, dtype=np.uint8) % 2,  # no label name of its own
    }
    report = run_scan(write_h5(tmp_path / "keras.h5", datasets), num_classes=10)
    assert sorted(lab.dataset for lab in report.labels) == ["/test_labels", "/y_train"]
    assert [(loc.dataset, loc.index) for loc in finding(report, "L002").locations] == [("/y_train", 5)]
    assert [loc.detail for loc in finding(report, "L001").locations] == ["40 samples but /test_labels has 41 labels"]


def test_a_file_that_goes_between_plan_and_scan_is_reported_once(tmp_path: Path) -> None:
    """A queued service job plans a folder, and a file goes before its shards run: one missing-file finding
    for it (it was one unreadable-file finding per dataset and per shard, with HDF5's raw message), and the
    other file is scanned; a file that is no HDF5 by then is one unreadable-file finding."""
    import os

    from scanner_service import ScanConfig, build_report, merge, plan, scan_shard

    for name in ("a", "b", "c"):
        with h5py.File(tmp_path / f"{name}.h5", "w") as fh:
            fh["x"] = np.ones((1000, 4), np.float32) * np.arange(4)
            fh["y"] = np.arange(1000) % 3
    config = ScanConfig(shard_bytes=4096)
    planned = plan(tmp_path, config)
    assert len(planned.shards) > 6
    (tmp_path / "b.h5").unlink()
    (tmp_path / "c.h5").write_bytes(b"not HDF5 any more")
    parts = [planned.partial] + [scan_shard("hdf5", os.fspath(tmp_path), s, config) for s in planned.shards]
    report = build_report(planned.source, merge(parts), config, 0.0)
    gone = next(f for f in report.findings if f.code == "S004")
    assert gone.count == 1 and [(loc.path, loc.detail) for loc in gone.locations] == [
        ("b.h5", "the file no longer exists")
    ]
    broken = next(f for f in report.findings if f.code == "S001")
    assert broken.count == 1 and broken.locations[0].path == "c.h5"
    assert report.summary.items_scanned == 2000  # a.h5's rows


def test_files_named_for_splits_are_label_streams_of_their_own(tmp_path: Path) -> None:
    """train.h5, val.h5 and test.h5 side by side hold three splits, not three shards of one set: their labels
    were one stream, so a class missing from val.h5 was hidden by the samples of train.h5 and test.h5."""
    folder = tmp_path / "data"
    folder.mkdir()
    for split in ("train", "val", "test"):
        labels = np.arange(100) % 5
        if split == "val":
            labels[labels == 2] = 1
        write_h5(folder / f"{split}.h5", {"data": np.random.default_rng(0).random((100, 3)), "label": labels})
    report = run_scan(folder, num_classes=5)
    assert [(loc.path, loc.dataset, loc.detail) for loc in finding(report, "L003").locations] == [
        ("val.h5", "/label", "class 2")
    ]
    streams = sorted((lab.path, lab.total) for lab in report.labels)
    assert streams == [("test.h5", 100), ("train.h5", 100), ("val.h5", 100)]


def test_the_scalar_labels_of_one_file_per_sample_are_one_label_stream(tmp_path: Path) -> None:
    """A folder of one file per sample (/image and a scalar /label in each, as medical-imaging pipelines write
    them): the scalar labels were no labels at all ('labels.none'), so a label beyond --num-classes passed. A
    sample of 2 rows beside its scalar label is no label-length-mismatch."""
    rng = np.random.default_rng(3)
    for i in range(12):
        label = np.int64(7 if i == 5 else i % 3)
        write_h5(tmp_path / f"case_{i:03d}.h5", {"image": rng.random((2, 4, 3)), "label": label})
    report = run_scan(tmp_path, num_classes=3)
    assert [(loc.path, loc.dataset, loc.index) for loc in finding(report, "L002").locations] == [
        ("case_005.h5", "/label", None)
    ]
    assert finding(report, "L001") is None
    assert [(lab.path, lab.dataset, lab.total) for lab in report.labels] == [(".", "/label", 12)]


def test_streams_of_several_files_named_for_a_split_say_their_split(tmp_path: Path) -> None:
    """train_0.h5 and train_1.h5 beside val_0.h5 and val_1.h5: each split's stream spans several files and lies
    at '.', so a class missing from one split was reported at '.' as 'class 2', saying not which split."""
    for split in ("train", "val"):
        for part in (0, 1):
            labels = np.arange(60) % 4
            if split == "val":
                labels[labels == 2] = 1
            data = {"data": np.random.default_rng(part).random((60, 3)), "label": labels}
            write_h5(tmp_path / f"{split}_{part}.h5", data)
    report = run_scan(tmp_path, num_classes=4, batch_size=8)
    assert [(loc.path, loc.dataset, loc.detail) for loc in finding(report, "L003").locations] == [
        (".", "/label", "class 2 (split val)")
    ]
    absent = finding(report, "L004")
    assert absent is not None
    assert {(loc.detail or "").rsplit(" (", 1)[-1] for loc in absent.locations} == {"split train)", "split val)"}


def test_label_tables_are_named_by_file_and_dataset(tmp_path: Path) -> None:
    """train.h5's and extra.h5's /label (two streams: train.h5 is a split of its own, as in the demo) were two
    text and Markdown tables both headed "labels /label"; and two splits' streams of several files each, both
    at '.', were both "/label"."""
    from scanner_service.render import render

    for name in ("train.h5", "extra.h5"):
        write_h5(tmp_path / "one" / name, {"data": np.zeros((8, 2), np.float32), "label": np.arange(8) % 2})
    text = render(run_scan(tmp_path / "one"), "text")
    assert "labels train.h5:/label: 8 labels" in text and "labels extra.h5:/label: 8 labels" in text
    for split in ("train", "val"):
        for part in (0, 1):
            labels = np.arange(8) % 2
            write_h5(tmp_path / "two" / f"{split}_{part}.h5", {"data": np.zeros((8, 2), np.float32), "label": labels})
    markdown = render(run_scan(tmp_path / "two"), "markdown")
    assert "## Labels `/label (split train)`" in markdown and "## Labels `/label (split val)`" in markdown


def test_a_large_uncompressed_chunk_is_read_a_block_at_a_time(tmp_path: Path) -> None:
    """Uncompressed chunks of more than two blocks are read in row slices of a block from where the rows lie
    in the chunk, not whole (a 1 GB chunk took 1 GB): the same findings, at the same rows, and the same
    statistics as the contiguous copy of the data, whose blocks are the same rows."""
    data = np.random.default_rng(2).normal(size=(70_000, 64)).astype(np.float32)  # 17.9 MB, rows of 256 B
    data[5_000, 3] = np.nan
    data[69_999, 0] = np.inf  # in the last chunk, which the dataset fills only in part
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("chunked", data=data, chunks=(32_768, 64))  # 8 MiB chunks, no filter
        fh.create_dataset("flat", data=data)
    config = ScanConfig(block_bytes=256 << 10, max_locations=100)
    scan(path, config, workers=0)  # (the modules it imports first: their compilation is no reading)
    tracemalloc.start()
    report = scan(path, config, workers=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 << 20, peak  # (8 MiB and more while a chunk was read whole)
    for code, row in (("V001", 5_000), ("V002", 69_999)):
        places = sorted((loc.dataset, loc.index) for loc in finding(report, code).locations)
        assert places == [("/chunked", row), ("/flat", row)], (code, places)
    stats = {s.dataset: s.model_dump(exclude={"dataset"}) for s in report.statistics}
    assert stats["/chunked"] == stats["/flat"]


def test_a_chunk_index_entry_off_the_grid_is_a_corrupt_chunk_not_silent_fill(tmp_path: Path) -> None:
    """One damaged key in the chunk B-tree moves a chunk to a place no chunk can be: HDF5 then reads that chunk's
    rows as the fill value (zeros) without an error, and the report said nothing."""
    data = np.random.default_rng(0).standard_normal((2000, 64)).astype(np.float32)
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", data=data, chunks=(100, 64), compression="gzip")
    clean_bytes = path.read_bytes()
    node = clean_bytes.index(b"TREE\x01\x00")  # the leaf node of the v1 chunk B-tree: keys of 4 + 4 + 3 x 8 bytes
    for at, value, where in (
        (16, 1 << 58, "where no chunk of a 2000×64 dataset can be"),  # chunk 13's column offset: off the dataset
        (8, 1900, "a place it names twice"),  # its row offset: chunk 19's place
    ):
        raw = bytearray(clean_bytes)
        struct.pack_into("<Q", raw, node + 24 + 13 * 40 + at, value)
        path.write_bytes(bytes(raw))
        with h5py.File(path, "r") as fh:
            read = fh["x"][()]
        assert (read[1300:1400] == 0).all() and (read[:1300] == data[:1300]).all()  # no error, zeros
        found = finding(run_scan(path), "S002")
        assert found is not None and [(loc.dataset, loc.index) for loc in found.locations] == [("/x", 1300)]
        detail = found.locations[0].detail or ""
        assert where in detail and "rows 1300-1399 have no chunk and read as the fill value 0.0" in detail, detail
    clean = tmp_path / "clean.h5"
    with h5py.File(clean, "w") as fh:
        fh.create_dataset("x", data=data, chunks=(100, 64), compression="gzip")
    assert finding(run_scan(clean), "S002") is None
