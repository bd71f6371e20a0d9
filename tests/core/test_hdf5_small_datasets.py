"""Files of many small datasets (one group per sample), and 1-D datasets named like labels that are coordinates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from scanner_service import report as report_module
from scanner_service.sources import hdf5
from tests.conftest import cli_json, codes, finding, run_scan, write_h5


def _compact(fh: h5py.File, name: str, data: np.ndarray) -> None:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple(data.shape)
    dsid = h5py.h5d.create(fh.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))


def _per_sample_file(path: Path, rng: np.random.Generator) -> tuple[Path, dict[int, np.ndarray]]:
    """60 groups ``/sample_NNN`` with an 8×8×3 float32 image (contiguous, compact or one chunk, in turn), an
    8×8 uint8 mask and a scalar label; a few samples hold something to find."""
    images = {i: rng.normal(size=(8, 8, 3)).astype(np.float32) for i in range(60)}
    images[5][2, 1, 0] = np.nan
    images[9][4, 0, 2] = np.inf
    images[12][:] = 7.0  # a blank image: a constant sample (each dataset is one: one group per sample)
    images[20][1, 2, 0] = 1e5  # beyond float16's range
    with h5py.File(path, "w") as fh:
        for i, image in images.items():
            group = fh.create_group(f"sample_{i:03d}")
            if i % 3 == 1:
                _compact(fh, f"sample_{i:03d}/image", image)
            else:
                group.create_dataset("image", data=image, chunks=image.shape if i % 3 == 2 else None)
            mask = np.indices((8, 8)).sum(axis=0).astype(np.uint8) % 2 * (i != 30)
            group.create_dataset("mask", data=mask)  # all background: a target, no constant sample
            group["label"] = np.int64(i % 4)
    return path, images


def test_many_small_datasets_are_read_together_with_exact_locations(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small datasets are read many at a time, not one general read each; what they hold is found at the same
    places, and their statistics are theirs."""
    path, images = _per_sample_file(tmp_path / "samples.h5", rng)
    general: list[str] = []
    opened = hdf5._SegmentReader.__init__

    def counting(self: Any, source: Any, fh: Any, fd: int, seg: dict[str, Any]) -> None:
        general.append(seg["dataset"])
        opened(self, source, fh, fd, seg)

    monkeypatch.setattr(hdf5._SegmentReader, "__init__", counting)
    report = run_scan(path)
    assert general == []
    assert [(loc.dataset, loc.index) for loc in finding(report, "V001").locations] == [("/sample_005/image", 2)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V002").locations] == [("/sample_009/image", 4)]
    assert [(loc.dataset, loc.index) for loc in finding(report, "V003").locations] == [("/sample_020/image", 1)]
    constant = finding(report, "V005")
    assert [(loc.dataset, loc.index, loc.detail) for loc in constant.locations] == [
        ("/sample_012/image", None, "every value is 7 (8×8×3)")
    ]
    assert codes(report) == {"V001", "V002", "V003", "V005"}  # an all-background mask is one sample of many
    assert report.summary.items_scanned == 60 * (8 + 8 + 1)
    stats = {s.dataset: s for s in report.statistics}
    assert set(stats) == {"/sample_*/image", "/sample_*/mask"}  # one per role (``test_hdf5_per_sample``)
    got, every = stats["/sample_*/image"], np.stack([images[i] for i in range(60)]).astype(np.float64)
    finite = np.isfinite(every)
    assert got.shape == [60, 8, 8, 3] and got.count == finite.sum() and got.nan == got.inf == 1
    assert got.min == pytest.approx(every[finite].min(), rel=1e-6)
    assert got.max == pytest.approx(every[finite].max(), rel=1e-6)
    assert got.mean == pytest.approx(every[finite].mean(), rel=1e-5, abs=1e-6)
    assert got.std == pytest.approx(every[finite].std(), rel=1e-5)
    for c in range(3):  # channels: the images' last axis
        column = every[..., c][finite[..., c]]
        assert got.channels[c]["mean"] == pytest.approx(column.mean(), rel=1e-5, abs=1e-6)
        assert got.channels[c]["std"] == pytest.approx(column.std(), rel=1e-5, abs=1e-6)
    assert [(t.dataset, t.total) for t in report.labels] == [("/sample_*/label", 60)]


def test_per_channel_statistics_beyond_the_cap_are_named_not_listed(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report lists at most ``CHANNEL_ROWS`` per-channel rows: past it, each dataset keeps its totals and a
    note says what is left out (20,000 images of 64 columns made a report of 240 MB)."""
    path = write_h5(tmp_path / "c.h5", {f"d{i}": rng.normal(size=(4, 8, 2)).astype(np.float32) for i in range(3)})
    assert all(len(s.channels) == 8 for s in run_scan(path).statistics)
    monkeypatch.setattr(report_module, "CHANNEL_ROWS", 20)
    report = run_scan(path)
    assert [s.channels for s in report.statistics] == [[], [], []]
    assert all(s.count == 64 and s.std is not None for s in report.statistics)
    assert report.info["statistics.channels"].startswith("per-channel statistics not listed: 24 channels in 3 ")


def test_a_coordinate_named_like_labels_is_no_label(tmp_path: Path, rng: np.random.Generator) -> None:
    """``y = np.arange(512)`` beside data of 300 × 512 gives the columns' positions (netCDF and xarray name
    coordinates x and y): no label-length mismatch, exit 0. Real mismatches stay errors."""
    data = rng.normal(size=(300, 512)).astype(np.float32)
    status, report = cli_json(write_h5(tmp_path / "coord.h5", {"data": data, "y": np.arange(512)}))
    assert status == 0, report["findings"]
    assert report["findings"] == [] and report["labels"] == []
    assert report["info"]["hdf5.coordinates"].startswith("1 dataset named like labels read as coordinates")
    assert "coord.h5:/y (512 increasing values, axis 1 of /data)" in report["info"]["hdf5.coordinates"]
    assert {s["dataset"] for s in report["statistics"]} == {"/data", "/y"}  # scanned as values

    falling = write_h5(tmp_path / "falling.h5", {"data": data, "y": np.linspace(1.0, 0.0, 512)})
    assert "L001" not in codes(run_scan(falling))
    short = write_h5(tmp_path / "short.h5", {"data": data, "labels": np.arange(299) % 10})
    assert finding(run_scan(short), "L001").locations[0].detail == "300 samples but /labels has 299 labels"
    classes = write_h5(tmp_path / "classes.h5", {"data": data, "y": rng.integers(0, 10, 512)})
    assert finding(run_scan(classes), "L001") is not None  # class ids, not one monotonic run: labels
    named = run_scan(write_h5(tmp_path / "named.h5", {"data": data, "y": np.arange(512)}), labels="y")
    assert finding(named, "L001") is not None  # named as labels: labels
