"""Format detection: by names and first bytes, without importing any format's library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scanner_service.config import ScanConfig
from scanner_service.errors import UnsupportedSource
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
    """A folder is an HDF5 dataset when HDF5 files are at least as many as images: one ``features.h5`` among
    an ImageFolder's images left every image unscanned and the scan passed. The other way round, images
    beside HDF5 files are named as not scanned."""
    from PIL import Image

    images = tmp_path / "images"
    for cls in ("cat", "dog"):
        (images / cls).mkdir(parents=True)
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(images / cls / "a.png")
    (images / "dog" / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))  # damaged
    write_h5(images / "dog" / "features.h5", {"x": rng.normal(size=(10, 4)).astype(np.float32)})
    assert detect_kind(images) == "images"
    report = run_scan(images)
    assert [loc.path for loc in finding(report, "I003").locations] == ["dog/b.png"]
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    for k in range(2):
        write_h5(arrays / f"part{k}.h5", {"x": rng.normal(size=(10, 4)).astype(np.float32)})
    Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(arrays / "preview.png")
    assert detect_kind(arrays) == "hdf5"
    report = run_scan(arrays)
    assert report.source.files == 2
    assert report.info["hdf5.images_not_scanned"].startswith("1 image file below this folder not scanned")


def test_plots_beside_hdf5_files_and_annotations_beside_images(tmp_path: Path, rng: np.random.Generator) -> None:
    """A few plots beside the HDF5 data leave it an HDF5 dataset; a MATLAB annotation beside each image leaves
    an image folder one (either way round, the folder's real defect was lost)."""
    from PIL import Image

    data = tmp_path / "run"
    x = rng.normal(size=(10, 4)).astype(np.float32)
    x[3, 1] = np.nan
    write_h5(data / "train.h5", {"x": x})
    write_h5(data / "val.h5", {"x": rng.normal(size=(10, 4)).astype(np.float32)})
    for k in range(3):
        (data / "plots").mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(data / "plots" / f"loss{k}.png")
    assert detect_kind(data) == "hdf5"
    assert [(loc.path, loc.index) for loc in finding(run_scan(data), "V001").locations] == [("train.h5", 3)]
    pictures = tmp_path / "pictures"
    for k in range(4):
        (pictures / "images").mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(pictures / "images" / f"{k}.jpg")
        write_h5(pictures / "annotations" / f"{k}.mat", {"box": np.ones(4)})
    (pictures / "images" / "3.jpg").write_bytes(b"<html><body>rate limited</body></html>")
    assert detect_kind(pictures) == "images"
    assert [loc.path for loc in finding(run_scan(pictures), "I002").locations] == ["images/3.jpg"]
