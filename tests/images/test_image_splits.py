"""Image folders with splits (``data/train/<class>/``, ``data/val/<class>/``): each split an ImageFolder of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from imagetools import codes, finding, jpeg, png, scan_dir

from scanner_service import Report, ScanConfig
from scanner_service.cli import main
from scanner_service.engine import plan, scan_shard
from scanner_service.partial import merge
from scanner_service.sources import open_source

Write = Callable[[str, bytes], Path]


def _tables(report: Report) -> dict[str, list[tuple[int, str | None, int]]]:
    return {lab.path: [(row.label, row.name, row.count) for row in lab.histogram] for lab in report.labels}


def _details(report: Report, code: str) -> list[tuple[str, str | None]]:
    f = finding(report, code)
    return [(loc.path, loc.detail) for loc in f.locations] if f else []


def _tree(write: Write, rng: np.random.Generator, counts: dict[str, dict[str, int]]) -> None:
    for split, classes in counts.items():
        for name, n in classes.items():
            for i in range(n):
                write(f"{split}/{name}/{i}.jpg", jpeg(rng, 40, 40))


def test_each_split_has_its_own_label_table_with_the_class_names(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    _tree(write, rng, {"train": {"cat": 3, "dog": 2}, "Val": {"cat": 1, "dog": 1}})
    whole = jpeg(rng, 40, 40)
    write("Val/dog/cut.jpg", whole[: len(whole) // 2])
    write("README.md", b"# pets\n")
    report = scan_dir(tmp_path)
    assert _tables(report) == {
        "train": [(0, "cat", 3), (1, "dog", 2)],
        "Val": [(0, "cat", 1), (1, "dog", 2)],
    }
    assert report.summary.items_scanned == 8
    assert [path for path, _ in _details(report, "I003")] == ["Val/dog/cut.jpg"]  # relative to the scanned root
    assert codes(report) == {"I003"}  # no missing class: every split has every class
    assert report.info["images.layout"] == "splits: Val, train"
    assert report.info["images.splits"] == (
        "split layout: Val, train, each scanned as a dataset of its own (one label table per split, its classes "
        "numbered by the 2 class folders of all splits together)"
    )
    assert report.info["images.skipped"] == "1 file not scanned as images: 1 .md"


def test_a_class_missing_in_val_is_a_missing_class_in_val_only(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """The class list of every split is the union of all splits' class folders: with torchvision, val's
    ImageFolder would number cat 0 where train numbers it 1."""
    _tree(write, rng, {"train": {"bird": 2, "cat": 2, "dog": 2}, "val": {"cat": 1, "dog": 1}, "test": {"dog": 1}})
    (tmp_path / "test/bird").mkdir()  # an empty class folder is a missing class too
    report = scan_dir(tmp_path)
    assert _details(report, "L003") == [
        ("test", "class 0 (bird)"),
        ("test", "class 1 (cat)"),
        ("val", "class 0 (bird)"),
    ]
    assert _tables(report)["val"] == [(0, "bird", 0), (1, "cat", 1), (2, "dog", 1)]
    # ImageFolder("data/test") raises on its empty bird folder; val's missing bird folder is no folder at all
    empty = finding(report, "I014")
    assert [(loc.path, loc.detail) for loc in empty.locations] == [
        ("test/bird", "the class folder holds no image: torchvision's ImageFolder raises FileNotFoundError")
    ]
    # --num-classes applies to each split
    report = scan_dir(tmp_path, num_classes=4)
    assert [loc for loc in _details(report, "L003") if loc[0] == "train"] == [("train", "class 3")]
    assert finding(report, "L003").count == 1 + 2 + 3  # train: 3; val: bird, 3; test: bird, cat, 3
    # batch absence per split: dog is 1 of 2 samples of val, 2 of 6 of train
    report = scan_dir(tmp_path, batch_size=1)
    absent = [(path, (detail or "").split(",")[0]) for path, detail in _details(report, "L004")]
    assert ("val", "class 2: 1 of 2 samples") in absent and ("train", "class 2: 2 of 6 samples") in absent


def test_duplicates_across_splits_are_leakage(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    _tree(write, rng, {"train": {"cat": 4, "dog": 2}, "val": {"cat": 2, "dog": 2}})
    copy = (tmp_path / "train/cat/3.jpg").read_bytes()
    write("val/cat/9.jpg", copy)  # the same image, the same class, in both splits
    write("val/dog/9.jpg", (tmp_path / "train/cat/2.jpg").read_bytes())  # in both splits, another class
    write("train/dog/9.jpg", (tmp_path / "train/cat/0.jpg").read_bytes())  # a label conflict within train
    report = scan_dir(tmp_path)
    assert _details(report, "I013") == [
        (
            "train/cat/0.jpg",
            "2 identical copies: also train/dog/9.jpg; label conflict in train: labels 0 (cat), 1 (dog)",
        ),
        (
            "train/cat/2.jpg",
            "2 identical copies: also val/dog/9.jpg; the same image in train and val (leakage between splits), "
            "labelled 0 (cat) in train, 1 (dog) in val",
        ),
        (
            "train/cat/3.jpg",
            "2 identical copies: also val/cat/9.jpg; the same image in train and val (leakage between splits)",
        ),
    ]


def test_a_class_named_like_a_split_beside_other_classes_is_an_imagefolder(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    _tree(write, rng, {"cat": {"a": 1}, "test": {"b": 1}, "dog": {"c": 2}})
    write("cat/0.jpg", jpeg(rng))
    write("test/0.jpg", jpeg(rng))
    write("test/1.jpg", (tmp_path / "cat/0.jpg").read_bytes())
    report = scan_dir(tmp_path)
    assert _tables(report) == {".": [(0, "cat", 2), (1, "dog", 2), (2, "test", 3)]}
    assert report.info["images.layout"] == "ImageFolder: 3 class folders"
    assert "images.splits" not in report.info
    assert "leakage" not in _details(report, "I013")[0][1]


def test_split_folders_of_files_only_are_no_split_layout(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """No split holds class folders: the folder is read as torchvision reads it, as today (two classes)."""
    write("train/0.jpg", jpeg(rng))
    write("val/0.jpg", jpeg(rng))
    report = scan_dir(tmp_path)
    assert _tables(report) == {".": [(0, "train", 1), (1, "val", 1)]}
    assert "images.splits" not in report.info


def test_a_split_of_files_only_is_flat_and_unlabelled(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    _tree(write, rng, {"train": {"cat": 2, "dog": 2}})
    write("test/0001.png", png(rng))
    write("test/more/0002.png", (tmp_path / "train/dog/1.jpg").read_bytes())
    write("test/0003.jpg", b"<html>quota exceeded</html>")
    write(".ipynb_checkpoints/x.jpg", b"")  # beside the splits: no loader opens it
    report = scan_dir(tmp_path)
    assert _tables(report) == {"train": [(0, "cat", 2), (1, "dog", 2)]}
    assert report.summary.items_scanned == 7
    assert _details(report, "I002") == [("test/0003.jpg", _details(report, "I002")[0][1])]
    assert [path for path, _ in _details(report, "I005")] == ["test/more/0002.png"]
    assert _details(report, "I013") == [
        (
            "test/more/0002.png",
            "2 identical copies: also train/dog/1.jpg; the same image in test and train (leakage between splits)",
        )
    ]
    note = report.info["images.splits"]
    assert note.startswith("split layout: test, train, each scanned as a dataset of its own")
    assert note.endswith("; test holds no class folders: no labels; .ipynb_checkpoints beside the splits: not scanned")
    assert finding(report, "I001") is None


def test_shards_keep_to_one_split_and_do_not_change_the_report(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    _tree(write, rng, {"train": {"a": 12, "b": 3}, "val": {"a": 6, "b": 1}})
    config = ScanConfig(shard_bytes=1 << 12, batch_size=1)
    planned = plan(tmp_path, config)
    assert len(planned.shards) > 2
    for shard in planned.shards:
        split = shard.spec["split"]
        assert shard.spec["stream"] == split and all(p.startswith(split + "/") for p in shard.spec["paths"])
    source = open_source(tmp_path, config)
    pieces = source.split(planned.shards[0])
    assert pieces and all(p.spec["split"] == p.spec["stream"] == "train" for p in pieces)
    one = scan_dir(tmp_path, batch_size=1)
    many = scan_dir(tmp_path, batch_size=1, shard_bytes=1 << 12)
    assert [(f.code, f.count, f.locations) for f in one.findings] == [
        (f.code, f.count, f.locations) for f in many.findings
    ]
    # sorted storage per split: train's 12 a's are one run, val's 6 another (threshold 4 × batch 1)
    assert _details(one, "L005") == [
        ("train/a/0.jpg", "12 consecutive samples of label 0 (threshold 4)"),
        ("val/a/0.jpg", "6 consecutive samples of label 0 (threshold 4)"),
    ]
    parts = [scan_shard(planned.source.kind, planned.source.path, s, config) for s in planned.shards]
    a, b = merge([planned.partial, *parts]), merge([*reversed(parts), planned.partial])
    assert a.findings == b.findings and a.labels == b.labels


def test_cli_json_of_a_split_tree(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    _tree(write, rng, {"data/train": {"cat": 2, "dog": 2}, "data/val": {"cat": 1}})
    write("data/val/cat/9.jpg", (tmp_path / "data/train/cat/1.jpg").read_bytes())
    result = CliRunner().invoke(main, ["scan", str(tmp_path / "data"), "--format", "json", "--num-classes", "2"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [(lab["path"], lab["total"], lab["missing"]) for lab in report["labels"]] == [
        ("train", 4, []),
        ("val", 2, [1]),
    ]
    assert [row["name"] for row in report["labels"][1]["histogram"]] == ["cat", "dog"]
    found = {f["code"]: f["locations"] for f in report["findings"]}
    assert [(loc["path"], loc["detail"]) for loc in found["L003"]] == [("val", "class 1 (dog)")]
    assert "(leakage between splits)" in found["I013"][0]["detail"]
    assert report["info"]["images.splits"].startswith("split layout: train, val,")
    text = CliRunner().invoke(main, ["scan", str(tmp_path / "data")]).output
    assert "labels train: 4 labels, 2 classes, imbalance" in text
    assert "labels val: 2 labels, 1 class with samples, 1 missing" in text  # (its table lists both classes)
    assert "1 classes" not in text
    assert "note: split layout: train, val" in text
