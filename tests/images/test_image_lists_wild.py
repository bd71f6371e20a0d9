"""Image lists and folders as real datasets ship them: Kaggle CSVs of ids without an extension, comment lines,
and the other habits of list writers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from imagetools import png, scan_dir

from scanner_service import Report
from scanner_service.errors import UnsupportedSource
from scanner_service.render import notes

Write = Callable[[str, bytes], Path]


def _details(report: Report, code: str) -> list[tuple[str, int | None, str | None]]:
    found = next((f for f in report.findings if f.code == code), None)
    return [(loc.path, loc.line, loc.detail) for loc in found.locations] if found else []


def test_ids_without_an_extension_name_the_image_that_exists(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    # Kaggle's train.csv: 'id,label' beside train/<id>.png. Without a column of file names the scan stopped
    # with 'no column of image paths' and no word on where the images were; an 'image' column of the same ids
    # gave '0a1b does not exist' for every line, though 0a1b.png lies right there
    for name in ("0a1b", "0a1c", "ff02"):
        write(f"train/{name}.png", png(rng))
    write("train.csv", b"id,label\n0a1b,0\n0a1c,1\nff02,0\n")
    with pytest.raises(UnsupportedSource, match=r"the values of 'id' are the names of images without their extension: "
                       r"train/0a1b\.png exists; add a column of the file names\)$"):  # fmt: skip
        scan_dir(tmp_path / "train.csv", workers=1)
    with pytest.raises(UnsupportedSource, match=r"'id' .* without their extension: 0a1b\.png exists"):
        scan_dir(tmp_path / "train.csv", workers=1, root=str(tmp_path / "train"))
    write("named.csv", b"image,label\n0a1b,0\nff02.png,1\n")
    report = scan_dir(tmp_path / "named.csv", workers=1, root=str(tmp_path / "train"))
    hint = "0a1b does not exist (0a1b.png does: the list names the file without its extension)"
    assert _details(report, "S004") == [("../named.csv", 2, hint)]  # (the list lies beside the root)
    assert report.summary.items_scanned == 1


def test_a_comment_line_in_a_labelled_list_is_named_as_one(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    # '# path label' on top of a Caffe list read "label 'label' is not a number": Caffe reads the path '# path'
    for i in range(3):
        write(f"img/{i}.png", png(rng))
    write("train.txt", b"# path label\nimg/0.png 0\nimg/1.png 1\nimg/2.png 0\n")
    report = scan_dir(tmp_path / "train.txt", workers=1)
    assert _details(report, "S005") == [("train.txt", 1, "a comment line: list readers take it for a file name")]
    assert report.summary.items_scanned == 3


def test_a_comment_line_before_a_csv_header_is_one_finding_and_the_rows_are_read(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    # '# exported ...' above 'path,label': the comment was read as a header of one column, every row was 'an
    # unquoted comma?' and no image was scanned (pandas fails there too: 'Expected 1 fields in line 3, saw 2')
    for i in range(3):
        write(f"img/{i}.png", png(rng))
    write("train.csv", b"\xef\xbb\xbf# exported 2024-01-01\r\n# by labeller\r\npath,label\r\nimg/0.png,0\r\n"
          b"img/1.png,1\r\nimg/9.png,1\r\nimg/2.png,0\r\n")  # fmt: skip
    report = scan_dir(tmp_path / "train.csv", workers=1)
    comment = "a comment line before the header: pandas' read_csv takes it for the header (comment='#' skips it)"
    assert _details(report, "S005") == [("train.csv", 1, comment), ("train.csv", 2, comment)]
    assert _details(report, "S004") == [("train.csv", 6, "img/9.png does not exist")]
    assert report.summary.items_scanned == 3
    # a header whose first name starts with '#' (as many fields as the rows) is a header, as pandas reads it
    write("hashed.csv", b"#path,label\nimg/0.png,0\nimg/1.png,1\n")
    hashed = scan_dir(tmp_path / "hashed.csv", workers=1)
    assert hashed.findings == [] and hashed.summary.items_scanned == 2


def test_a_multi_label_column_is_read_as_one_and_runs_no_label_check(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    # 'labels' of '1 5' and '3' (NUS-WIDE, Open Images exports): each cell of several ids was list-syntax (an
    # error on a valid dataset) and its image was not scanned; 'cat|dog' cells became classes of their own
    for i in range(5):
        write(f"img/{i}.png", png(rng))
    write("ids.csv", b"filename,labels\nimg/0.png,1 5\nimg/1.png,3\nimg/2.png,\nimg/3.png,2 4 7\nimg/4.png,0\n")
    report = scan_dir(tmp_path / "ids.csv", workers=1, num_classes=8, batch_size=4)
    assert report.findings == [] and report.labels == []
    assert report.summary.items_scanned == 5
    assert report.info["images.labels"] == (
        "ids.csv: 'labels' holds several labels in 2 rows (multi-label): the label checks do not run"
    )
    assert report.info["images.labels"] in notes(report)  # shown in the text, markdown and page reports
    write("tags.csv", b"filename,labels\nimg/0.png,cat|dog\nimg/1.png,dog\nimg/2.png,bird|cat\n")
    tags = scan_dir(tmp_path / "tags.csv", workers=1)
    assert tags.findings == [] and tags.labels == [] and tags.summary.items_scanned == 3
    # one such cell in a column of class ids is a bad cell (a typo), as before; class names may hold spaces
    write("typo.csv", b"filename,label\nimg/0.png,1\nimg/1.png,3\nimg/2.png,2 4\n")
    typo = scan_dir(tmp_path / "typo.csv", workers=1)
    assert _details(typo, "S005") == [("typo.csv", 4, "label '2 4' is not a number (the column holds class ids)")]
    write("names.csv", b"filename,label\nimg/0.png,golden retriever\nimg/1.png,pug\nimg/2.png,golden retriever\n")
    names = scan_dir(tmp_path / "names.csv", workers=1)
    assert [(row.name, row.count) for row in names.labels[0].histogram] == [("golden retriever", 2), ("pug", 1)]


def test_paths_relative_to_another_folder_name_that_folder(
    tmp_path: Path, write: Write, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list beside 'data/' whose paths are relative to 'data/' (a convert_imageset root passed apart) read
    'cat/0.png does not exist' on every line, with no word on where the files are."""
    for rel in ("cat/0.png", "cat/1.png", "dog/0.png"):
        write(f"data/{rel}", png(rng))
    write("train.txt", b"cat/0.png 0\ncat/1.png 0\ndog/0.png 1\n")
    report = scan_dir(tmp_path / "train.txt", workers=1)
    there = tmp_path / "data"
    hint = f"(it exists in {there}: the list's paths are relative to that folder; scan with --root {there})"
    assert [(line, detail) for _, line, detail in _details(report, "S004")] == [
        (1, f"cat/0.png does not exist {hint}"),
        (2, f"cat/1.png does not exist {hint}"),
        (3, f"dog/0.png does not exist {hint}"),
    ]
    # the other way round: paths that include the root's own folder name ('data/cat/0.png' under --root data)
    write("full.txt", b"data/cat/0.png 0\ndata/dog/0.png 1\n")
    report = scan_dir(tmp_path / "full.txt", workers=1, root=str(there))
    up = f"(it exists in {tmp_path}: the list's paths are relative to that folder; scan with --root {tmp_path})"
    assert [d for _, _, d in _details(report, "S004")] == [f"data/cat/0.png does not exist {up}",
                                                          f"data/dog/0.png does not exist {up}"]  # fmt: skip
    # and relative to the working folder, where the script that wrote the list ran (not the list's parent)
    monkeypatch.chdir(tmp_path)
    write("lists/2026/run.txt", b"data/cat/0.png 0\n")
    report = scan_dir(tmp_path / "lists" / "2026" / "run.txt", workers=1)
    assert [d for _, _, d in _details(report, "S004")] == [f"data/cat/0.png does not exist {up}"]


