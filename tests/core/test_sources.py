"""Format detection: by names and first bytes, without importing any format's library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scanner_service.config import ScanConfig
from scanner_service.errors import SourceNotFound, UnsupportedSource
from scanner_service.sources import CLASSES, DETECTION, detect_kind, open_source
from tests.conftest import finding, run_scan, write_h5

PROBE = """
import sys
from pathlib import Path
from scanner_service.sources import detect_kind
kind = detect_kind(Path(sys.argv[1]))
heavy = sorted(m for m in ("h5py", "lmdb", "PIL", "simplejpeg", "google.protobuf") if m in sys.modules)
print(kind, ",".join(heavy) or "-")
"""


def test_every_kind_is_detected_and_has_a_class() -> None:
    assert [kind for kind, _ in DETECTION] == list(CLASSES)


@pytest.mark.slow
def test_detection_imports_no_format_library(tmp_path: Path) -> None:
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    h5 = write_h5(tmp_path / "d.h5", {"x": np.zeros((2, 2), np.float32)})
    for path, kind in ((folder, "images"), (h5, "hdf5")):
        out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
        assert out.stdout.split() == [kind, "-"], out.stdout + out.stderr


def test_unknown_kinds_and_paths_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# not a dataset\n")
    with pytest.raises(UnsupportedSource, match="is not a dataset dscan can read"):
        detect_kind(tmp_path / "notes.md")
    with pytest.raises(UnsupportedSource, match="unknown dataset kind 'parquet'"):
        open_source(tmp_path, ScanConfig(), kind="parquet")


def test_a_stray_hdf5_file_does_not_hide_an_image_folder(tmp_path: Path, rng: np.random.Generator) -> None:
    """A folder holding HDF5 files and images is read as the kind that holds most of its bytes: a small features
    file in an ImageFolder left every image unscanned and the scan passed; plots beside the HDF5 data, or a
    MATLAB annotation beside each image, keep their real kind too. The report names what it did not scan."""
    from PIL import Image

    def picture(path: Path, side: int = 96) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)).save(path)

    images = tmp_path / "images"
    for cls in ("cat", "dog"):
        picture(images / cls / "a.png")
    (images / "dog" / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))  # damaged
    write_h5(images / "features.h5", {"x": rng.normal(size=(3, 16)).astype(np.float32)})
    assert detect_kind(images) == "images"
    assert [loc.path for loc in finding(run_scan(images), "I003").locations] == ["dog/b.png"]

    run = tmp_path / "run"
    x = rng.normal(size=(2000, 16)).astype(np.float32)
    x[3, 1] = np.nan
    write_h5(run / "train.h5", {"x": x})
    write_h5(run / "val.h5", {"x": rng.normal(size=(500, 16)).astype(np.float32)})
    for k in range(3):
        picture(run / "plots" / f"loss{k}.png", 48)
    assert detect_kind(run) == "hdf5"
    report = run_scan(run)
    assert [(loc.path, loc.index) for loc in finding(report, "V001").locations] == [("train.h5", 3)]
    assert report.info["hdf5.images_not_scanned"].startswith("3 image files below this folder not scanned")

    pictures = tmp_path / "pictures"
    for k in range(4):
        picture(pictures / "images" / f"{k}.png")
        write_h5(pictures / "annotations" / f"{k}.mat", {"box": np.ones(4)})
    (pictures / "images" / "3.png").write_bytes(b"<html><body>rate limited</body></html>")
    assert detect_kind(pictures) == "images"
    assert [loc.path for loc in finding(run_scan(pictures), "I002").locations] == ["images/3.png"]


def test_images_behind_a_folder_link_and_matlab_bytes_count_for_the_folder_kind(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """The kind of a folder counts the images behind its folder links (the scans follow them), and weighs only
    the ``.h5`` files' bytes against the images' (MATLAB annotations beside the images are no HDF5 data)."""
    from PIL import Image

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for k in range(6):
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(elsewhere / f"{k}.png")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "pictures").symlink_to(elsewhere)
    (linked / "loop").symlink_to(linked)
    write_h5(linked / "features.h5", {"x": rng.normal(size=(6, 8)).astype(np.float32)})
    assert detect_kind(linked) == "images"
    annotated = tmp_path / "annotated"
    for k in range(6):
        (annotated / "img").mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(annotated / "img" / f"{k}.png")
        write_h5(annotated / "ann" / f"{k}.mat", {"box": rng.normal(size=(400, 8))}, userblock_size=512)
    write_h5(annotated / "features.h5", {"x": rng.normal(size=(6, 8)).astype(np.float32)})
    assert detect_kind(annotated) == "images"


def test_hdf5_files_behind_a_folder_link_are_scanned(tmp_path: Path, rng: np.random.Generator) -> None:
    """A folder whose HDF5 shards sit behind a folder link (the scan found none and passed)."""
    shards = tmp_path / "shards"
    x = rng.normal(size=(20, 4)).astype(np.float32)
    x[7, 0] = np.nan
    write_h5(shards / "train.h5", {"x": x})
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "shards").symlink_to(shards)
    (dataset / "loop").symlink_to(dataset)
    report = run_scan(dataset)
    assert report.source.files == 1
    assert [(loc.path, loc.index) for loc in finding(report, "V001").locations] == [("shards/train.h5", 7)]


def test_an_hdf5_folder_with_a_folder_the_scan_cannot_list_does_not_pass(tmp_path: Path) -> None:
    """A sub-folder the user cannot list may hold the NaN: it is unreadable-file, not skipped (exit 0 before)."""
    from scanner_service import plan
    from tests.conftest import as_nobody, let_nobody_in

    write_h5(tmp_path / "ds" / "a.h5", {"x": np.zeros((4, 2), np.float32)})
    write_h5(tmp_path / "ds" / "locked" / "b.h5", {"x": np.full((4, 2), np.nan, np.float32)})
    let_nobody_in(tmp_path / "ds")
    (tmp_path / "ds").chmod(0o755)
    (tmp_path / "ds" / "locked").chmod(0)

    def unreadable() -> object:
        planned = plan(tmp_path / "ds", ScanConfig())
        return [(loc.path, loc.detail) for loc in planned.partial.findings["S001"].locations]

    assert as_nobody(unreadable) == [
        ("locked", "a folder that cannot be listed (permission denied?): the files in it were not scanned")
    ]


def test_hdf5_lists_take_root_and_name_what_is_no_regular_file(tmp_path: Path) -> None:
    """``--root`` holds for HDF5 lists as for image lists (it was ignored); a named pipe listed, or named like
    an HDF5 file in a folder, is unreadable-file, never opened (a listed one was "does not exist")."""
    data = tmp_path / "data"
    write_h5(data / "a.h5", {"x": np.array([1.0, np.nan], np.float32)})
    os.mkfifo(data / "pipe.h5")
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "train.txt").write_text("a.h5\npipe.h5\n")
    report = run_scan(lists / "train.txt", root=str(data))
    assert [(loc.path, loc.line, loc.detail) for loc in finding(report, "S001").locations] == [
        ("train.txt", 2, "pipe.h5: not a regular file (a named pipe, socket or device): not read")
    ]
    assert [(loc.path, loc.line) for loc in finding(report, "V001").locations] == [("a.h5", 1)]
    with pytest.raises(SourceNotFound, match="--root"):
        run_scan(lists / "train.txt", root=str(tmp_path / "nowhere"))
    folder = run_scan(data)
    assert [(loc.path, loc.detail) for loc in finding(folder, "S001").locations] == [
        ("pipe.h5", "not a regular file (a named pipe, socket or device): not read")
    ]


@pytest.mark.parametrize("lines", [1, 2, 3])
def test_an_hdf5_list_naming_a_file_with_a_space_is_list_syntax_and_the_file_is_scanned(
    tmp_path: Path, lines: int
) -> None:
    """Caffe's HDF5Data layer reads the list's names split at whitespace (``source_file >> line``): 'part 3.h5'
    is 'part' and '3.h5', and it fails. It passed; a list of one or two lines was no dataset at all."""
    names = ["part0.h5", "part1.h5", "part 3.h5"][-lines:]
    for name in names:
        write_h5(tmp_path / "data" / name, {"x": np.ones((4, 2), np.float32), "label": np.arange(4)})
    (tmp_path / "train.txt").write_text("".join(f"data/{n}\n" for n in names))
    report = run_scan(tmp_path / "train.txt")
    assert report.source.kind == "hdf5-list"
    assert [(loc.path, loc.line, loc.detail) for loc in finding(report, "S005").locations] == [
        (
            "train.txt",
            lines,
            "Caffe's HDF5Data layer reads the names 'data/part', '3.h5' from this line, not the file "
            "'data/part 3.h5' (a name with spaces)",
        )
    ]
    assert report.summary.items_scanned == 8 * lines and report.exit_code() == 1


def test_detection_walks_a_folder_once_and_forgets_it_after(tmp_path: Path) -> None:
    """Each format's test walked the whole folder again (HDF5, then NumPy): seconds on a folder of a million
    files. Inside ``shared_listings`` a folder is listed once; outside it, every walk sees the folder as it is."""
    from scanner_service.sources.walk import files_below, shared_listings

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.jpg").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    outs: list[str] = []
    with shared_listings():
        first = list(files_below(tmp_path))
        (tmp_path / "a" / "2.jpg").write_bytes(b"x")
        again = list(files_below(tmp_path, links_out=outs))
        fenced = list(files_below(tmp_path, lambda p: "link" in p, outs))  # another fence: its own walk
    assert first == again == [str(tmp_path / "a" / "1.jpg")]
    assert fenced == [str(tmp_path / "a" / "1.jpg"), str(tmp_path / "a" / "2.jpg")] and outs == [str(tmp_path / "link")]
    assert len(list(files_below(tmp_path))) == 2
