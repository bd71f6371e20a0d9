"""A confined scan (the service confines to its data roots) never reads a file that resolves elsewhere."""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import lmdb
import numpy as np
import pytest
from PIL import Image

from tests.conftest import codes, finding, run_scan, write_h5

REFUSED = "resolves outside the allowed data roots"


def png_file(path: Path, value: int) -> Path:
    out = io.BytesIO()
    Image.fromarray(np.full((40, 40, 3), value, np.uint8) + np.arange(40, dtype=np.uint8)[:, None, None]).save(
        out, "PNG"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out.getvalue())
    return path


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """(data root, a folder outside it holding a file with a NaN and a non-image)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    bad = np.zeros((10, 3), np.float32)
    bad[4, 1] = np.nan
    write_h5(outside / "secret.h5", {"x": bad})
    (outside / "secret.jpg").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return root, outside


def test_image_folder_link_out_is_reported_not_read(places: tuple[Path, Path]) -> None:
    root, outside = places
    data = root / "imgs"
    png_file(data / "cat" / "a.png", 10)
    (data / "cat" / "b.jpg").symlink_to(outside / "secret.jpg")
    confined = run_scan(data, confine=(str(root),))
    refused = finding(confined, "S001")
    assert [(loc.path, REFUSED in (loc.detail or "")) for loc in refused.locations] == [("cat/b.jpg", True)]
    assert "I002" not in codes(confined)  # never opened: nothing is said of its content
    assert "I002" in codes(run_scan(data))  # unconfined (the CLI), the link is followed as loaders do


def test_folder_links_out_are_not_walked_and_tell_nothing_of_what_is_behind(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    """A folder link out of the roots is one S001 for the link: the files behind it are not listed, counted
    or opened; a link to a missing file reads as one to an existing file; what lies outside does not decide
    the folder's kind; a class folder that links out keeps its place in the class numbering."""
    root, outside = places
    photos = outside / "photos"
    for i in range(5):
        png_file(photos / f"p{i}.png", i)
    (photos / "passwords").write_text("hunter2\n")
    h5 = root / "h5"
    write_h5(h5 / "ok.h5", {"x": np.ones((4, 2), np.float32)})
    (h5 / "everything").symlink_to(outside)
    (h5 / "exists.h5").symlink_to(outside / "secret.h5")
    (h5 / "gone.h5").symlink_to(outside / "nope.h5")
    (h5 / "p").symlink_to(photos)  # five images outside would make this an image folder
    report = run_scan(h5, confine=(str(root),))
    assert report.source.kind == "hdf5" and report.source.files == 1
    assert [(loc.path, REFUSED in (loc.detail or "")) for loc in finding(report, "S001").locations] == [
        ("everything", True),
        ("exists.h5", True),
        ("gone.h5", True),
        ("p", True),
    ]
    assert "hdf5.images_not_scanned" not in report.info
    classes = root / "classes"
    png_file(classes / "a" / "x.png", 1)
    png_file(classes / "c" / "y.png", 2)
    (classes / "b").symlink_to(photos)
    report = run_scan(classes, confine=(str(root),))
    assert [loc.path for loc in finding(report, "S001").locations] == ["b"]
    assert report.source.files == 2 and "images.skipped" not in report.info
    (labels,) = report.labels
    assert [(row.label, row.count) for row in labels.histogram] == [(0, 1), (1, 0), (2, 1)]


def test_lists_naming_files_outside_are_reported_without_looking_at_them(places: tuple[Path, Path]) -> None:
    root, outside = places
    png_file(root / "a.png", 5)
    images = root / "train.txt"
    images.write_text(f"a.png 0\n{outside / 'secret.jpg'} 1\n{outside / 'does-not-exist.jpg'} 1\n")
    report = run_scan(images, confine=(str(root),))
    assert sorted(loc.line for loc in finding(report, "S001").locations) == [2, 3]
    assert "S004" not in codes(report)  # whether a file exists out there is not said either
    h5list = root / "h5.txt"
    write_h5(root / "ok.h5", {"x": np.ones((4, 2), np.float32)})
    h5list.write_text(f"ok.h5\n{outside / 'secret.h5'}\n")
    report = run_scan(h5list, confine=(str(root),))
    assert [loc.line for loc in finding(report, "S001").locations] == [2]
    assert "V001" not in codes(report)


