"""The request checks' walk of a dataset (its fingerprint for deduplication) stays inside the data roots."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from api.paths import fingerprint
from scanner_service.config import ScanConfig
from tests.conftest import write_h5


def test_the_fingerprint_does_not_follow_links_out_of_the_data_roots(tmp_path: Path) -> None:
    """A link to a large tree outside (``/usr``) made every request walk all of it; what changes out there
    must not change the fingerprint of a confined request either."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    data = root / "data"
    write_h5(data / "ok.h5", {"x": np.ones((4, 2), np.float32)})
    outside.mkdir()
    (outside / "a.txt").write_text("one")
    (data / "elsewhere").symlink_to(outside)
    confined = ScanConfig(confine=(str(root),))
    before, plain = fingerprint(data, confined), fingerprint(data, ScanConfig())
    (outside / "b.txt").write_text("two")
    assert fingerprint(data, confined) == before
    assert fingerprint(data, ScanConfig()) != plain  # unconfined (the CLI's view), the link is followed
