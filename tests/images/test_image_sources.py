"""Image folders and image lists: detection, layout, labels, line numbers, shards."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from imagetools import codes, finding, jpeg, places, png, scan_dir
from PIL import Image

import scanner_service.sources.images as images
from scanner_service import ScanConfig
from scanner_service.engine import plan, scan_shard
from scanner_service.errors import UnsupportedSource
from scanner_service.partial import merge
from scanner_service.sources import detect_kind, open_source
from scanner_service.sources.imagelist import numbered_lines
from scanner_service.sources.images import ImageFolderSource

Write = Callable[[str, bytes], Path]


def _locs(report: object, code: str) -> list[tuple[str, int | None, str | None]]:
    f = finding(report, code)
    return [(loc.path, loc.line, loc.detail) for loc in f.locations] if f else []


# -- folders -------------------------------------------------------------------------------------------


def test_imagefolder_classes_include_empty_and_hidden_folders(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    for i in range(3):
        write(f"dog/{i}.jpg", jpeg(rng))
        write(f"cat/nested/{i}.jpg", jpeg(rng))
    (tmp_path / "zebra").mkdir()
    write(".ipynb_checkpoints/notes-checkpoint.ipynb", b"{}")
    write("README.md", b"# data")
    assert detect_kind(tmp_path) == "images"
    report = scan_dir(tmp_path)
    labels = report.labels[0]
    assert [(row.label, row.name, row.count) for row in labels.histogram] == [
        (0, ".ipynb_checkpoints", 0),
        (1, "cat", 3),
        (2, "dog", 3),
        (3, "zebra", 0),
    ]
    assert _locs(report, "L003") == [
        (".", None, "class 0 (.ipynb_checkpoints)"),
        (".", None, "class 3 (zebra)"),
    ]
    # ImageFolder(root) raises FileNotFoundError on a class folder without an image: an error, not a pass
    assert _locs(report, "I014") == [
        (
            ".ipynb_checkpoints",
            None,
            "the class folder holds no image: torchvision's ImageFolder raises FileNotFoundError",
        ),
        ("zebra", None, "the class folder holds no image: torchvision's ImageFolder raises FileNotFoundError"),
    ]
    assert report.exit_code() == 1
    assert report.info["images.layout"] == "ImageFolder: 4 class folders"
    assert "2 files not scanned" in report.info["images.skipped"]


def test_images_in_hidden_folders_inside_a_class_are_scanned_as_that_class(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """torchvision's ImageFolder walks every folder below a class, hidden ones included, keeping image
    extensions: a truncated Jupyter checkpoint copy in dog/.ipynb_checkpoints is a dog that kills the run. A
    .git folder's objects (no image extension) are no samples, also when .git sits at the top as a class."""
    for i in range(3):
        write(f"dog/{i}.jpg", jpeg(rng))
        write(f"cat/{i}.jpg", jpeg(rng))
    write("dog/.ipynb_checkpoints/3-checkpoint.jpg", jpeg(rng)[:-400])
    write("dog/.ipynb_checkpoints/notes-checkpoint.ipynb", b"{}")
    write(".git/HEAD", b"ref: refs/heads/main\n")
    write(".git/objects/ab/cdef", b"x\x01blob")
    report = scan_dir(tmp_path)
    assert _locs(report, "I003")[0][0] == "dog/.ipynb_checkpoints/3-checkpoint.jpg"
    assert finding(report, "I002") is None
    counts = {row.name: row.count for row in report.labels[0].histogram}
    assert counts == {".git": 0, "cat": 3, "dog": 4}
    assert report.info["images.skipped"] == "3 files not scanned as images: 3 in a hidden folder, no image extension"


