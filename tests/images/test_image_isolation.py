"""A decoder that kills its process costs one file, not the scan: the pool retries, splits, reports."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from imagetools import jpeg, pooled_scan

from scanner_service import ScanConfig
from scanner_service.sources.base import Shard
from scanner_service.sources.images import ImageFolderSource


class KillingImages(ImageFolderSource):
    """An image folder whose reader dies of SIGSEGV on any file named ``killer*`` (a decoder crash)."""

    kind = "test-killing-images"

    def read(self, shard: Shard) -> Iterator[Any]:
        for item in super().read(shard):
            if getattr(item, "name", "").startswith("killer"):
                os.kill(os.getpid(), signal.SIGSEGV)
            yield item


@pytest.mark.slow
def test_a_crashing_file_becomes_corrupt_image_and_the_rest_is_scanned(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    write: Callable[[str, bytes], Path],
    rng: np.random.Generator,
) -> None:
    for i in range(30):
        write(f"a/{i:02d}.jpg", jpeg(rng, 40, 40))
    write("a/killer.jpg", jpeg(rng, 40, 40))
    write("b/cut.jpg", jpeg(rng, 40, 40)[:200])
    write("b/killer2.jpg", jpeg(rng, 40, 40))
    merged = pooled_scan(KillingImages, tmp_path, ScanConfig(shard_bytes=1 << 16), monkeypatch)
    corrupt = merged.findings["I003"]
    assert [(loc.path, loc.detail) for loc in corrupt.sorted_locations()] == [
        ("a/killer.jpg", "the decoder crashed: the reader process was killed by SIGSEGV"),
        ("b/cut.jpg", corrupt.sorted_locations()[1].detail),
        ("b/killer2.jpg", "the decoder crashed: the reader process was killed by SIGSEGV"),
    ]
    assert "truncated" in (corrupt.sorted_locations()[1].detail or "")
    assert merged.items == 33  # every file counted: 31 read, 2 reported as crashes
    assert merged.labels["."].histogram == {0: 30, 1: 1}  # the labels of the files read


def test_a_file_whose_reader_hangs_is_reported_as_a_hang_not_a_crash(tmp_path: Path) -> None:
    from scanner_service.forked import stall_reason

    source = ImageFolderSource(tmp_path, ScanConfig())
    shard = Shard(id=0, items=1, spec={"paths": ["a/slow.tif"], "sizes": [10], "start": 0})
    _, hung = source.crash_finding(shard, stall_reason(120))
    assert hung.detail == "the reader made no progress for 120 s and was stopped (a hung decoder or read)"
    _, died = source.crash_finding(shard, "the reader process was killed by SIGSEGV")
    assert died.detail == "the decoder crashed: the reader process was killed by SIGSEGV"
