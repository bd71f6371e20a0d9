"""Deduplication's view of a dataset: the request checks' walk (its fingerprint) stays inside the data roots,
and the files an HDF5 dataset reads data from elsewhere are found."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np

from api.paths import fingerprint
from scanner_service.config import ScanConfig
from scanner_service.linked_files import MISSING, linked_files, unchanged
from tests.conftest import write_h5

from .conftest import pool_children, write_external, write_external_link, write_vds


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


def test_the_files_an_hdf5_dataset_reads_data_from_are_listed(tmp_path: Path) -> None:
    src = write_h5(tmp_path / "src.h5", {"x": np.ones((10, 4), np.float32)})
    config = ScanConfig(confine=(str(tmp_path),))
    assert linked_files(src, config) == {}
    assert set(linked_files(write_vds(tmp_path / "vds.h5", src), config) or {}) == {str(src)}
    assert set(linked_files(write_vds(tmp_path / "vds2.h5", tmp_path / "vds.h5"), config) or {}) == {
        str(tmp_path / "vds.h5"),
        str(src),  # the source of the source: HDF5 reads through both
    }
    ext = write_external(tmp_path / "ext.h5", tmp_path / "ext.bin")
    assert set(linked_files(ext, config) or {}) == {str(tmp_path / "ext.bin")}
    linking = write_external_link(tmp_path / "link.h5", src)
    assert set(linked_files(linking, config) or {}) == {str(src)}
    folder = linked_files(tmp_path, config)  # a folder: every HDF5 file below it
    assert folder is not None and set(folder) == {str(src), str(tmp_path / "vds.h5"), str(tmp_path / "ext.bin")}


def test_linked_files_record_their_state_and_a_change_is_seen(tmp_path: Path) -> None:
    src = write_h5(tmp_path / "src.h5", {"x": np.ones((10, 4), np.float32)})
    states = linked_files(write_vds(tmp_path / "vds.h5", src), ScanConfig())
    assert states is not None and unchanged(states)
    write_h5(src, {"x": np.full((10, 4), np.nan, np.float32)})  # same size, rewritten
    assert not unchanged(states)


def test_a_missing_source_is_recorded_so_that_its_arrival_is_a_change(tmp_path: Path) -> None:
    src = write_h5(tmp_path / "src.h5", {"x": np.ones((10, 4), np.float32)})
    vds = write_vds(tmp_path / "vds.h5", src)
    src.unlink()
    states = linked_files(vds, ScanConfig())
    assert states == {str(src): MISSING}
    write_h5(src, {"x": np.ones((10, 4), np.float32)})
    assert not unchanged(states)


def test_linked_files_out_of_the_data_roots_are_left_out(tmp_path: Path) -> None:
    """A confined scan never reads them (S001): they are not looked at, not even stat'ed."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    src = write_h5(outside / "src.h5", {"x": np.ones((10, 4), np.float32)})
    root.mkdir()
    vds = write_vds(root / "vds.h5", src)
    assert linked_files(vds, ScanConfig(confine=(str(root),))) == {}
    assert set(linked_files(vds, ScanConfig()) or {}) == {str(src)}  # the CLI's view: not confined


def test_a_file_name_pattern_makes_the_linked_files_unknown(tmp_path: Path) -> None:
    """An unlimited virtual dataset mapping ``src-%b.h5``: which files it reads is not known."""
    mapped = h5py.h5s.create_simple((0, 4), (h5py.h5s.UNLIMITED, 4))
    mapped.select_hyperslab((0, 0), (h5py.h5s.UNLIMITED, 1), stride=(1, 1), block=(1, 4))
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_virtual(mapped, b"src-%b.h5", b"x", h5py.h5s.create_simple((1, 4)))
    with h5py.File(tmp_path / "vds.h5", "w") as fh:
        h5py.h5d.create(fh.id, b"v", h5py.h5t.NATIVE_FLOAT, mapped, dcpl=plist)
    assert linked_files(tmp_path / "vds.h5", ScanConfig()) is None
    assert linked_files(tmp_path / "vds.h5", ScanConfig(confine=(str(tmp_path),))) == {}  # confined: never read


def test_finding_the_linked_files_leaves_no_child_process(tmp_path: Path) -> None:
    """The plan task reads the HDF5 structure in a forked child and took the first result without reaping
    it: each job planned left a zombie in the worker process, until the process table filled."""
    path = write_h5(tmp_path / "train.h5", {"data": np.ones((8, 2), np.float32)})
    before = pool_children(os.getpid())
    for _ in range(3):
        assert linked_files(path, ScanConfig()) == {}
    assert pool_children(os.getpid()) == before
