"""Numeric checks on real HDF5 files, in every layout and filter the reader handles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import hdf5plugin
import numpy as np
import pytest

from scanner_service import ScanConfig
from tests.conftest import codes, finding, nested_dtype, nested_table, run_scan, write_h5

LAYOUTS = {
    "contiguous": {},
    "chunked": {"chunks": (16, 8)},
    "chunked-big": {"chunks": (4096, 8)},
    "gzip": {"chunks": (16, 8), "compression": "gzip"},
    "gzip-shuffle-big": {"chunks": (8192, 8), "compression": "gzip", "shuffle": True},
    "lzf": {"chunks": (16, 8), "compression": "lzf"},
    "blosc": {"chunks": (32, 8), **hdf5plugin.Blosc(cname="lz4")},
    "zstd": {"chunks": (32, 8), **hdf5plugin.Zstd()},
    "fletcher32": {"chunks": (16, 8), "fletcher32": True},
    "scaleoffset-free": {"chunks": (50, 8), "compression": "gzip", "compression_opts": 9},
}


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "float64", ">f4"])
def test_nan_and_inf_indices_are_exact(tmp_path: Path, rng: np.random.Generator, layout: str, dtype: str) -> None:
    data = rng.normal(size=(9000, 8)).astype(dtype)
    nan_rows, inf_rows = [0, 17, 4095, 4096, 8999], [3, 8191]
    for r in nan_rows:
        data[r, r % 8] = np.nan
    data[3, 0] = np.inf
    data[8191, 7] = -np.inf
    data[8191, 6] = np.inf
    path = write_h5(tmp_path / "x.h5", {"grp/sub/x": (data, LAYOUTS[layout])})
    report = run_scan(path, max_locations=100, shard_bytes=1 << 16)
    nan = finding(report, "V001")
    assert [loc.index for loc in nan.locations] == nan_rows
    assert {loc.dataset for loc in nan.locations} == {"/grp/sub/x"}
    assert nan.values == 5 and nan.count == 5
    inf = finding(report, "V002")
    assert [loc.index for loc in inf.locations] == inf_rows
    assert inf.locations[1].detail == "1 +Inf, 1 -Inf"
    assert report.summary.items_scanned == 9000
    stats = report.statistics[0]
    assert (stats.nan, stats.inf, stats.count) == (5, 3, 9000 * 8 - 8)


def test_float16_nan_and_overflow_of_wider_floats(tmp_path: Path) -> None:
    half = np.zeros((100, 4), np.float16)
    half[42, 1] = np.nan
    wide = np.zeros((100, 4), np.float32)
    wide[7, 0] = 70000.0
    wide[8, 3] = -1e6
    wide[9, 0] = 65504.0  # representable: no finding
    wide[10, 1] = -65519.0  # float16 rounds it to -65504: no finding
    wide[11, 2] = 65520.0  # float16 rounds it to +Inf
    with np.errstate(over="ignore"):
        assert np.float16(-65519.0) == -65504 and np.isinf(np.float16(65520.0))
    path = write_h5(tmp_path / "h.h5", {"half": half, "wide": wide})
    report = run_scan(path)
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/half", 42)]
    f16 = finding(report, "V003")
    assert [(loc.dataset, loc.index) for loc in f16.locations] == [("/wide", 7), ("/wide", 8), ("/wide", 11)]
    assert f16.values == 3


@pytest.mark.parametrize(("dtype", "signalling"), [("<f4", 0x7F800001), ("<f8", 0x7FF0000000000001)])
def test_signalling_nans_do_not_hide_a_columns_range(
    tmp_path: Path, rng: np.random.Generator, dtype: str, signalling: int
) -> None:
    """Two signalling NaNs in a column of a block without Inf made numpy's fmin/fmax miss the column's
    extremes: 70000 went unseen (no float16-overflow) and the column was called constant."""
    x = rng.normal(size=(10, 2)).astype(dtype)
    x[3, 1] = 70000.0
    x.view(f"<u{x.itemsize}")[[6, 8], 1] = signalling
    report = run_scan(write_h5(tmp_path / "snan.h5", {"x": x}))
    assert codes(report) == {"V001", "V003"}
    assert [loc.index for loc in finding(report, "V001").locations] == [6, 8]
    assert [loc.index for loc in finding(report, "V003").locations] == [3]
    column = report.statistics[0].channels[1]
    assert column["max"] == 70000.0 and column["count"] == 8


def test_a_chunk_far_larger_than_a_block_reaches_the_checks_in_blocks(tmp_path: Path, rng: np.random.Generator) -> None:
    """A dataset stored as one big gzip chunk (``chunks=shape``) is decoded whole, as HDF5 decodes it, but went
    to the checks as one block: their masks and float64 copies grew with the chunk (a 400 MB chunk took 1.8 GB).
    It goes in blocks of about ``block_bytes`` now, with every finding and statistic as before."""
    from scanner_service.items import NumericBlock
    from scanner_service.sources import open_source

    x = rng.normal(size=(8192, 16)).astype(np.float32)
    x[[3, 5000, 8191], [0, 7, 15]] = [np.nan, np.inf, 70000.0]
    x[:, 9] = 2.5
    whole = write_h5(tmp_path / "whole.h5", {"x": (x, {"chunks": x.shape, "compression": "gzip"})})
    plain = write_h5(tmp_path / "plain.h5", {"x": x})
    config = ScanConfig(block_bytes=16 << 10)
    source = open_source(whole, config)
    (shard,) = source.plan().shards
    blocks = [b for b in source.read(shard) if isinstance(b, NumericBlock)]
    assert len(blocks) > 1 and max(b.nbytes for b in blocks) <= 16 << 10
    assert sum(b.items for b in blocks) == 8192 and sum(b.data.shape[0] for b in blocks) == 8192
    chunked, contiguous = run_scan(whole, block_bytes=16 << 10), run_scan(plain, block_bytes=16 << 10)
    for code, rows in (("V001", [3]), ("V002", [5000]), ("V003", [8191])):
        assert [loc.index for loc in finding(chunked, code).locations] == rows
    assert codes(chunked) == codes(contiguous) == {"V001", "V002", "V003", "V004"}
    for ours, theirs in zip(chunked.statistics[0].channels, contiguous.statistics[0].channels, strict=True):
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-6)  # (sums in another order: the last digits move)


def test_clean_data_has_no_finding_and_correct_statistics(tmp_path: Path, rng: np.random.Generator) -> None:
    data = (rng.normal(size=(5000, 3, 4, 4)) * [[[[1.0]], [[2.0]], [[3.0]]]] + 1000.0).astype(np.float32)
    path = write_h5(tmp_path / "c.h5", {"images": (data, {"chunks": (100, 3, 4, 4)})})
    report = run_scan(path, shard_bytes=1 << 16, workers=2)
    assert report.findings == []
    assert report.summary.passed and report.exit_code() == 0
    st = report.statistics[0]
    assert st.count == data.size
    assert st.mean == pytest.approx(float(data.astype(np.float64).mean()), rel=1e-6)
    assert st.std == pytest.approx(float(data.astype(np.float64).std()), rel=1e-4)
    stds = [ch["std"] for ch in st.channels]
    assert stds == pytest.approx(data.astype(np.float64).std(axis=(0, 2, 3)).tolist(), rel=1e-3)


def test_constant_feature_column_and_channel(tmp_path: Path, rng: np.random.Generator) -> None:
    table = rng.normal(size=(300, 5)).astype(np.float32)
    table[:, 3] = 2.5
    images = rng.normal(size=(50, 3, 8, 8)).astype(np.float32)
    images[:, 1] = 0.0
    path = write_h5(tmp_path / "k.h5", {"table": table, "images": (images, {"chunks": (10, 1, 8, 8)})})
    found = finding(run_scan(path), "V004")
    assert sorted((loc.dataset, loc.detail) for loc in found.locations) == [
        ("/images", "channel 1 is always 0"),
        ("/table", "column 3 is always 2.5"),
    ]


def test_a_constant_feature_with_non_finite_values_says_so(tmp_path: Path, rng: np.random.Generator) -> None:
    # the moments count finite values only: a column of zeros and one Inf is constant (standardising it gives
    # NaN all the same), but it was "column 1 is always 0"
    table = rng.normal(size=(300, 4)).astype(np.float32)
    table[:, 1], table[7, 1] = 0.0, np.inf
    table[:, 2], table[[9, 10], 2] = 5.0, np.nan
    table[:, 3] = 2.5
    images = rng.normal(size=(50, 3, 8, 8)).astype(np.float32)
    images[:, 1], images[4, 1, 2, 2] = 1.0, np.nan
    path = write_h5(tmp_path / "k.h5", {"table": table, "images": images})
    found = finding(run_scan(path, workers=2, shard_bytes=1 << 14), "V004")
    assert sorted((loc.dataset, loc.detail) for loc in found.locations) == [
        ("/images", "channel 1 is always 1 where finite (1 NaN or Inf value: see nan-value, inf-value)"),
        ("/table", "column 1 is always 0 where finite (1 NaN or Inf value: see nan-value, inf-value)"),
        ("/table", "column 2 is always 5 where finite (2 NaN or Inf values: see nan-value, inf-value)"),
        ("/table", "column 3 is always 2.5"),
    ]


@pytest.mark.parametrize("chunks", [None, (10, 3, 8, 8), (10, 1, 8, 8)])
def test_constant_samples_of_images_are_found_and_table_rows_are_not(
    tmp_path: Path, rng: np.random.Generator, chunks: tuple[int, ...] | None
) -> None:
    images = rng.normal(size=(50, 3, 8, 8)).astype(np.float32)
    images[7] = 0.0
    images[31] = 0.25
    images[40, :, :, :] = 1.0
    images[40, 2, 7, 7] = 1.5  # one value apart: not constant, and not where the probes look
    table = rng.normal(size=(50, 6)).astype(np.float32)
    table[3] = 0.0  # a feature row of zeros is ordinary
    masks = np.zeros((50, 8, 8), np.uint8)  # so is an all-background segmentation mask
    datasets = {"images": (images, {"chunks": chunks}), "table": table, "seg_mask": masks, "gt": masks}
    path = write_h5(tmp_path / "c.h5", datasets)
    found = finding(run_scan(path), "V005")
    assert [(loc.dataset, loc.index, loc.detail) for loc in found.locations] == [
        ("/images", 7, "every value is 0 (3×8×8)"),
        ("/images", 31, "every value is 0.25 (3×8×8)"),
    ]
    assert found.count == 2


def test_rows_a_writer_never_wrote_are_constant_samples(tmp_path: Path, rng: np.random.Generator) -> None:
    path = tmp_path / "unfinished.h5"
    with h5py.File(path, "w") as fh:
        data = fh.create_dataset("data", shape=(100, 3, 4, 4), chunks=(10, 3, 4, 4), dtype="f4")
        labels = fh.create_dataset("label", shape=(100,), dtype="i8")
        data[:60] = rng.uniform(size=(60, 3, 4, 4))
        labels[:60] = rng.integers(0, 3, 60)
    report = run_scan(path, max_locations=1000)
    found = finding(report, "V005")
    assert [loc.index for loc in found.locations] == list(range(60, 100))
    assert report.exit_code() == 0  # a warning: the gate decides with --fail-on warning
    assert run_scan(path, fail_on="warning").exit_code() == 1


def test_nan_fill_value_in_unwritten_chunks_is_found(tmp_path: Path) -> None:
    path = tmp_path / "fill.h5"
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset("x", shape=(64, 4), chunks=(16, 4), dtype="f4", fillvalue=np.nan)
        ds[0:16] = 1.0
        ds[32:64] = 2.0
    nan = finding(run_scan(path, max_locations=100), "V001")
    assert [loc.index for loc in nan.locations] == list(range(16, 32))


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_large_chunks_in_a_two_dimensional_grid_some_never_written(tmp_path: Path, compression: str | None) -> None:
    """Chunks of 256 KB and more are located through the chunk index and read raw: edge chunks, chunks that
    split rows, and chunks never written (the fill value) must read exactly as HDF5 reads them."""
    path = tmp_path / "grid.h5"
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset(
            "x", shape=(600, 600), chunks=(256, 256), dtype="f4", fillvalue=np.nan, compression=compression
        )
        block = np.arange(512 * 600, dtype=np.float32).reshape(512, 600)
        block[300, 550] = np.nan
        ds[0:512] = block
    report = run_scan(path, max_locations=1000, shard_bytes=1 << 18, block_bytes=1 << 18, workers=2)
    nan = finding(report, "V001")
    assert [loc.index for loc in nan.locations] == [300, *range(512, 600)]
    assert nan.values == 1 + 88 * 600
    with h5py.File(path, "r") as fh:
        whole = fh["x"][()]
    stats = report.statistics[0]
    assert stats.count == int(np.isfinite(whole).sum())
    assert stats.max == float(np.nanmax(whole)) and stats.min == float(np.nanmin(whole))


def test_userblock_offsets_are_honoured(tmp_path: Path) -> None:
    data = np.ones((2000, 256), np.float32)
    data[1500, 3] = np.nan
    path = write_h5(tmp_path / "ub.h5", {"c": data, "k": (data, {"chunks": (1000, 256)})}, userblock_size=4096)
    nan = finding(run_scan(path), "V001")
    assert sorted((loc.dataset, loc.index) for loc in nan.locations) == [("/c", 1500), ("/k", 1500)]


def test_integer_and_scalar_and_string_datasets(tmp_path: Path) -> None:
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("pixels", data=np.arange(400, dtype=np.uint8).reshape(100, 4))
        fh.create_dataset("scale", data=np.float32(np.nan))
        fh.create_dataset("names", data=np.array([b"a", b"b"]))
        fh.attrs["note"] = "attributes are not samples"
    report = run_scan(path)
    # a scalar dataset holds one value and has no index: h5py refuses ``ds[0]`` on it
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/scale", None)]
    assert {s.dataset for s in report.statistics} == {"/pixels", "/scale"}


def test_folder_of_files_relative_posix_paths(tmp_path: Path, rng: np.random.Generator) -> None:
    bad = rng.normal(size=(10, 2)).astype(np.float32)
    bad[4, 1] = np.nan
    write_h5(tmp_path / "ds" / "a" / "one.h5", {"x": rng.normal(size=(10, 2)).astype(np.float32)})
    write_h5(tmp_path / "ds" / "b" / "two.hdf5", {"x": bad})
    report = run_scan(tmp_path / "ds")
    assert report.source.kind == "hdf5"
    assert [loc.short() for loc in finding(report, "V001").locations] == ["b/two.hdf5:/x[4]"]
    assert codes(report) == {"V001"}


def test_values_near_the_top_of_float32_keep_exact_statistics_and_no_warning(tmp_path: Path) -> None:
    data = np.random.default_rng(3).random((300, 4)).astype(np.float32)
    data[3, 0] = 3e38  # its square overflows float32 (pytest turns a RuntimeWarning into a failure)
    data[200, 0] = -2e38
    path = write_h5(tmp_path / "top.h5", {"x": (data, {"chunks": (100, 4)})})
    report = run_scan(path, shard_bytes=1 << 12)
    stats = report.statistics[0]
    wide = data.astype(np.float64)
    assert stats.std == pytest.approx(float(wide.std()), rel=1e-6)
    assert stats.channels[0]["std"] == pytest.approx(float(wide[:, 0].std()), rel=1e-6)
    assert [loc.index for loc in finding(report, "V003").locations] == [3, 200]


def test_large_uncompressed_chunks_in_any_file_order(tmp_path: Path) -> None:
    """Whole-row chunks lying one after the other in the file are read as one block; chunks written out of
    order (here last to first) are read one by one: both give the same exact answer."""
    data = np.random.default_rng(5).normal(size=(2000, 512)).astype(np.float32)
    for r in (3, 700, 1999):
        data[r, 100] = np.nan
    in_order = write_h5(tmp_path / "in.h5", {"x": (data, {"chunks": (256, 512)})})
    reverse = tmp_path / "rev.h5"
    with h5py.File(reverse, "w") as fh:
        ds = fh.create_dataset("x", shape=data.shape, dtype=np.float32, chunks=(256, 512))
        for start in reversed(range(0, 2000, 256)):
            ds[start : start + 256] = data[start : start + 256]
    for path in (in_order, reverse):
        report = run_scan(path, block_bytes=1 << 20, shard_bytes=3 << 20)
        assert [loc.index for loc in finding(report, "V001").locations] == [3, 700, 1999], path.name
        stats = report.statistics[0]
        assert stats.count == data.size - 3
        assert stats.max == pytest.approx(float(np.nanmax(data)), rel=1e-6)
        assert stats.min == pytest.approx(float(np.nanmin(data)), rel=1e-6)


def test_numeric_columns_of_a_compound_table_are_scanned(tmp_path: Path) -> None:
    """pandas' format="table" (PyTables) stores a frame as one compound dataset: its numeric columns are
    data like any other (a NaN in one is found at its row), its text columns are skipped."""
    rows = 500
    table = np.zeros(rows, dtype=[("index", "<i8"), ("values_block_0", "<f8", (3,)), ("name", "S8"), ("w", "<f4")])
    table["index"] = np.arange(rows)
    table["values_block_0"] = np.random.default_rng(1).normal(size=(rows, 3))
    table["values_block_0"][123, 2] = np.nan
    table["w"] = 1.5
    table["w"][400] = np.inf
    path = tmp_path / "frame.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("df/table", data=table, chunks=(64,))
    report = run_scan(path, shard_bytes=1 << 12)
    nan = finding(report, "V001")
    assert [(loc.dataset, loc.index) for loc in nan.locations] == [("/df/table['values_block_0']", 123)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V002").locations] == [("/df/table['w']", 400)]
    names = sorted(s.dataset for s in report.statistics)
    assert names == ["/df/table['index']", "/df/table['values_block_0']", "/df/table['w']"]
    block = next(s for s in report.statistics if s.dataset.endswith("['values_block_0']"))
    assert block.count == rows * 3 - 1 and len(block.channels) == 3
    assert report.summary.items_scanned == rows * 3


@pytest.mark.parametrize("workers", [0, 2])
def test_fields_of_nested_compounds_are_columns(tmp_path: Path, workers: int) -> None:
    """A compound inside a compound (h5py writes one from a nested NumPy dtype; also in arrays of compounds):
    each numeric leaf is a column named by its path of fields, ``/t['pos']['y']``, scanned at its exact row; a
    nested field named like labels (``meta['y']``) is data, a flat one (``label``) labels, as before."""
    rows = 3000
    kind = nested_dtype(("c", "<c8"))
    table = nested_table(rows, [1234], 7, kind)
    scalar = np.zeros((), kind)
    scalar["pos"]["y"] = np.nan
    path = tmp_path / "nested.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("t", data=table, chunks=(64,))
        fh["scalar"] = scalar
    report = run_scan(path, workers, shard_bytes=1 << 12, block_bytes=1 << 10, num_classes=4)
    nan = [(loc.dataset, loc.index) for loc in finding(report, "V001").locations]
    assert nan == [("/scalar['pos']['y']", None), ("/t['pos']['y']", 1234)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V002").locations] == [
        ("/t['meta']['inner']['z']", 2999)
    ]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V003").locations] == [("/t['pts']['a']", 7)]
    assert {loc.dataset for loc in finding(report, "V004").locations} == {"/t['pts']['b']"}
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 3"]  # /t['label']
    assert "L002" not in codes(report)  # meta['y'] (1000 and more) is no class id: data
    names = {s.dataset for s in report.statistics if s.dataset.startswith("/t")}
    leaves = ["['meta']['inner']['z']", "['meta']['y']", "['pos']['x']", "['pos']['y']", "['pts']['a']", "['pts']['b']"]
    assert names == {"/t" + c for c in leaves}
    pts = next(s for s in report.statistics if s.dataset == "/t['pts']['a']")
    assert pts.shape == [rows, 3] and pts.count == rows * 3
    assert report.info["hdf5.not_scanned"] == (
        "2 datasets not scanned: nested.h5:/scalar['meta']['c'] (complex complex64), "
        "nested.h5:/t['meta']['c'] (complex complex64)"
    )


@pytest.mark.parametrize("order", ["shuffle-deflate", "deflate-shuffle"])
def test_either_order_of_shuffle_and_deflate_reads_as_hdf5_reads_it(tmp_path: Path, order: str) -> None:
    """The C API applies filters in the order they were set: deflate before shuffle is valid, and must be
    undone in the reverse order (inflated last)."""
    data = np.round(np.random.default_rng(12).standard_normal((12288, 32)), 2).astype(np.float32)
    data[5000, 3] = np.nan
    path = tmp_path / "ordered.h5"
    with h5py.File(path, "w") as fh:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4096, 32))
        for step in order.split("-"):
            dcpl.set_shuffle() if step == "shuffle" else dcpl.set_deflate(6)
        ds = h5py.h5d.create(fh.id, b"x", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple(data.shape), dcpl=dcpl)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
    report = run_scan(path)
    assert codes(report) == {"V001"}
    assert [loc.index for loc in finding(report, "V001").locations] == [5000]


def _channel(report: Any, c: int) -> dict[str, Any]:
    return report.statistics[0].channels[c]  # type: ignore[no-any-return]


def test_a_non_finite_first_value_keeps_a_large_offset_channel_exact(tmp_path: Path) -> None:
    """The shift that keeps 1e6 ± 1e-3 exact is taken from a finite value, not from a NaN in row 0."""
    data = 1e6 + np.random.default_rng(5).normal(0, 1e-3, (100_000, 2))
    data[0, 0] = np.nan
    report = run_scan(write_h5(tmp_path / "o.h5", {"x": data}))
    finite = data[1:, 0]
    assert _channel(report, 0)["std"] == pytest.approx(float(finite.std()), rel=1e-4)
    assert _channel(report, 1)["std"] == pytest.approx(float(data[:, 1].std()), rel=1e-4)


def test_a_channel_constant_within_blocks_but_not_across_them(tmp_path: Path) -> None:
    data = np.full((2_000_000, 1), 1e6)
    data[1_000_000:] += 1e-3  # a per-session offset, stored in order: every block constant
    report = run_scan(write_h5(tmp_path / "c.h5", {"x": data}))
    assert report.statistics[0].std == pytest.approx(0.0005, rel=1e-4)  # one channel: the dataset's own


def test_long_float32_columns_are_summed_without_drift(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    data = np.stack([np.full(1_000_000, 0.1), rng.uniform(0, 1, 1_000_000), np.full(1_000_000, 1e6)], axis=1).astype(
        np.float32
    )
    report = run_scan(write_h5(tmp_path / "t.h5", {"x": data}))
    wide = data.astype(np.float64)
    for c in range(3):
        assert _channel(report, c)["mean"] == pytest.approx(float(wide[:, c].mean()), rel=1e-6), c
        assert _channel(report, c)["std"] == pytest.approx(float(wide[:, c].std()), rel=1e-5, abs=1e-9), c


@pytest.mark.parametrize("layout", ["contiguous", "chunked-big", "chunked-small"])
def test_custom_float_types_are_read_as_hdf5_converts_them(tmp_path: Path, layout: str) -> None:
    """bfloat16 stored as an HDF5 custom 2-byte float: h5py reads it as float32. Its raw bytes are no
    float32 (and fewer than the dataset's float32 size: reading them raw ran into the next dataset)."""
    bf16 = h5py.h5t.IEEE_F32LE.copy()
    bf16.set_fields(15, 7, 8, 0, 7)
    bf16.set_offset(0)
    bf16.set_precision(16)
    bf16.set_size(2)
    bf16.set_ebias(127)
    values = np.ones((20000, 8), np.float32)
    values[3, 1], values[60, 2], values[7, 0] = np.nan, np.inf, 1e30
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)
    path = tmp_path / "bf16.h5"
    with h5py.File(path, "w") as f:
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        if layout != "contiguous":
            plist.set_chunk((20000, 8) if layout == "chunked-big" else (16, 8))
        space = h5py.h5s.create_simple(values.shape)
        ds = h5py.h5d.create(f.id, b"x", bf16, space, dcpl=plist)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=bf16)
        f["y"] = np.full((100, 8), 5.0, np.float32)  # the bytes after /x
    report = run_scan(path, max_locations=100)
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/x", 3)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V002").locations] == [("/x", 60)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V003").locations] == [("/x", 7)]
    assert "S002" not in codes(report)


def test_array_elements_and_compounds_of_any_rank_are_scanned(tmp_path: Path) -> None:
    """HDF5 array element types (MATLAB and C writers), 2-D and scalar compound datasets: their numbers are
    scanned at their rows, the fields of a nested compound too (``/cmp2d['nest']['p']``); complex compound fields,
    nested or not, are named as not scanned."""
    rng = np.random.default_rng(1)
    values = rng.normal(size=(50, 4)).astype("f4")
    values[10, 2], values[20, 0] = np.nan, np.inf
    table = np.zeros((50, 4), [("a", "f4"), ("b", "f8"), ("z", "c8"), ("nest", [("p", "f4"), ("w", "c8")])])
    table["a"], table["b"] = rng.normal(size=(50, 4)), rng.normal(size=(50, 4))
    table["nest"]["p"] = rng.normal(size=(50, 4))
    table["a"][7, 2], table["nest"]["p"][33, 1] = np.nan, np.nan
    scalar = np.zeros((), [("a", "f4")])
    scalar["a"] = np.nan
    path = tmp_path / "types.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("arr", shape=(50,), dtype=np.dtype(("f4", (4,))), chunks=(8,))[...] = values
        f["cmp2d"] = table
        f["scalar"] = scalar
    report = run_scan(path, max_locations=50)
    nan = [(loc.dataset, loc.index) for loc in finding(report, "V001").locations]
    assert nan == [("/arr", 10), ("/cmp2d['a']", 7), ("/cmp2d['nest']['p']", 33), ("/scalar['a']", None)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V002").locations] == [("/arr", 20)]
    arr = next(s for s in report.statistics if s.dataset == "/arr")
    assert arr.shape == [50, 4] and arr.count == 200 - 2
    assert "/cmp2d['z'] (complex complex64)" in report.info["hdf5.not_scanned"]
    assert "/cmp2d['nest']['w'] (complex complex64)" in report.info["hdf5.not_scanned"]
    assert "nested" not in report.info["hdf5.not_scanned"]
    nest = next(s for s in report.statistics if s.dataset == "/cmp2d['nest']['p']")
    assert nest.shape == [50, 4] and nest.count == 200 - 1
    assert "S002" not in codes(report)


def _unfiltered_edge_chunks(path: Path, data: np.ndarray[Any, Any], chunks: tuple[int, int], gzip: bool) -> None:
    """A file whose partial edge chunks are stored unfiltered: H5Pset_chunk_opts(DONT_FILTER_PARTIAL_CHUNKS), a
    valid layout flag (HDF5 1.10+) that h5py does not expose, set through the HDF5 library h5py carries."""
    import ctypes

    library = next((Path(h5py.__file__).parent.parent / "h5py.libs").glob("libhdf5-*"))
    hdf5 = ctypes.CDLL(str(library))
    with h5py.File(path, "w", libver="latest") as fh:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk(chunks)
        dcpl.set_shuffle()
        if gzip:
            dcpl.set_deflate(4)
        assert hdf5.H5Pset_chunk_opts(ctypes.c_int64(dcpl.id), ctypes.c_uint(2)) >= 0
        space = h5py.h5s.create_simple(data.shape, (h5py.h5s.UNLIMITED, data.shape[1]))
        ds = h5py.Dataset(h5py.h5d.create(fh.id, b"x", h5py.h5t.IEEE_F32LE, space, dcpl=dcpl))
        ds[...] = data


@pytest.mark.parametrize("gzip", [True, False], ids=["shuffle-gzip", "shuffle"])
def test_partial_edge_chunks_stored_unfiltered_are_read_as_hdf5_reads_them(
    tmp_path: Path, rng: np.random.Generator, gzip: bool
) -> None:
    """Chunks of 256 KiB are decoded by dscan itself, but a partial edge chunk may be stored without its
    filters: read as if filtered, it was a false S002 (gzip) or unshuffled garbage (shuffle), and its NaN lost."""
    data = rng.normal(size=(2500, 64)).astype(np.float32)
    data[[7, 2100, 2499], 5] = np.nan
    data[2300, 0] = np.inf
    path = tmp_path / "edge.h5"
    _unfiltered_edge_chunks(path, data, (1024, 64), gzip)
    with h5py.File(path) as fh:
        assert np.array_equal(fh["x"][()], data, equal_nan=True)  # HDF5 reads it back exactly
    report = run_scan(path, max_locations=100)
    assert [loc.index for loc in finding(report, "V001").locations] == [7, 2100, 2499]
    assert [loc.index for loc in finding(report, "V002").locations] == [2300]
    assert "S002" not in codes(report)
    stats = report.statistics[0]
    finite = data[np.isfinite(data)].astype(np.float64)
    assert (stats.count, stats.nan, stats.inf) == (finite.size, 3, 1)
    assert (stats.min, stats.max) == pytest.approx((finite.min(), finite.max()), rel=1e-6)
    assert stats.mean == pytest.approx(finite.mean(), abs=1e-6)
    last = stats.channels[63]
    assert last["count"] == 2500 and last["max"] == pytest.approx(float(data[:, 63].max()), rel=1e-6)


def test_an_overflowing_moment_survives_the_services_json(tmp_path: Path) -> None:
    """Finite float64 values above 1e154 overflow the sum of squares: the shard's partial still travels as
    JSON (the service's way from shard to merge) and merges into the report the CLI gives."""
    from scanner_service import ScanConfig, build_report, merge, plan, scan_shard
    from scanner_service.partial import Partial
    from scanner_service.text import dump_json

    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.array([0.0, 1e200, 2.0])
    config = ScanConfig()
    planned = plan(path, config)
    parts = [scan_shard(planned.source.kind, planned.source.path, s, config) for s in planned.shards]
    travelled = [Partial.model_validate_json(dump_json(p)) for p in parts]
    local = build_report(planned.source, merge([planned.partial, *parts]), config, 0.0)
    remote = build_report(planned.source, merge([planned.partial, *travelled]), config, 0.0)
    assert dump_json(remote) == dump_json(local)  # (as JSON: a NaN moment is unequal to itself as a float)
    assert [(f.code, f.locations[0].index) for f in remote.findings] == [("V003", 1)]


def test_nan_in_every_block_keeps_exact_statistics_and_places_without_masked_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tabular data with NaN as its missing value (one in every row), Inf here and there, a channel all NaN in a
    block, a constant one, channels-last images and a 3-D cube: counts, min, max, mean and std of the finite
    values, and every NaN and Inf at its sample. A well-conditioned block with NaN takes the fast path's sums
    (on a copy with zeros in their place), not the masked float64 path: ``Moments.shifted`` is never called."""
    from scanner_service.statistics import Moments

    rng = np.random.default_rng(11)
    table = rng.normal(3.0, 2.0, (20_000, 6)).astype(np.float32)
    table[:, 4] = 2.5
    table[np.arange(20_000), rng.integers(0, 6, 20_000)] = np.nan
    table[:5000, 3] = np.nan
    table[[7, 4444, 19_999], [0, 5, 2]] = [np.inf, -np.inf, np.inf]
    images = rng.uniform(0, 1, (50, 8, 8, 3)).astype(np.float32)  # N×H×W×C: channels last
    images[[3, 3, 40], [1, 7, 0], [2, 2, 5], [0, 2, 1]] = [np.nan, np.inf, np.nan]
    cube = rng.normal(-1.0, 0.5, (300, 3, 16))
    cube[rng.integers(0, 300, 40), rng.integers(0, 3, 40), rng.integers(0, 16, 40)] = np.nan
    dense = rng.normal(0.0, 1.0, (3000, 4))  # half NaN: masks, not indices
    dense[rng.random(dense.shape) < 0.5] = np.nan
    dense[[5, 2999], [1, 3]] = [np.inf, -np.inf]
    dense[:, 2] = np.nan
    arrays = {"table": table, "images": images, "cube": cube, "dense": dense}
    path = write_h5(tmp_path / "m.h5", arrays)
    calls: list[object] = []
    shifted = Moments.shifted
    monkeypatch.setattr(Moments, "shifted", lambda *a, **k: calls.append(a) or shifted(*a, **k))
    report = run_scan(path, max_locations=100_000)
    assert calls == []

    stats = {s.dataset: s for s in report.statistics}
    for name, data, channels in (
        ("/table", table, table),
        ("/images", images, np.moveaxis(images, 3, 1)),
        ("/cube", cube, cube),
        ("/dense", dense, dense),
    ):
        s = stats[name]
        assert (s.nan, s.inf) == (int(np.isnan(data).sum()), int(np.isinf(data).sum())), name
        for c, row in enumerate(s.channels):
            values = channels[:, c].reshape(-1).astype(np.float64)
            values = values[np.isfinite(values)]
            assert row["count"] == values.size, (name, c)
            if not values.size:
                assert row["min"] is row["max"] is row["mean"] is None
                continue
            assert (row["min"], row["max"]) == (float(f"{values.min():.7g}"), float(f"{values.max():.7g}"))
            assert row["mean"] == pytest.approx(values.mean(), rel=1e-6), (name, c)
            assert row["std"] == pytest.approx(values.std(), rel=1e-6, abs=1e-9), (name, c)
    for code, test in (("V001", np.isnan), ("V002", np.isinf)):
        places = sorted((loc.dataset, loc.index) for loc in finding(report, code).locations)
        expected = sorted(
            (f"/{name}", int(r))
            for name, data in arrays.items()
            for r in np.flatnonzero(test(data).reshape(len(data), -1).any(axis=1))
        )
        assert places == expected, code
        assert finding(report, code).values == sum(int(test(d).sum()) for d in arrays.values())


def test_a_column_is_constant_across_the_shards_of_a_folder_not_within_each(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """A folder of shards (train_000.h5 ...) is one set of data, as its labels are one stream: a column constant
    in every shard with one value is one constant feature (it was one per shard), and a column constant within
    each shard but not across them is none (it was reported in every shard). A single file is judged alone."""
    for i in range(4):
        data = rng.random((50, 5)).astype(np.float32)
        data[:, 1] = 0.25  # constant everywhere
        data[:, 3] = float(i)  # constant within each shard only
        write_h5(tmp_path / "shards" / f"train_{i:03d}.h5", {"data": data, "label": np.arange(50) % 3})
        if i == 0:
            write_h5(tmp_path / "one.h5", {"data": data})
    for workers in (0, 2):
        report = run_scan(tmp_path / "shards", workers=workers)
        found = finding(report, "V004")
        assert found is not None and found.count == 1, found
        (loc,) = found.locations
        assert (loc.path, loc.dataset) == (".", "/data")
        assert loc.detail == "column 1 is always 0.25 in all 4 files (split train)"
    alone = finding(run_scan(tmp_path / "one.h5"), "V004")
    assert alone is not None and [loc.detail for loc in alone.locations] == [
        "column 1 is always 0.25",
        "column 3 is always 0",
    ]


def test_a_column_is_constant_across_the_shards_of_a_numpy_folder_not_within_each(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """train/0/x.npy and train/1/x.npy (arrays of one name, as their y.npy are one label stream): a column of 7 in
    both is one constant feature at train; a column of 1 in one and 2 in the other is none."""
    for i in range(2):
        x = rng.random((50, 4)).astype(np.float32)
        x[:, 0], x[:, 2] = 7.0, float(i + 1)
        (tmp_path / "data" / "train" / str(i)).mkdir(parents=True)
        np.save(tmp_path / "data" / "train" / str(i) / "x.npy", x)
        np.save(tmp_path / "data" / "train" / str(i) / "y.npy", np.arange(50) % 3)
    found = finding(run_scan(tmp_path / "data"), "V004")
    assert found is not None and [(loc.path, loc.dataset, loc.detail) for loc in found.locations] == [
        ("train", None, "column 0 is always 7 in all 2 files")
    ]
