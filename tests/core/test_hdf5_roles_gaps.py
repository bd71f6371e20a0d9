"""Gaps in one group per sample (``/sample_000001/image``, ``/sample_000001/label``): a sample group without a
member most of its siblings hold (a loader's ``f['sample_000007']['label']`` raises KeyError mid-epoch), and
the files an HDF5 folder holds beside its ``.h5`` files that are NumPy datasets of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np

from tests.conftest import cli_json, codes, finding, run_scan, write_h5

GROUPS = 30


def _samples(
    path: Path,
    rng: np.random.Generator,
    groups: int = GROUPS,
    without: dict[str, set[int]] | None = None,
    notes: set[int] | None = None,
    parent: str = "",
) -> Path:
    """``groups`` sample groups of an 8×8×3 image and a scalar label; ``without`` names the groups that lack
    a member (``{'label': {7}}``), ``notes`` those that hold an optional ``notes`` vector."""
    without = without or {}
    with h5py.File(path, "a") as fh:
        for i in range(groups):
            group = fh.create_group(f"{parent}/sample_{i:06d}")
            if i not in without.get("image", set()):
                group["image"] = rng.integers(1, 255, (8, 8, 3)).astype(np.uint8)
            if i not in without.get("label", set()):
                group["label"] = np.int64(i % 3)
            if i in (notes or set()):
                group["notes"] = rng.normal(size=4).astype(np.float32)
    return path


def _locations(found: dict[str, Any]) -> list[tuple[str, str]]:
    return [(loc["dataset"], loc["detail"]) for loc in found["locations"]]


def test_a_group_without_its_label_is_a_label_length_mismatch(tmp_path: Path, rng: np.random.Generator) -> None:
    """30 image groups and 29 labels: the label stream is one short, and the loader fails at that group."""
    path = _samples(tmp_path / "s.h5", rng, without={"label": {7}})
    status, report = cli_json(path)
    assert status == 1
    found = {f["code"]: f for f in report["findings"]}
    assert set(found) == {"L001"}, report["findings"]
    mismatch = found["L001"]
    assert mismatch["count"] == 1
    [(group, detail)] = _locations(mismatch)
    assert group == "/sample_000007"
    assert "no label" in detail and "29 of the 30" in detail and "KeyError" in detail
    assert "/sample_*/label" in detail


def test_a_group_without_its_image_is_a_missing_member(tmp_path: Path, rng: np.random.Generator) -> None:
    """A group holding its label but no image: the loader's group['image'] raises KeyError."""
    path = _samples(tmp_path / "s.h5", rng, without={"image": {3, 21}})
    status, report = cli_json(path)
    assert status == 1
    found = {f["code"]: f for f in report["findings"]}
    assert set(found) == {"S007"}, report["findings"]
    assert found["S007"]["severity"] == "error" and found["S007"]["count"] == 2
    located = _locations(found["S007"])
    assert [group for group, _ in located] == ["/sample_000003", "/sample_000021"]
    assert all("no image" in detail and "28 of the 30" in detail for _, detail in located)


def test_missing_members_are_counted_exactly_and_located_up_to_the_cap(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    lost = {5, 17, 40, 41, 99}
    path = _samples(tmp_path / "s.h5", rng, groups=100, without={"label": lost, "image": {60}})
    report = run_scan(path, max_locations=2)
    mismatch = finding(report, "L001")
    assert mismatch is not None and mismatch.count == 5
    assert [loc.dataset for loc in mismatch.locations] == ["/sample_000005", "/sample_000017"]
    member = finding(report, "S007")
    assert member is not None and member.count == 1
    assert [loc.dataset for loc in member.locations] == ["/sample_000060"]
    assert codes(report) == {"L001", "S007"}
    assert [(t.dataset, t.total) for t in report.labels] == [("/sample_*/label", 95)]


def test_an_optional_member_of_a_few_groups_is_not_missing_from_the_others(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """``notes`` in 10 of 30 groups (a role of its own) is optional: the 20 groups without it are fine. A
    member held by fewer than 90% of the groups is not reported either (27 of 30 is; 26 of 30 is not)."""
    path = _samples(tmp_path / "s.h5", rng, without={"label": {4}}, notes=set(range(0, 30, 3)))
    report = run_scan(path)
    assert "sample_*/notes (10 of 4)" in report.info["hdf5.per_sample"]
    assert [loc.dataset for loc in finding(report, "L001").locations] == ["/sample_000004"]
    assert codes(report) == {"L001"}

    sparse = _samples(tmp_path / "sparse.h5", rng, without={"label": {1, 2, 3, 4}, "image": {5, 6, 7}})
    assert codes(run_scan(sparse)) == {"S007"}  # 26 of 30 labels: not reported; 27 of 30 images: reported


def test_the_usual_layout_beside_sample_groups_is_read_as_before(tmp_path: Path, rng: np.random.Generator) -> None:
    """Ten folds of N×… data, one without its labels, are no sample groups: no member is missing from them
    (that fold holds data only, as before). The sample groups under /samples beside them are judged."""
    data = rng.normal(size=(50, 8, 8, 3)).astype(np.float32)
    folds = {f"fold_{k}/x": data for k in range(10)}
    folds.update({f"fold_{k}/y": np.arange(50) % 5 for k in range(10) if k != 6})
    path = write_h5(tmp_path / "folds.h5", folds)
    _samples(path, rng, without={"image": {12}}, parent="/samples")
    report = run_scan(path)
    member = finding(report, "S007")
    assert member is not None and [loc.dataset for loc in member.locations] == ["/samples/sample_000012"]
    assert codes(report) == {"S007"}
    assert {s.dataset for s in report.statistics} >= {f"/fold_{k}/x" for k in range(10)}
    assert [t.dataset for t in report.labels if t.dataset.startswith("/fold")] == [
        f"/fold_{k}/y" for k in range(10) if k != 6
    ]


def test_numpy_files_in_an_hdf5_folder_are_named_in_the_note(tmp_path: Path, rng: np.random.Generator) -> None:
    """``data/`` with ``train.h5`` and ``mean.npy``: read as HDF5, and the ``.npy`` is named, with how to scan it."""
    data = tmp_path / "data"
    write_h5(data / "train.h5", {"x": rng.normal(size=(200, 16)).astype(np.float32), "y": np.arange(200) % 4})
    np.save(data / "mean.npy", np.zeros(16, np.float32))
    status, report = cli_json(data)
    assert status == 0, report["findings"]
    assert report["source"]["kind"] == "hdf5"
    note = report["info"]["hdf5.other_formats"]
    assert "1 NumPy file" in note and "mean.npy" in note
    assert f"dscan scan {data / 'mean.npy'}" in note

    np.savez(data / "stats.npz", mean=np.zeros(16), std=np.ones(16))
    write_h5(data / "val.h5", {"x": rng.normal(size=(50, 16)).astype(np.float32), "y": np.arange(50) % 4})
    (data / "old.nc").write_bytes(b"CDF\x01" + bytes(60))
    several = run_scan(data).info["hdf5.other_formats"]
    assert several.startswith("1 file of a version that is no HDF5, not scanned: old.nc (netCDF-3 classic); ")
    assert "2 NumPy files" in several and "mean.npy, stats.npz" in several
