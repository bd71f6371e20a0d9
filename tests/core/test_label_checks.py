"""Label checks on HDF5 label datasets."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scanner_service.labels import absent_probability, smallest_batch
from tests.conftest import codes, finding, run_scan, write_h5


def features(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.normal(size=(n, 4)).astype(np.float32)


def test_length_mismatch_names_both_lengths(tmp_path: Path, rng: np.random.Generator) -> None:
    path = write_h5(tmp_path / "m.h5", {"data": features(100, rng), "label": np.zeros(90, np.int64)})
    found = finding(run_scan(path), "L001")
    assert found.locations[0].dataset == "/data"
    assert found.locations[0].detail == "100 samples but /label has 90 labels"


def test_side_tables_beside_the_labels_are_no_length_mismatch(tmp_path: Path, rng: np.random.Generator) -> None:
    datasets = {
        "data": rng.normal(size=(500, 3, 8, 8)).astype(np.float32),
        "label": (np.arange(500) % 10).astype(np.float32),
        "mean": rng.normal(size=(3, 8, 8)).astype(np.float32),  # Caffe's mean image
        "class_weights": np.ones(10, np.float32),
        "X_val": rng.normal(size=(100, 4)).astype(np.float32),  # another split
        "truncated": rng.normal(size=(499, 4)).astype(np.float32),  # a partial write beside them: still found
    }
    report = run_scan(write_h5(tmp_path / "caffe.h5", datasets))
    assert [loc.dataset for loc in finding(report, "L001").locations] == ["/truncated"]


def test_a_labels_option_that_names_no_dataset_is_a_usage_error(tmp_path: Path, rng: np.random.Generator) -> None:
    from scanner_service.errors import ConfigError

    path = write_h5(tmp_path / "l.h5", {"data": features(10, rng), "label": np.arange(10) % 3})
    with pytest.raises(ConfigError, match="'/lable': no dataset of that name"):
        run_scan(path, labels="/lable", num_classes=3)
    assert finding(run_scan(path, labels="/label", num_classes=3), "L002") is None


def test_label_options_on_a_dataset_without_labels_leave_a_note(tmp_path: Path, rng: np.random.Generator) -> None:
    """``--num-classes`` given to data whose labels dscan does not recognise ran no label check and passed
    without a word: the report says so, in every format that shows notes."""
    from scanner_service.render import notes

    path = write_h5(tmp_path / "l.h5", {"data": features(10, rng), "cls": np.arange(10) % 3})
    report = run_scan(path, num_classes=3, batch_size=4)
    assert report.info["labels.none"].startswith("--num-classes and --batch-size given, but no class labels")
    assert report.info["labels.none"] in notes(report)
    assert "labels.none" not in run_scan(path).info  # no label option: nothing was asked
    assert "labels.none" not in run_scan(path, num_classes=3, labels="cls").info


def test_float16_labels_are_judged_without_a_numpy_warning(tmp_path: Path, rng: np.random.Generator) -> None:
    import warnings

    labels = (np.arange(100) % 5).astype(np.float16)
    labels[7] = 9
    path = write_h5(tmp_path / "h.h5", {"data": features(100, rng), "label": labels})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would reach the user's terminal
        report = run_scan(path, num_classes=5)
    assert [loc.index for loc in finding(report, "L002").locations] == [7]


def test_invalid_labels_each_reason(tmp_path: Path, rng: np.random.Generator) -> None:
    labels = np.arange(100, dtype=np.float32) % 5
    labels[[3, 10, 20, 30]] = [np.nan, -1.0, 2.5, 7.0]
    path = write_h5(tmp_path / "l.h5", {"data": features(100, rng), "labels": labels})
    found = finding(run_scan(path, num_classes=5), "L002")
    assert [(loc.index, loc.detail) for loc in found.locations] == [
        (3, "label is NaN"),
        (10, "negative label -1"),  # a whole number, as the other whole labels are shown
        (20, "non-integer label 2.5"),
        (30, "label 7 ≥ num_classes 5"),
    ]
    assert found.count == 4


def test_regression_targets_are_not_class_labels(tmp_path: Path, rng: np.random.Generator) -> None:
    target = rng.normal(size=500).astype(np.float32)
    path = write_h5(tmp_path / "r.h5", {"x": features(500, rng), "target": target})
    report = run_scan(path, batch_size=8)
    assert not codes(report) & {"L002", "L003", "L004", "L005"}
    assert report.labels[0].kind == "continuous"


def test_switching_label_invalid_off_leaves_regression_targets_continuous(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    target = np.sort(rng.normal(size=5000)).astype(np.float64)
    target[1000:1200], target[3000:3200] = 1.0, 2.0  # a few whole numbers among fractional targets
    path = write_h5(tmp_path / "r.h5", {"x": features(5000, rng), "target": target})
    for ignore in ((), ("L002",)):
        report = run_scan(path, batch_size=16, ignore=ignore)
        assert report.labels[0].kind == "continuous", ignore
        assert not codes(report) & {"L002", "L004", "L005"}


def test_labels_beyond_the_class_count_are_invalid_and_no_class(tmp_path: Path, rng: np.random.Generator) -> None:
    labels = np.array([1, 2, 3, 4] * 375 + [9, 9, 9], np.int64)  # 1-based labels, and three strays
    path = write_h5(tmp_path / "k.h5", {"x": features(labels.size, rng), "label": labels})
    report = run_scan(path, num_classes=4, batch_size=32)
    assert finding(report, "L002").count == 375 + 3  # the 4s and the 9s
    lab = report.labels[0]
    assert [(r.label, r.count) for r in lab.histogram] == [(0, 0), (1, 375), (2, 375), (3, 375)]
    assert lab.histogram[1].fraction == pytest.approx(1 / 3)
    absent = finding(report, "L004")
    assert absent is None or all("class 9" not in (loc.detail or "") for loc in absent.locations)


def test_absence_exactly_at_the_threshold_is_not_above_it(tmp_path: Path, rng: np.random.Generator) -> None:
    labels = np.array([0] + [1] * 99, np.int64)  # P(class 0 absent from 99 of 100) = 1/100 exactly
    path = write_h5(tmp_path / "t.h5", {"x": features(100, rng), "label": labels})
    report = run_scan(path, batch_size=99)
    assert finding(report, "L004") is None
    assert report.labels[0].histogram[0].min_batch_size == 99
    assert smallest_batch(25, 2, 0.01) == 22  # C(23, 22) / C(25, 22) = 1/100 exactly


def test_sorted_run_threshold_is_the_product_as_written(tmp_path: Path, rng: np.random.Generator) -> None:
    from scanner_service import ScanConfig

    assert ScanConfig(sorted_run_batches=0.29, batch_size=100).run_threshold == 29  # not int(28.999...)
    labels = np.array([0, 1] * 100 + [2] * 29 + [0, 1] * 100, np.int64)
    path = write_h5(tmp_path / "s.h5", {"x": features(labels.size, rng), "label": labels})
    assert finding(run_scan(path, batch_size=100, sorted_run_batches=0.29), "L005") is None  # 29 is not > 29


def test_missing_class_histogram_and_imbalance(tmp_path: Path, rng: np.random.Generator) -> None:
    labels = np.array([0] * 60 + [1] * 30 + [3] * 10, np.int32)
    rng.shuffle(labels)
    path = write_h5(tmp_path / "h.h5", {"x": features(100, rng), "y": labels})
    report = run_scan(path, num_classes=5)
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 2", "class 4"]
    lab = report.labels[0]
    assert [(r.label, r.count, r.missing) for r in lab.histogram] == [
        (0, 60, False),
        (1, 30, False),
        (2, 0, True),
        (3, 10, False),
        (4, 0, True),
    ]
    assert lab.missing == [2, 4] and lab.imbalance_ratio == 6.0
    many = run_scan(path, num_classes=30)  # the first missing classes by number (class 3 came after class 29)
    assert [loc.detail for loc in finding(many, "L003").locations] == ["class 2", *(f"class {c}" for c in range(4, 23))]


def test_holes_below_the_largest_label_are_missing_classes_without_num_classes(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """With no class count from anywhere, labels 0..9 without class 7 (a class a filter dropped) say K = 10
    by themselves: class 7 is missing, and a note says where K came from. Given, --num-classes decides."""
    labels = np.array([c for c in range(10) if c != 7] * 20, np.int64)
    rng.shuffle(labels)
    path = write_h5(tmp_path / "d.h5", {"x": features(labels.size, rng), "label": labels})
    report = run_scan(path)
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 7"]
    assert report.labels[0].num_classes == 10 and report.labels[0].missing == [7]
    note = report.info["labels.inferred /label"]
    assert note.startswith("10 classes (0..9) taken from the largest label, as no --num-classes was given")
    given = run_scan(path, num_classes=12)
    assert [loc.detail for loc in finding(given, "L003").locations] == ["class 7", "class 10", "class 11"]
    assert not any(key.startswith("labels.inferred") for key in given.info)


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        (range(1, 6), [0]),  # 1-based labels: a K-way loss gets label K, out of range
        ((0, 1, 2, 3, 9), [4, 5, 6, 7, 8]),  # half of 0..9 present: still a range with holes
        ((0, 5, 17), None),  # sparse ids (category numbers): no class count to infer
        (range(10), None),  # no hole: nothing inferred, nothing missing
    ],
)
def test_a_class_count_is_inferred_only_from_a_dense_range_with_holes(
    tmp_path: Path, rng: np.random.Generator, present: range | tuple[int, ...], missing: list[int] | None
) -> None:
    labels = np.repeat(np.array(list(present), np.int64), 30)
    path = write_h5(tmp_path / "d.h5", {"x": features(labels.size, rng), "label": labels})
    report = run_scan(path)
    found = finding(report, "L003")
    assert ([int(loc.detail.split()[1]) for loc in found.locations] if found else None) == missing
    assert report.labels[0].num_classes == (max(present) + 1 if missing else None)
    assert ("labels.inferred /label" in report.info) == bool(missing)


def brute_absent(total: int, in_class: int, batch: int) -> float:
    return math.comb(total - in_class, batch) / math.comb(total, batch)


@pytest.mark.parametrize(("total", "in_class", "batch"), [(10, 1, 3), (100, 5, 32), (1000, 3, 64), (50, 49, 2)])
def test_absent_probability_is_exact(total: int, in_class: int, batch: int) -> None:
    assert absent_probability(total, in_class, batch) == pytest.approx(brute_absent(total, in_class, batch), rel=1e-9)
    need = smallest_batch(total, in_class, 0.01)
    assert need is not None
    assert brute_absent(total, in_class, need) <= 0.01 < brute_absent(total, in_class, need - 1) or need == 1


def test_batch_absence_lists_probability_and_batch_size(tmp_path: Path, rng: np.random.Generator) -> None:
    labels = np.array([0] * 990 + [1] * 10, np.int64)
    rng.shuffle(labels)
    path = write_h5(tmp_path / "b.h5", {"x": features(1000, rng), "label": labels})
    report = run_scan(path, batch_size=32)
    found = finding(report, "L004")
    assert found.count == 1
    p = brute_absent(1000, 10, 32)
    need = smallest_batch(1000, 10, 0.01)
    assert found.locations[0].detail == (
        f"class 1: 10 of 1000 samples, P(absent from 32) = {p:.2%}; a batch of {need} brings it under 1.00%"
    )
    row = report.labels[0].histogram[1]
    assert row.p_absent == pytest.approx(p, rel=1e-6) and row.min_batch_size == need
    assert finding(run_scan(path), "L004") is None  # no batch size, no batch-absence finding


def test_sorted_storage_run_spanning_shards_and_files(tmp_path: Path, rng: np.random.Generator) -> None:
    folder = tmp_path / "sorted"
    first = np.array([0] * 100 + [1] * 400, np.int64)  # run of 1s continues into the next file
    second = np.array([1] * 300 + list(rng.integers(0, 2, 200)), np.int64)
    second[300] = 0
    write_h5(folder / "a.h5", {"x": features(500, rng), "label": (first, {"chunks": (50,)})})
    write_h5(folder / "b.h5", {"x": features(500, rng), "label": (second, {"chunks": (50,)})})
    report = run_scan(folder, batch_size=30, shard_bytes=1 << 16, block_bytes=1 << 12, workers=2)
    found = finding(report, "L005")
    assert found.count == 1
    loc = found.locations[0]
    assert (loc.path, loc.index, loc.detail) == ("a.h5", 100, "700 consecutive samples of label 1 (threshold 120)")


def test_labels_option_names_the_label_dataset(tmp_path: Path, rng: np.random.Generator) -> None:
    classes = np.array([0, 1, 2] * 30, np.int64)
    path = write_h5(
        tmp_path / "o.h5",
        {"x": features(90, rng), "meta/cls": classes, "label": rng.normal(size=90).astype(np.float32)},
    )
    report = run_scan(path, labels="/meta/cls", num_classes=4)
    assert [lab.dataset for lab in report.labels] == ["/meta/cls"]
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 3"]
    assert {s.dataset for s in report.statistics} == {"/x", "/label"}  # the other dataset is plain data now


def test_boolean_labels_are_classes_0_and_1(tmp_path: Path, rng: np.random.Generator) -> None:
    labels = np.zeros(200, bool)
    labels[:3] = True  # a rare positive class
    path = write_h5(tmp_path / "b.h5", {"data": rng.normal(size=(200, 4)).astype("f4"), "label": labels})
    report = run_scan(path, num_classes=2, batch_size=16)
    (tally,) = report.labels
    assert [(row.label, row.count) for row in tally.histogram] == [(0, 197), (1, 3)]
    assert "L004" in codes(report)  # class 1 is absent from most batches of 16


def test_a_label_stream_of_one_file_in_a_folder_is_located_at_that_file(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """A folder of HDF5 files: a stream only one file holds names that file (as a NumPy folder does), one that
    spans files names the folder ('.')."""
    folder = tmp_path / "data"
    write_h5(folder / "a.h5", {"x": features(100, rng), "label": np.arange(100) % 3})
    write_h5(folder / "b.h5", {"x": features(100, rng), "label": np.arange(100) % 3})
    write_h5(folder / "c.h5", {"x": features(100, rng), "cls": np.arange(100) % 3})
    report = run_scan(folder, labels="cls", num_classes=4)
    assert [(lab.path, lab.dataset) for lab in report.labels] == [("c.h5", "/cls")]
    assert [(loc.path, loc.dataset, loc.detail) for loc in finding(report, "L003").locations] == [
        ("c.h5", "/cls", "class 3")
    ]
    report = run_scan(folder, num_classes=4)
    assert [(lab.path, lab.dataset) for lab in report.labels] == [(".", "/label")]


@pytest.mark.parametrize("fmt", ["hdf5", "npy"])
@pytest.mark.parametrize("workers", [0, 2])
def test_label_arrays_of_one_name_in_split_folders_are_a_stream_per_split(
    tmp_path: Path, rng: np.random.Generator, fmt: str, workers: int
) -> None:
    """``train/*.h5`` and ``val/*.h5`` (or ``train/y.npy`` and ``val/y.npy``) each with labels of one name were
    one stream: class 3, missing from the validation split, was counted from the training split and never
    reported. Each split is now a stream (as for image folders); the shards of one split stay one stream."""
    root = tmp_path / "data"
    for split, parts, classes in (("train", 2, 4), ("val", 2, 3)):
        for part in range(parts):
            x, y = features(60, rng), np.arange(60) % classes
            if fmt == "hdf5":
                write_h5(root / split / f"part{part}.h5", {"x": x, "label": y})
            else:
                (root / split / f"part{part}").mkdir(parents=True)
                np.save(root / split / f"part{part}" / "x.npy", x)
                np.save(root / split / f"part{part}" / "y.npy", y)
    report = run_scan(root, workers=workers, num_classes=4)
    name = "/label" if fmt == "hdf5" else "y"
    assert [(lab.path, lab.dataset, lab.total) for lab in report.labels] == [
        ("train", name, 120),
        ("val", name, 120),
    ]
    missing = finding(report, "L003")
    assert [(loc.path, loc.dataset, loc.detail) for loc in missing.locations] == [("val", name, "class 3")]


@pytest.mark.parametrize("layout", ["hdf5-folders", "npy-folders", "keras-npy", "hdf5-files"])
def test_a_class_missing_from_one_split_is_found_without_a_class_count(
    tmp_path: Path, rng: np.random.Generator, layout: str
) -> None:
    """train's labels 0-9, val's 0-8: without --num-classes, each split alone showed no hole, and val's missing
    class 9 went unreported. The splits together give K = 10; train, which holds every class, has none missing."""
    root = tmp_path / "data"
    for split, n in (("train", 200), ("val", 90)):
        x, y = features(n, rng), np.arange(n) % (10 if split == "train" else 9)
        if layout == "hdf5-folders":
            write_h5(root / split / "part0.h5", {"x": x, "label": y})
        elif layout == "hdf5-files":
            write_h5(root / f"{split}.h5", {"x": x, "label": y})
        elif layout == "npy-folders":
            (root / split).mkdir(parents=True)
            np.save(root / split / "x.npy", x)
            np.save(root / split / "y.npy", y)
        else:
            root.mkdir(exist_ok=True)
            np.save(root / f"X_{split}.npy", x)
            np.save(root / f"y_{split}.npy", y)
    report = run_scan(root)
    missing = finding(report, "L003")
    assert missing is not None and [loc.detail for loc in missing.locations] == ["class 9"]
    assert [lab.missing for lab in report.labels] == [[], [9]]
    note = next(v for k, v in report.info.items() if k.startswith("labels.inferred"))
    assert "of the splits train, val together" in note
    assert finding(run_scan(root, num_classes=9), "L003") is None  # a class count given wins


def test_labels_far_shorter_than_the_samples_named_as_such_are_a_length_mismatch(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """features.npy of 1,000 rows beside labels.npy of 400 (a label file cut short) passed: lengths more than 2×
    apart were taken for another table. An array named as the samples (X, features, images ...) is compared
    whatever the lengths; a mean image beside them, or another split's samples, still is not."""
    folder = tmp_path / "npy"
    folder.mkdir()
    np.save(folder / "features.npy", features(1000, rng))
    np.save(folder / "labels.npy", np.arange(400) % 3)
    np.save(folder / "mean.npy", rng.normal(size=(3, 8, 8)).astype(np.float32))
    found = finding(run_scan(folder), "L001")
    assert [(loc.path, loc.detail) for loc in found.locations] == [
        ("features.npy", "1000 samples but labels.npy has 400 labels")
    ]
    h5 = write_h5(tmp_path / "k.h5", {"X": features(100, rng), "y": np.arange(49) % 3, "X_val": features(10, rng)})
    assert [loc.dataset for loc in finding(run_scan(h5), "L001").locations] == ["/X"]
