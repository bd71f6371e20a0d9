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
from tests.conftest import write_h5

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