def test_hdf5_folder_and_lmdb_file_linked_from_outside(places: tuple[Path, Path], tmp_path: Path) -> None:
    root, outside = places
    folder = root / "h5"
    write_h5(folder / "ok.h5", {"x": np.ones((4, 2), np.float32)})
    (folder / "linked.h5").symlink_to(outside / "secret.h5")
    report = run_scan(folder, confine=(str(root),))
    assert [loc.path for loc in finding(report, "S001").locations] == ["linked.h5"]
    assert "V001" not in codes(report)
    assert "V001" in codes(run_scan(folder))
    env_dir = outside / "env"
    with lmdb.open(str(env_dir), map_size=1 << 20) as env, env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    linked = root / "db"
    linked.mkdir()
    (linked / "data.mdb").symlink_to(env_dir / "data.mdb")
    report = run_scan(linked, confine=(str(root),))
    assert [loc.path for loc in finding(report, "S001").locations] == ["data.mdb"]
    assert report.summary.items_scanned == 0


def test_a_confined_scan_of_data_inside_is_the_same_scan(tmp_path: Path) -> None:
    data = tmp_path / "root" / "d.h5"
    values = np.ones((20, 4), np.float32)
    values[7, 2] = np.inf
    write_h5(data, {"x": values})
    plain, confined = run_scan(data), run_scan(data, confine=(str(tmp_path / "root"),))
    assert [f.model_dump() for f in plain.findings] == [f.model_dump() for f in confined.findings]


def virtual_over(path: Path, source: str, rows: int = 10) -> Path:
    """An HDF5 file whose dataset /x is virtual: all of it mapped from ``source``:/x."""
    with h5py.File(path, "w") as fh:
        layout = h5py.VirtualLayout(shape=(rows, 3), dtype=np.float32)
        layout[:] = h5py.VirtualSource(source, "x", shape=(rows, 3))
        fh.create_virtual_dataset("x", layout, fillvalue=0)
    return path


def test_a_virtual_dataset_mapping_a_file_outside_is_reported_not_read(places: tuple[Path, Path]) -> None:
    root, _ = places
    path = virtual_over(root / "vds.h5", "../outside/secret.h5")
    unconfined = run_scan(path)
    assert [loc.index for loc in finding(unconfined, "V001").locations] == [4]  # HDF5 reads it: so does dscan

    confined = run_scan(path, confine=(str(root),))
    assert "V001" not in codes(confined)
    (loc,) = finding(confined, "S001").locations
    assert (loc.path, loc.dataset) == ("vds.h5", "/x")
    assert loc.detail.startswith("virtual dataset maps ../outside/secret.h5: it resolves outside")
    assert "secret" not in str(confined.statistics)


def test_external_raw_storage_outside_is_reported_not_read(places: tuple[Path, Path]) -> None:
    """A dataset whose raw data lives in a file outside the roots (HDF5 reads whatever file it names)."""
    root, outside = places
    values = np.zeros((10, 2), np.float32)
    values[3, 0] = np.nan
    (outside / "raw.bin").write_bytes(values.tobytes())
    path = root / "ext.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", shape=(10, 2), dtype="f4", external=[(str(outside / "raw.bin"), 0, 80)])
    assert [loc.index for loc in finding(run_scan(path), "V001").locations] == [3]  # HDF5 reads it: so does dscan
    confined = run_scan(path, confine=(str(root),))
    assert "V001" not in codes(confined) and not confined.statistics
    (loc,) = finding(confined, "S001").locations
    assert (loc.path, loc.dataset) == ("ext.h5", "/x")
    assert loc.detail.startswith(f"external raw data file {outside / 'raw.bin'}: it resolves outside")


def test_an_external_link_is_named_not_followed(places: tuple[Path, Path]) -> None:
    root, _ = places
    path = root / "linked.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("own", data=np.arange(12, dtype=np.float32).reshape(4, 3))
        fh["ext"] = h5py.ExternalLink("../outside/secret.h5", "/x")
    report = run_scan(path)
    assert "V001" not in codes(report)  # the NaN behind the link is not read
    assert report.info["hdf5.not_scanned"] == (
        "1 dataset not scanned: linked.h5:/ext (external link to ../outside/secret.h5:/x)"
    )
