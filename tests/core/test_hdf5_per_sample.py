"""One group per sample (``/sample_000001/image``, ``mask``, ``label``) and flat folders of samples
(``/images/000001``): each dataset is ONE sample, judged as one (``sources/hdf5_roles``)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.conftest import codes, finding, run_scan, write_h5

GROUPS = 40
READERS = ["fast", "attributes", "gzip"]
"""How the images are stored: read many at a time (``hdf5_small``), or one by one by the general reader (a
dataset with an attribute, or a filter)."""


def _images(rng: np.random.Generator, channels: int = 3) -> dict[int, np.ndarray]:
    """Clean 16×16 images with a black border row and column (constant rows and columns of each image)."""
    images = {}
    for i in range(GROUPS):
        image = rng.integers(1, 255, (16, 16, channels)).astype(np.float32)
        image[0] = 0.0
        image[:, 0] = 0.0
        images[i] = image
    return images


def _grouped(path: Path, images: dict[int, np.ndarray], reader: str, labels: dict[int, int] | None = None) -> Path:
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as fh:
        for i, image in images.items():
            group = fh.create_group(f"sample_{i:06d}")
            ds = group.create_dataset("image", data=image, compression="gzip" if reader == "gzip" else None)
            if reader == "attributes":
                ds.attrs["source"] = f"img_{i}.png"
            group["mask"] = (rng.random(image.shape[:2]) > 0.5).astype(np.uint8)
            group["label"] = np.int64(labels[i] if labels else i % 4)
    return path


@pytest.mark.parametrize("reader", READERS)
def test_border_rows_and_columns_of_clean_images_are_no_finding(
    tmp_path: Path, rng: np.random.Generator, reader: str
) -> None:
    """A black border column is no constant feature, a padded row no constant sample: each image is one
    sample. (Read row by row, every image was 16 samples of 16 'features', and warned twice.)"""
    report = run_scan(_grouped(tmp_path / "s.h5", _images(rng), reader))
    assert codes(report) == set(), [(f.code, f.locations[:2]) for f in report.findings]
    assert "sample_*/image (40 of 16×16×3)" in report.info["hdf5.per_sample"]


@pytest.mark.parametrize("reader", READERS)
def test_a_blank_image_is_one_constant_sample_at_its_dataset(
    tmp_path: Path, rng: np.random.Generator, reader: str
) -> None:
    images = _images(rng)
    images[9][:] = 0.0
    report = run_scan(_grouped(tmp_path / "s.h5", images, reader))
    constant = finding(report, "V005")
    assert constant.count == 1
    assert [(loc.dataset, loc.index, loc.detail) for loc in constant.locations] == [
        ("/sample_000009/image", None, "every value is 0 (16×16×3)")
    ]
    assert codes(report) == {"V005"}


@pytest.mark.parametrize("shard_bytes", [1, 1000, 64 << 20])
def test_a_blank_image_larger_than_a_shard_is_still_one_constant_sample(
    tmp_path: Path, rng: np.random.Generator, shard_bytes: int
) -> None:
    """A sample is never split between shards: each shard saw part of the blank 3 KB image, none all of it,
    and with ``shard_bytes`` below an image's size the finding was lost."""
    images = _images(rng)
    images[9][:] = 0.0
    report = run_scan(_grouped(tmp_path / "s.h5", images, "fast"), workers=2, shard_bytes=shard_bytes)
    constant = finding(report, "V005")
    assert constant is not None and constant.count == 1
    assert [(loc.dataset, loc.index) for loc in constant.locations] == [("/sample_000009/image", None)]
    assert codes(report) == {"V005"}


@pytest.mark.parametrize("reader", READERS)
def test_nan_keeps_its_exact_location(tmp_path: Path, rng: np.random.Generator, reader: str) -> None:
    images = _images(rng)
    images[17][3, 4, 1] = np.nan
    report = run_scan(_grouped(tmp_path / "s.h5", images, reader))
    nan = finding(report, "V001")
    assert nan.count == 1 and nan.values == 1
    assert [(loc.dataset, loc.index) for loc in nan.locations] == [("/sample_000017/image", 3)]
    assert codes(report) == {"V001"}