def test_a_file_missing_from_a_list_that_resolves_gets_no_root_hint(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """One file gone from a list whose other files are found: a copy of it in another folder (a backup) is no
    reason to suggest another root."""
    for rel in ("cat/0.png", "cat/1.png", "old/cat/2.png"):
        write(rel, png(rng))
    write("train.txt", b"cat/0.png 0\ncat/1.png 0\ncat/2.png 0\n")
    report = scan_dir(tmp_path / "train.txt", workers=1)
    assert _details(report, "S004") == [("train.txt", 3, "cat/2.png does not exist")]


def test_a_confined_scan_names_no_folder_outside_its_roots(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """The service confines scans to its data roots, and says nothing of files elsewhere, not even that they
    exist: the hint may name a folder inside the roots only."""
    write("data/cat/0.png", png(rng))
    write("lists/train.txt", b"cat/0.png 0\n")  # relative to a 'data/' folder the hint would name
    write("lists/sub/cat/0.png", png(rng))
    confined = scan_dir(tmp_path / "lists" / "train.txt", workers=1, root=str(tmp_path / "lists"),
                        confine=(str(tmp_path / "lists"),))  # fmt: skip
    inside = tmp_path / "lists" / "sub"
    assert [d for _, _, d in _details(confined, "S004")] == [
        f"cat/0.png does not exist (it exists in {inside}: the list's paths are relative to that folder; "
        f"scan with --root {inside})"
    ]
    (tmp_path / "lists" / "sub" / "cat" / "0.png").unlink()
    confined = scan_dir(tmp_path / "lists" / "train.txt", workers=1, confine=(str(tmp_path / "lists"),))
    assert [d for _, _, d in _details(confined, "S004")] == ["cat/0.png does not exist"]
    free = scan_dir(tmp_path / "lists" / "train.txt", workers=1)  # unconfined: 'data/' beside 'lists/' is named
    assert next(d for _, _, d in _details(free, "S004")).endswith(f"scan with --root {tmp_path / 'data'})")


def test_a_csv_label_column_by_another_name_is_read_with_labels_and_named_without(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    # 'class_name' is no label column dscan knows: the labels were dropped without a word (a label of 5 with
    # --num-classes 3 passed), and --labels, which names HDF5 and NumPy labels, was not read for a CSV
    from scanner_service.errors import ConfigError

    for i in range(4):
        write(f"img/{i}.png", png(rng))
    write("train.csv", b"path,class_name\nimg/0.png,0\nimg/1.png,1\nimg/2.png,5\nimg/3.png,2\n")
    quiet = scan_dir(tmp_path / "train.csv", workers=1, num_classes=3)
    assert quiet.findings == [] and not quiet.labels
    assert quiet.info["images.labels"].startswith("train.csv: no label column ('class_name' not read as labels;")
    report = scan_dir(tmp_path / "train.csv", workers=1, num_classes=3, labels="Class_Name")
    assert _details(report, "L002") == [("img/2.png", 4, "label 5 ≥ num_classes 3")]
    assert "images.labels" not in report.info
    with pytest.raises(ConfigError, match=r"^labels 'kind': no column of that name in train\.csv \(its columns: "
                       r"'path', 'class_name'\)$"):  # fmt: skip
        scan_dir(tmp_path / "train.csv", workers=1, labels="kind")
    write("plain.csv", b"path,label\nimg/0.png,0\nimg/1.png,1\n")
    assert scan_dir(tmp_path / "plain.csv", workers=1).labels  # the usual names need no option


def test_a_path_longer_than_any_file_system_takes_is_a_syntax_error_not_a_copy_in_the_report(
    tmp_path: Path, write: Write, rng: np.random.Generator
) -> None:
    """A line of megabytes (a file that lost its newlines) was looked up as one path, and the whole of it went into
    the report as an unreadable file's location: it is a list-syntax finding at its line, with the path's start."""
    lines = b""
    for i in range(10):
        write(f"img/{i}.png", png(rng))
        lines += f"img/{i}.png {i % 2}\n".encode()
    write("train.txt", lines + b"b" * 2_000_000 + b" 1\n")
    report = scan_dir(tmp_path / "train.txt", workers=1)
    [(path, line, detail)] = _details(report, "S005")
    assert (path, line) == ("train.txt", 11) and len(detail) < 200, detail[:300]
    assert detail.startswith("a path of 2,000,000 characters, beyond any file system's 4,095 bytes: 'bbbb"), detail
    assert "S001" not in {f.code for f in report.findings} and report.summary.items_scanned == 10
    assert len(report.model_dump_json()) < 20_000