def test_a_labels_option_an_image_dataset_has_no_use_for_is_named_in_a_note(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """``--labels y`` on an image folder or a Caffe list was dropped without a word: the user thought the
    label checks ran on what it names. They run on the class folders and the list's numbers, and a note says so."""
    write("cat/a.jpg", jpeg(rng))
    write("dog/b.jpg", jpeg(rng))
    (tmp_path / "train.txt").write_text("cat/a.jpg 0\ndog/b.jpg 1\n")
    folder = scan_dir(tmp_path, labels="y")
    assert folder.info["labels.option"].startswith(
        "labels 'y' not used: an image folder's labels are its class folders"
    )
    assert [t.distinct for t in folder.labels] == [2]
    listed = scan_dir(tmp_path / "train.txt", labels="y")
    assert "a list file's labels are the numbers after its paths" in listed.info["labels.option"]
    assert "labels.option" not in scan_dir(tmp_path).info


def test_flat_folder_is_recursive_and_unlabelled(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("top.jpg", jpeg(rng))
    write("sub/deeper/a.png", png(rng))
    write(".git/objects/ab", b"blob")
    write("sub/.DS_Store", b"\x00\x00\x00\x01Bud1")
    write("sub/Thumbs.db", b"\xd0\xcf\x11\xe0")
    write("sub/labels.csv", b"a,b\n")
    report = scan_dir(tmp_path)
    assert report.summary.items_scanned == 2
    assert report.labels == []
    assert report.info["images.layout"].startswith("flat folder")
    assert (
        report.info["images.skipped"]
        == "4 files not scanned as images: 1 .csv, 1 Thumbs.db, 1 hidden, 1 in a hidden folder, no image extension"
    )
    assert codes(report) == set()


def test_top_level_files_that_are_no_images_leave_the_imagefolder_layout(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    write("cat/0.jpg", jpeg(rng))
    write("dog/0.jpg", jpeg(rng))
    write("LICENSE", b"MIT License\n\nCopyright (c) the authors\n")
    write("synset_words", b"n01440764 tench, Tinca tinca\n")
    report = scan_dir(tmp_path)
    assert report.info["images.layout"] == "ImageFolder: 2 class folders"
    skipped = "2 files not scanned as images: 1 at the top level, no image, 1 documentation (LICENSE, README ...)"
    assert report.info["images.skipped"] == skipped
    assert codes(report) == set()
    write("stray.jpg", jpeg(rng))  # an image at the top: torchvision would never load it, so the folder is flat
    assert scan_dir(tmp_path).info["images.layout"].startswith("flat folder")


def test_sidecar_files_are_skipped_unless_they_start_like_images(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    write("cat/0.jpg", jpeg(rng))
    write("cat/0.pts", b"version: 1\nn_points: 68\n{\n30.5 40.2\n}\n")  # 300-W landmarks
    write("cat/1.jpg.cat", b"9 175 160 239 162")  # Kaggle cat annotations
    write("dog/0.jpg", jpeg(rng))
    write("dog/labels.xlsx", b"PK\x03\x04" + bytes(60))
    write("dog/odd.xyz", png(rng))  # an image under an extension no format claims: scanned
    write("dog/page", b"<html><body>Access denied</body></html>")  # no extension: judged by content
    report = scan_dir(tmp_path)
    assert report.info["images.skipped"] == "3 files not scanned as images: 1 .cat, 1 .pts, 1 .xlsx"
    assert report.summary.items_scanned == 4
    assert [(row.name, row.count) for row in report.labels[0].histogram] == [("cat", 1), ("dog", 3)]
    assert codes(report) == {"I002"}
    assert [loc for loc, _, _ in _locs(report, "I002")] == ["dog/page"]


def test_folder_detection(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("noext/0001", jpeg(rng))
    assert detect_kind(tmp_path / "noext") == "images"
    write("texts/a.txt", b"hello")
    with pytest.raises(Exception, match="not a dataset"):
        detect_kind(tmp_path / "texts")
    write("lmdb/data.mdb", b"\x00" * 64)
    write("lmdb/preview.jpg", jpeg(rng))
    assert not ImageFolderSource.detect(tmp_path / "lmdb")  # an LMDB environment, not an image folder


def test_folder_labels_feed_the_core_label_checks(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    for i in range(60):
        write(f"a/{i:03d}.jpg", jpeg(rng, 8, 8))
    for i in range(3):
        write(f"b/{i:03d}.jpg", jpeg(rng, 8, 8))
    report = scan_dir(tmp_path, batch_size=8, min_size=1, shard_bytes=1 << 16)
    runs = _locs(report, "L005")  # ImageFolder order is class-sorted: one long run of class 0
    assert runs == [("a/000.jpg", None, "60 consecutive samples of label 0 (threshold 32)")]
    absent = finding(report, "L004")
    assert absent is not None and (absent.locations[0].detail or "").startswith("class 1: 3 of 63 samples")


def test_shards_do_not_change_the_report(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    for i in range(40):
        write(f"c{i % 3}/{i:02d}.jpg", jpeg(rng, 64, 64) if i % 7 else jpeg(rng, 64, 64)[:300])
    write("c1/dup.jpg", (tmp_path / "c0/03.jpg").read_bytes())
    config = ScanConfig(shard_bytes=1 << 16)
    planned = plan(tmp_path, config)
    assert len(planned.shards) > 1
    one = scan_dir(tmp_path)
    many = scan_dir(tmp_path, shard_bytes=1 << 16)
    assert [(f.code, f.count, f.locations) for f in one.findings] == [
        (f.code, f.count, f.locations) for f in many.findings
    ]
    # merging shard partials in any order gives the same findings
    parts = [scan_shard(planned.source.kind, planned.source.path, s, config) for s in planned.shards]
    a, b = merge([planned.partial, *parts]), merge([*reversed(parts), planned.partial])
    assert a.findings == b.findings and a.labels == b.labels


def test_split_goes_down_to_single_files(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    for i in range(40):
        write(f"k/{i:02d}.jpg", jpeg(rng, 16, 16))
    source = open_source(tmp_path, ScanConfig())
    shard = source.plan().shards[0]
    pieces = source.split(shard)
    assert 1 < len(pieces) <= 16
    assert [p for piece in pieces for p in piece.spec["paths"]] == shard.spec["paths"]
    assert [piece.spec["start"] for piece in pieces][1] == len(pieces[0].spec["paths"])
    single = pieces[0]
    while len(single.spec["paths"]) > 1:
        single = source.split(single)[0]
    assert source.split(single) == []
    code, loc = source.crash_finding(single, "the reader process was killed by SIGSEGV")
    assert (code, loc.path, loc.detail) == (
        "I003",
        "k/00.jpg",
        "the decoder crashed: the reader process was killed by SIGSEGV",
    )


# -- lists ---------------------------------------------------------------------------------------------


def test_caffe_list_with_spaces_missing_files_and_bad_lines(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    write("img/a b.jpg", jpeg(rng))
    write("img/c.jpg", jpeg(rng)[:400])
    write("img/d.png", png(rng))
    listing = "img/a b.jpg 0\nimg/c.jpg 1\n\nimg/missing.jpg 1\nimg/d.png cat\nimg/d.png\nimg/d.png -1\n"
    write("train.txt", listing.encode())
    assert detect_kind(tmp_path / "train.txt") == "image-list"
    report = scan_dir(tmp_path / "train.txt", num_classes=2)
    assert _locs(report, "S004") == [("train.txt", 4, "img/missing.jpg does not exist")]
    assert _locs(report, "S005") == [
        ("train.txt", 3, "blank line: Caffe reads an empty path here (ImageDataLayer stops)"),
        ("train.txt", 5, "label 'cat' is not a number (expected 'path label')"),
        ("train.txt", 6, "no label after 'img/d.png' (expected 'path label')"),
    ]
    assert _locs(report, "I003")[0][:2] == ("img/c.jpg", 2)
    assert _locs(report, "L002") == [("img/d.png", 7, "negative label -1")]
    assert report.labels[0].stream == "train.txt"
    # the images of lines with a bad label are judged too (the run would meet them): only their label is out
    assert report.summary.items_scanned == 5 and report.labels[0].total == 3


def test_list_lines_are_numbered_as_split_lines_whatever_their_ends() -> None:
    """Lines are read one at a time: numbered as ``text.split("\\n")`` numbers them, "\\r" dropped from their
    end, an empty last piece (the end of the last line) not a line."""
    for text in ["", "a", "a\n", "a\r\nb\r\n", "\n\n", "a\n\n", "a\n\r", "a\nb", " \r\n\tb\r"]:
        expected = [(n, raw.rstrip("\r")) for n, raw in enumerate(text.split("\n"), start=1)]
        if expected and not expected[-1][1]:
            expected.pop()
        assert list(numbered_lines(text)) == expected, repr(text)


def test_a_long_list_of_missing_files_counts_them_all_and_names_the_first(tmp_path: Path, write: Write) -> None:
    write("real.png", png(np.random.default_rng(0)))
    lines = [f"gone/{i}.jpg {i % 3}" for i in range(500)]
    lines[250:250] = ["", "real.png 1"]
    write("train.txt", "\r\n".join(lines).encode())
    report = scan_dir(tmp_path / "train.txt", max_locations=3)
    assert finding(report, "S004").count == 500
    assert _locs(report, "S004") == [("train.txt", n, f"gone/{n - 1}.jpg does not exist") for n in (1, 2, 3)]
    assert _locs(report, "S005") == [
        ("train.txt", 251, "blank line: Caffe reads an empty path here (ImageDataLayer stops)")
    ]
    assert report.summary.items_scanned == 1 and report.labels[0].total == 1


def test_list_paths_relative_to_root(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("data/x/1.jpg", jpeg(rng))
    write("data/x/2.jpg", jpeg(rng))
    write("lists/val.txt", b"x/1.jpg 0\nx/2.jpg 1\n")
    assert "S004" in codes(scan_dir(tmp_path / "lists/val.txt"))
    report = scan_dir(tmp_path / "lists/val.txt", root=str(tmp_path / "data"))
    assert codes(report) - {"L003", "L004", "L005"} == set()
    assert report.summary.items_scanned == 2


def test_a_list_whose_labels_skip_classes_reports_them_missing(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """Labels 0-3 and 9 in a list, no --num-classes: the classes between, 4-8, have no image."""
    lines = []
    for i, label in enumerate([0, 1, 2, 3, 9] * 2):
        write(f"img/{i}.jpg", jpeg(rng))
        lines.append(f"img/{i}.jpg {label}")
    write("train.txt", "\n".join(lines).encode())
    report = scan_dir(tmp_path / "train.txt")
    assert _locs(report, "L003") == [("train.txt", None, f"class {c}") for c in range(4, 9)]
    assert "labels.inferred train.txt" in report.info


def test_unlabelled_list(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("a.jpg", jpeg(rng))
    write("b c.jpg", jpeg(rng))
    write("test.lst", b"a.jpg\nb c.jpg\n")
    report = scan_dir(tmp_path / "test.lst")
    assert report.summary.items_scanned == 2 and report.labels == [] and codes(report) == set()
    # a comment line leaves a list of paths unlabelled (it made every line an error, and none was scanned)
    write("found.txt", b"# generated by find\na.jpg\nb c.jpg\n")
    report = scan_dir(tmp_path / "found.txt")
    assert report.summary.items_scanned == 2 and report.labels == []
    assert _locs(report, "S005") == [("found.txt", 1, "a comment line: list readers take it for a file name")]


def test_hdf5_lists_are_not_image_lists(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as fh:
        fh["data"] = np.zeros((4, 2), np.float32)
    (tmp_path / "train.txt").write_text("a.h5\n")
    assert detect_kind(tmp_path / "train.txt") == "hdf5-list"


def test_csv_with_class_names(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("imgs/1.jpg", jpeg(rng))
    write("imgs/2.jpg", jpeg(rng))
    write("imgs/3.jpg", jpeg(rng))
    write("meta.csv", b"id,filename,class\n1,imgs/1.jpg,dog\n2,imgs/2.jpg,cat\n3,imgs/3.jpg\n4,imgs/9.jpg,cat\n")
    assert detect_kind(tmp_path / "meta.csv") == "image-list"
    report = scan_dir(tmp_path / "meta.csv")
    assert _locs(report, "S005") == [("meta.csv", 4, "2 fields, the header has 3")]
    assert _locs(report, "S004") == [("meta.csv", 5, "imgs/9.jpg does not exist")]
    rows = [(r.label, r.name, r.count) for r in report.labels[0].histogram]
    assert rows == [(0, "cat", 1), (1, "dog", 1)]


def test_csv_unclosed_quote_is_a_syntax_error_and_the_lines_it_swallowed_are_still_read(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """An unclosed quote made the rest of the file one label cell (a lenient csv reader's reading): the missing
    and truncated files after it went unchecked and the list passed; past 128 KB it was a traceback. A quoted
    caption that spans lines is valid CSV, and its record is placed at its first line."""
    for i in range(3):
        write(f"img/{i}.jpg", jpeg(rng))
    write("img/bad.jpg", jpeg(rng)[:300])
    write("labels.csv", b'path,label\nimg/0.jpg,0\nimg/1.jpg,"1\nimg/nope.jpg,0\nimg/bad.jpg,1\nimg/2.jpg,1\n')
    report = scan_dir(tmp_path / "labels.csv")
    assert _locs(report, "S005") == [("labels.csv", 3, "a quoted field runs from line 3 to line 6: an unclosed quote?")]
    assert _locs(report, "S004") == [("labels.csv", 4, "img/nope.jpg does not exist")]
    assert places(report, "I003") == ["img/bad.jpg"]

    write("big.csv", b'path,label\nimg/0.jpg,"1\n' + b"img/2.jpg,0\n" * 12_000)  # beyond csv's field limit
    report = scan_dir(tmp_path / "big.csv")
    assert [loc[:2] for loc in _locs(report, "S005")] == [("big.csv", 2)]
    assert "unclosed quote" in _locs(report, "S005")[0][2]
    assert report.summary.items_scanned == 12_000

    write("captions.csv", b'path,label,caption\nimg/0.jpg,0,"a dog,\non grass"\nimg/9.jpg,1,x\n')
    report = scan_dir(tmp_path / "captions.csv")
    assert finding(report, "S005") is None
    assert _locs(report, "S004") == [("captions.csv", 4, "img/9.jpg does not exist")]


def test_csv_saved_with_a_byte_order_mark(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    """Excel's "CSV UTF-8" starts with a BOM; paths without an extension leave only the header to go by."""
    write("imgs/0", jpeg(rng))
    write("imgs/1", b"")
    write("bom.csv", b"\xef\xbb\xbfpath,label\nimgs/0,0\nimgs/1,1\n")
    assert detect_kind(tmp_path / "bom.csv") == "image-list"
    report = scan_dir(tmp_path / "bom.csv")
    assert places(report, "I001") == ["imgs/1"]
    assert report.summary.items_scanned == 2


def test_csv_numeric_labels_and_label_checks(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    for i in range(4):
        write(f"p/{i}.png", png(rng))
    write("labels.tsv", b"image\ttarget\np/0.png\t0\np/1.png\t2.5\np/2.png\t7\np/3.png\t1\n")
    report = scan_dir(tmp_path / "labels.tsv", num_classes=3)
    assert _locs(report, "L002") == [
        ("p/1.png", 3, "non-integer label 2.5"),
        ("p/2.png", 4, "label 7 ≥ num_classes 3"),
    ]
    assert places(report, "L003") == ["labels.tsv"]


def test_csv_path_column_found_by_its_values_or_a_clear_refusal(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A header naming no known path column (Kaggle's ``image_id,label``): the column whose values are image
    file names holds the paths; blank lines before the header are skipped, as pandas does. A CSV with no
    such column cannot be scanned (exit status 2, naming its columns), rather than pass with nothing scanned."""
    write("a.jpg", jpeg(rng))
    write("b.jpg", b"")
    write("cassava.csv", b"\n\nimage_id,label\na.jpg,0\nb.jpg,1\n")
    report = scan_dir(tmp_path / "cassava.csv")
    assert report.summary.items_scanned == 2
    assert _locs(report, "I001") == [("b.jpg", 5, "0 bytes")]
    write("ids.csv", b"id,label\n1000015157,0\n1000201771,3\n")
    done = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(tmp_path / "ids.csv")], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "ids.csv: no column of image paths: the header has 'id', 'label'" in done.stderr


def test_list_lines_caffe_misreads_and_im2rec_lists(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    """Caffe's parser splits a line at its last space: a tab, a no-break space or two spaces before the label
    make it read a path that does not exist (ImageDataLayer stops); a list separated by tabs throughout is read
    as such. MXNet's im2rec ``.lst`` (index, label, path by tabs) is read as im2rec writes it."""
    for i in range(4):
        write(f"i/{i}.png", png(rng))
    write("caffe.txt", "i/0.png 0\ni/1.png\t1\ni/2.png  0\ni/3.png\u00a01\n".encode())
    report = scan_dir(tmp_path / "caffe.txt")
    assert [(line, detail.split(":")[0]) for _, line, detail in _locs(report, "S005")] == [
        (2, "the label is not separated by a space"),
        (3, "Caffe reads the path as 'i/2.png ' and the label as '0' (expected 'path label', one space)"),
        (4, "the label is not separated by a space"),
    ]
    write("tabs.txt", b"i/0.png\t0\ni/1.png\t1\n")
    assert "S005" not in codes(scan_dir(tmp_path / "tabs.txt"))
    # after the label, a tab or a no-break space changes nothing: Caffe's atoi stops at it
    write("after.txt", "i/0.png 0\t\ni/1.png 1\u00a0\ni/2.png 1e3\n".encode())
    report = scan_dir(tmp_path / "after.txt", num_classes=2)
    assert _locs(report, "S005") == [("after.txt", 3, "label '1e3' has an exponent (Caffe reads 1, int() fails)")]
    assert [(row.label, row.count) for row in report.labels[0].histogram] == [(0, 1), (1, 1)]
    write("train.lst", b"0\t0.000000\ti/0.png\n1\t1.000000\ti/1.png\n2\t1.000000\ti/missing.png\n")
    report = scan_dir(tmp_path / "train.lst")
    assert _locs(report, "S004") == [("train.lst", 3, "i/missing.png does not exist")]
    assert report.summary.items_scanned == 2
    assert [(row.label, row.count) for row in report.labels[0].histogram] == [(0, 1), (1, 1)]


def _loop(target: str | None) -> str:
    shown = target if target is not None else "the scanned folder itself"
    return (
        f"a link back to {shown}, a folder above it: a loader that follows links (torchvision's ImageFolder) "
        "reads the images there again below it, under this folder's class, at every turn of the loop"
    )


def test_folder_links_are_followed_but_cycles_are_not(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("data/cat/a.jpg", jpeg(rng))
    write("elsewhere/b.jpg", jpeg(rng))
    (tmp_path / "data/cat/more").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "data/cat/loop").symlink_to(tmp_path / "data/cat")
    report = scan_dir(tmp_path / "data")
    assert report.summary.items_scanned == 2
    # a loop is not followed, but a loader that follows links does: an error at the link
    assert _locs(report, "S009") == [("cat/loop", None, _loop("cat"))]
    assert "images.skipped" not in report.info
    write("data/bird/b.jpg", jpeg(rng))
    (tmp_path / "data/cat/root").symlink_to(tmp_path / "data")  # back to the dataset's root, above the class
    report = scan_dir(tmp_path / "data")
    assert report.summary.items_scanned == 3  # bird/b.jpg is not read again as a cat under cat/root/
    assert _locs(report, "S009") == [("cat/loop", None, _loop("cat")), ("cat/root", None, _loop(None))]
    assert not report.summary.passed
    (tmp_path / "data/cat/root").unlink()
    shutil.rmtree(tmp_path / "data/bird")
    # a link to a folder beside it is no cycle: torchvision reads that folder twice, and so does the scan
    write("data/dog/d.jpg", jpeg(rng))
    (tmp_path / "data/alias").symlink_to(tmp_path / "data/dog")
    report = scan_dir(tmp_path / "data")
    assert report.summary.items_scanned == 4
    (copies,) = [f for f in report.findings if f.code == "I013"]
    assert [(loc.path, loc.detail) for loc in copies.locations] == [
        ("alias/d.jpg", "2 identical copies: also dog/d.jpg; label conflict: labels 0 (alias), 2 (dog)")
    ]


def test_list_of_extensionless_paths_with_labels(tmp_path: Path, write: Write, rng: np.random.Generator) -> None:
    write("n01/n01_0001", jpeg(rng))
    write("n01/n01_0002", png(rng))
    write("train.txt", b"n01/n01_0001 0\nn01/n01_0002 1\n")
    assert detect_kind(tmp_path / "train.txt") == "image-list"
    report = scan_dir(tmp_path / "train.txt")
    assert report.summary.items_scanned == 2 and "I005" not in codes(report)  # no extension: no claim


def test_big_files_are_read_whole_only_when_they_start_like_images(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    from scanner_service.sources import images

    monkeypatch.setattr(images, "WHOLE_FILE_LIMIT", 2000)
    monkeypatch.setattr(images, "HEAD_BYTES", 1024)
    big = jpeg(rng, 200, 200)
    assert len(big) > 2000
    write("photo.jpg", big)
    write("video.jpg", b"\x00\x00\x00\x18ftypmp42" + bytes(10_000))
    report = scan_dir(tmp_path)
    assert places(report, "I002") == ["video.jpg"]
    assert "I003" not in codes(report)  # the big JPEG was read whole: not truncated
    assert report.summary.bytes_scanned == len(big) + 10_012


def test_a_latin1_name_in_a_list_finds_its_file(tmp_path: Path, rng: np.random.Generator) -> None:
    """A list written in Latin-1 names ``caf\\xe9.png`` byte for byte, as Caffe opens it: the file is found, and
    reports spell the odd byte out."""
    import os

    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / os.fsdecode(b"caf\xe9.png")).write_bytes(png(rng))
    (folder / os.fsdecode(b"th\xe9.png")).write_bytes(b"")
    (tmp_path / "train.txt").write_bytes(b"imgs/caf\xe9.png 0\nimgs/th\xe9.png 1\n")
    report = scan_dir(tmp_path / "train.txt")
    assert "S004" not in codes(report)
    assert report.summary.items_scanned == 2
    assert places(report, "I001") == ["imgs/th\\xe9.png"]


def test_a_list_separated_by_tabs_may_hold_spaces_in_its_paths(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    write("i/a.png", png(rng))
    write("i/my photo.png", png(rng))
    write("tabs.txt", b"i/a.png\t0\ni/my photo.png\t1\n")
    report = scan_dir(tmp_path / "tabs.txt")
    assert codes(report) - {"L003", "L004", "L005"} == set() and report.summary.items_scanned == 2
    write("header.csv", b"image_id,label\n")  # a header alone names no file, whatever its columns
    assert places(scan_dir(tmp_path / "header.csv"), "S006") == ["header.csv"]


def test_a_tab_list_with_one_bad_line_and_a_csv_whose_image_column_holds_ids(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """One line without its tab costs that line only; a column named ``image`` that holds ids gives way to the
    column of file names beside it."""
    for i in range(3):
        write(f"my dir/{i}.png", png(rng))
    write("tabs.txt", b"my dir/0.png\t0\nmy dir/1.png\t1\nmy dir/2.png\n")
    report = scan_dir(tmp_path / "tabs.txt")
    assert [(line, detail) for _, line, detail in _locs(report, "S005")] == [
        (3, "no label after 'my dir/2.png' (expected 'path label')")
    ]
    assert report.summary.items_scanned == 3 and report.labels[0].total == 2  # its image judged, unlabelled
    write("meta.csv", b"image,image_path,label\n0,my dir/0.png,0\n1,my dir/1.png,1\n")
    report = scan_dir(tmp_path / "meta.csv")
    assert "S004" not in codes(report) and report.summary.items_scanned == 2


def test_a_folder_the_scan_cannot_list_is_unreadable_not_skipped(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A class folder, or a folder inside one, that the user cannot list: the dataset must not pass with part
    of it unread (it was skipped without a word, exit 0)."""
    from scanner_service import ScanConfig, plan
    from tests.conftest import as_nobody, let_nobody_in

    write("data/cat/a.jpg", jpeg(rng))
    write("data/cat/locked/b.jpg", jpeg(rng))
    write("data/dog/c.jpg", jpeg(rng))
    write("data/owl/d.jpg", jpeg(rng))
    let_nobody_in(tmp_path / "data")
    for folder in ("data", "data/cat", "data/dog"):
        (tmp_path / folder).chmod(0o755)
    (tmp_path / "data/cat/locked").chmod(0)
    (tmp_path / "data/owl").chmod(0)

    def unreadable() -> object:
        planned = plan(tmp_path / "data", ScanConfig())
        return [(loc.path, loc.detail) for loc in planned.partial.findings["S001"].locations]

    detail = "a folder that cannot be listed (permission denied?): the files in it were not scanned"
    assert as_nobody(unreadable) == [("cat/locked", detail), ("owl", detail)]


# -- big files -------------------------------------------------------------------------------------------


def test_a_big_image_is_read_into_one_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file above ``WHOLE_FILE_LIMIT`` is read as a head, and when that is an image's, read again whole into
    one buffer: ``head + fh.read()`` held the image twice (2 GB for a 1 GB file). Its verdict is the same as
    a small file's: a valid image passes, a damaged one is found."""
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, (1024, 1024, 3), dtype=np.uint8)  # noise: a PNG of about 3 MB
    big = tmp_path / "set" / "big.png"
    big.parent.mkdir()
    Image.fromarray(pixels).save(big, compress_level=1)
    raw = big.read_bytes()
    with open(big, "rb", buffering=0) as fh:
        head = fh.read(images.HEAD_BYTES)
        tracemalloc.start()
        data = images.read_again(fh)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert data == raw and head == raw[: len(head)]
    assert peak < 1.1 * len(raw), (peak, len(raw))  # (the old read: 2x)
    cut = tmp_path / "set" / "cut.png"
    cut.write_bytes(raw[: len(raw) - 5000])
    monkeypatch.setattr(images, "WHOLE_FILE_LIMIT", 1 << 16)  # (a few MB stand for gigabytes)
    report = scan_dir(tmp_path / "set")
    assert _locs(report, "I003") and [p for p, _, _ in _locs(report, "I003")] == ["cut.png"], report.findings
    assert report.summary.errors == 1 and report.summary.items_scanned == 2


def test_the_image_of_a_line_with_a_bad_label_is_judged_too(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A bad label hid the image on its line: a CI run failed on the label, then, once it was mended, on the
    image. Both are reported at once, in a Caffe list and in a CSV; the image's label is left out."""
    write("img/ok.jpg", jpeg(rng))
    write("img/cut.jpg", jpeg(rng)[:400])
    write("img/page.jpg", b"<html><body>Not Found</body></html>")
    write("train.txt", b"img/ok.jpg 0\nimg/cut.jpg abc\nimg/page.jpg 1e3\nimg/ok.jpg 1\n")
    write("train.csv", b"path,label\nimg/ok.jpg,0\nimg/cut.jpg,\nimg/page.jpg,abc\nimg/ok.jpg,1\nimg/ok.jpg,1\n")
    for name, lines in (("train.txt", (2, 3)), ("train.csv", (3, 4))):  # (the CSV's labels: class ids)
        report = scan_dir(tmp_path / name)
        assert [line for _, line, _ in _locs(report, "S005")] == list(lines), name
        assert [(path, line) for path, line, _ in _locs(report, "I003")] == [("img/cut.jpg", lines[0])], name
        assert [(path, line) for path, line, _ in _locs(report, "I002")] == [("img/page.jpg", lines[1])], name
        assert report.labels[0].total == (2 if name == "train.txt" else 3), name


def test_documentation_and_backup_copies_in_class_folders_are_no_images(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """``dog/LICENSE`` (text, no extension) was not-an-image, failing the gate, and ``cat/a.jpg~`` (an editor's
    backup) a cat image and a duplicate: torchvision's ImageFolder loads neither. Both are named in the note."""
    image = jpeg(rng)
    write("data/cat/a.jpg", image)
    write("data/cat/a.jpg~", image)
    write("data/cat/b.png.bak", png(rng))
    write("data/dog/c.jpg", jpeg(rng))
    write("data/dog/LICENSE", b"MIT License\n\nPermission is hereby granted ...\n")
    write("data/dog/README", b"Dogs from the shelter, 2024.\n")
    report = scan_dir(tmp_path / "data")
    assert codes(report) == set() and report.summary.items_scanned == 2
    skipped = report.info["images.skipped"]
    assert "2 backup copy" in skipped and "2 documentation" in skipped, skipped
    write("data/dog/0a1b2c", b"<html>Not Found</html>")  # an extensionless name of no document: judged
    assert finding(scan_dir(tmp_path / "data"), "I002") is not None


def test_labels_too_large_for_any_reader_are_quoted_as_written(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A label beyond 64 bits went through a float and was quoted as 100000000000000000000 for the written
    99999999999999999999; one beyond Caffe's 32-bit int (atoi) passed a Caffe list. Both are label-invalid at
    their line, as written, and their images are judged (a CSV's labels are int64: 2**31 is a class id there)."""
    for i in range(3):
        write(f"img/{i}.png", png(rng))
    write("train.txt", b"img/0.png 0\nimg/1.png 99999999999999999999\nimg/2.png 2147483648\n")
    report = scan_dir(tmp_path / "train.txt")
    assert _locs(report, "L002") == [
        ("img/1.png", 2, "label 99999999999999999999 does not fit a 64-bit integer: no reader holds it as written"),
        ("img/2.png", 3, "label 2147483648 does not fit a 32-bit int: Caffe's atoi reads it into one (it overflows)"),
    ]
    assert report.summary.items_scanned == 3
    write("train.csv", b"path,label\nimg/0.png,0\nimg/1.png,-99999999999999999999\nimg/2.png,2147483648\n")
    report = scan_dir(tmp_path / "train.csv")
    assert [(path, line) for path, line, _ in _locs(report, "L002")] == [("img/1.png", 3)]
    assert "-99999999999999999999 does not fit" in (_locs(report, "L002")[0][2] or "")


def test_a_dangling_link_and_a_line_of_extra_fields_say_what_they_are(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A dangling link read "cannot be opened (a broken link?)" in a folder and "does not exist" in a list; a
    line 'a.png 1 2' read "a.png 1 does not exist". Each names its cause."""
    write("data/cat/a.png", png(rng))
    (tmp_path / "data/cat/gone.png").symlink_to("nowhere.png")
    report = scan_dir(tmp_path / "data")
    assert _locs(report, "S001") == [("cat/gone.png", None, "a link to nowhere.png, which does not exist")]
    write("data/train.txt", b"cat/a.png 0\ncat/a.png 1 2\ncat/gone.png 1\n")
    report = scan_dir(tmp_path / "data/train.txt")
    assert _locs(report, "S004") == [
        ("train.txt", 2, "cat/a.png 1 does not exist (cat/a.png does: the line holds more than a path and a label?)"),
        ("train.txt", 3, "cat/gone.png does not exist (a link to nowhere.png, which does not exist)"),
    ]


def test_a_list_named_without_an_extension_is_read_when_its_lines_name_images(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """``trainlist`` (no extension) was "not a dataset" (exit status 2): it is a list when its lines mostly
    name images; a text file of no image path (a LICENSE) stays no dataset."""
    write("img/a.png", png(rng))
    write("trainlist", b"img/a.png 0\nimg/gone.png 1\n")
    assert detect_kind(tmp_path / "trainlist") == "image-list"
    report = scan_dir(tmp_path / "trainlist")
    assert _locs(report, "S004") == [("trainlist", 2, "img/gone.png does not exist")]
    write("LICENSE", b"MIT License\n\nPermission is hereby granted, free of charge\n")
    with pytest.raises(UnsupportedSource):
        detect_kind(tmp_path / "LICENSE")


def test_spaces_around_a_csv_path_are_named_as_pandas_reads_them(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """'a.png ,0' and ' b.png,1' passed: the cells were stripped, but pandas' read_csv (and csv.reader) keep the
    spaces, so a loader opens ' b.png' and fails mid-epoch. list-syntax at those lines; the images are judged;
    a file whose name does hold the space is no finding."""
    for name in ("a.png", "b.png", "c.png", "d.png "):
        write(f"img/{name}", png(rng))
    write("train.csv", b"path,label\nimg/a.png ,0\n img/b.png,1\nimg/c.png,0\nimg/d.png ,1\n")
    report = scan_dir(tmp_path / "train.csv")
    assert [(line, (detail or "")[:38]) for _, line, detail in _locs(report, "S005")] == [
        (2, "spaces around the path 'img/a.png ': p"),
        (3, "spaces around the path ' img/b.png': p"),
    ]
    assert report.summary.items_scanned == 4 and report.labels[0].total == 4


def test_an_lmdb_beside_the_images_is_named_with_the_command_that_scans_it(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """An LMDB in an image folder was '2 .mdb' in the note: its NaN records went unnoticed without a word on
    where the data was. The note names the environment and how to scan it."""
    import lmdb

    write("data/a.jpg", jpeg(rng))
    env = lmdb.open(str(tmp_path / "data" / "train_lmdb"), map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"0", b"x")
    env.close()
    report = scan_dir(tmp_path / "data")
    assert report.info["images.skipped"] == (
        "2 files not scanned as images: 2 LMDB files of train_lmdb (a dataset of its own: scan it with dscan scan "
        f"{tmp_path / 'data' / 'train_lmdb'})"
    )