@pytest.mark.parametrize("reader", READERS)
def test_one_statistics_entry_per_role_with_channels_on_the_last_axis(
    tmp_path: Path, rng: np.random.Generator, reader: str
) -> None:
    """The statistics name the role, count its datasets as samples and hold the images' colours as channels;
    a channel constant across every sample (an alpha channel of 255) is a constant feature of the role."""
    images = _images(rng, channels=4)
    for image in images.values():
        image[..., 3] = 255.0
    report = run_scan(_grouped(tmp_path / "s.h5", images, reader))
    stats = {s.dataset: s for s in report.statistics}
    assert set(stats) == {"/sample_*/image", "/sample_*/mask"}
    image = stats["/sample_*/image"]
    assert image.shape == [GROUPS, 16, 16, 4] and image.count == GROUPS * 16 * 16 * 4
    every = np.stack(list(images.values())).astype(np.float64)
    assert image.mean == pytest.approx(every.mean(), rel=1e-6)
    assert image.std == pytest.approx(every.std(), rel=1e-5)
    assert len(image.channels) == 4
    for c in range(3):
        assert image.channels[c]["mean"] == pytest.approx(every[..., c].mean(), rel=1e-5)
        assert image.channels[c]["std"] == pytest.approx(every[..., c].std(), rel=1e-5)
    assert stats["/sample_*/mask"].shape == [GROUPS, 16, 16]
    feature = finding(report, "V004")
    assert [(loc.dataset, loc.detail) for loc in feature.locations] == [("/sample_*/image", "channel 3 is always 255")]
    assert codes(report) == {"V004"}


def test_scalar_labels_of_the_groups_are_one_label_stream(tmp_path: Path, rng: np.random.Generator) -> None:
    """A scalar ``label`` in every group: one stream, in group order, where the label checks work (a class
    with no sample, a label out of range at its dataset)."""
    labels = {i: i % 4 for i in range(GROUPS)}
    labels[23] = 7
    path = _grouped(tmp_path / "s.h5", _images(rng), "fast", labels)
    report = run_scan(path, num_classes=5)
    assert [(t.dataset, t.total) for t in report.labels] == [("/sample_*/label", GROUPS)]
    assert {row.label: row.count for row in report.labels[0].histogram} == {0: 10, 1: 10, 2: 10, 3: 9, 4: 0}
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 4"]
    invalid = finding(report, "L002")
    assert [(loc.dataset, loc.index) for loc in invalid.locations] == [("/sample_000023/label", None)]


def test_a_flat_group_of_numbered_images_is_samples(tmp_path: Path, rng: np.random.Generator) -> None:
    """``/images/000001`` ...: more numbered images of one type and shape than any has rows."""
    images = {f"images/{i:06d}": rng.integers(1, 255, (8, 8, 3)).astype(np.uint8) for i in range(20)}
    for image in images.values():
        image[0] = 0
    images["images/000011"][:] = 0
    report = run_scan(write_h5(tmp_path / "flat.h5", images))
    assert [(loc.dataset, loc.index) for loc in finding(report, "V005").locations] == [("/images/000011", None)]
    assert codes(report) == {"V005"}
    assert [(s.dataset, s.shape) for s in report.statistics] == [("/images/*", [20, 8, 8, 3])]


def test_usual_layouts_are_read_as_before(tmp_path: Path, rng: np.random.Generator) -> None:
    """N×H×W×C beside labels (one file, or ten folds), a few unrelated datasets, ten batches of 100 images: no
    dataset is one sample, and the reports stay what they were (their datasets' own statistics)."""
    data = rng.normal(size=(50, 8, 8, 3)).astype(np.float32)
    data[4] = 1.0  # a blank image of a batch: a constant sample, as before
    normal = run_scan(write_h5(tmp_path / "n.h5", {"x": data, "y": np.arange(50) % 5}))
    assert [(s.dataset, s.shape) for s in normal.statistics] == [("/x", [50, 8, 8, 3])]
    assert [t.dataset for t in normal.labels] == ["/y"]
    assert "hdf5.per_sample" not in normal.info

    folds = {f"fold_{k}/{name}": v for k in range(10) for name, v in (("x", data), ("y", np.arange(50) % 5))}
    folded = run_scan(write_h5(tmp_path / "folds.h5", folds))
    assert len(folded.statistics) == 10 and "hdf5.per_sample" not in folded.info
    assert finding(folded, "V005").count == 10

    few = {"train": data, "mean": data.mean(axis=0), "std": data.std(axis=0), "weights": rng.normal(size=(8, 3))}
    unrelated = run_scan(write_h5(tmp_path / "few.h5", few))
    assert {s.dataset for s in unrelated.statistics} == {"/train", "/mean", "/std", "/weights"}
    assert "hdf5.per_sample" not in unrelated.info

    batches = {f"batch_{k:02d}": rng.normal(size=(100, 8, 8, 3)).astype(np.float32) for k in range(10)}
    batched = run_scan(write_h5(tmp_path / "batches.h5", batches))
    assert len(batched.statistics) == 10 and "hdf5.per_sample" not in batched.info
