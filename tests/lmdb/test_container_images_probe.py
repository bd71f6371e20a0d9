"""Defects found by probing dscan with images inside containers (LMDB records, HDF5 datasets) at known keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import h5py
import msgpack
import numpy as np

from tests.conftest import finding, run_scan, write_h5
from tests.lmdb.conftest import datum, jpeg, key

EnvMaker = Callable[..., Path]


def test_a_constant_raw_datum_counts_its_pixels_as_values_as_float_data_does(make_env: EnvMaker) -> None:
    """constant-sample's ``values`` are the values of the constant samples (3×8×8 = 192 each) for float_data,
    npy, raw and HDF5 images alike; a raw Datum's blank image counted 1."""
    records = {key(i): datum(label=i % 3, seed=i) for i in range(40)}
    records[key(5)] = datum(label=1, data=bytes([77]) * 192)
    records[key(30)] = datum(label=0, data=bytes(192))
    found = finding(run_scan(make_env(sorted(records.items()))), "V005")
    assert [(loc.index, loc.key, loc.detail) for loc in found.locations] == [
        (5, key(5), "every value is 77 (3×8×8)"),
        (30, key(30), "every value is 0 (3×8×8)"),
    ]
    assert (found.count, found.values) == (2, 2 * 192)


def test_a_constant_image_among_unlabeled_images_is_reported(tmp_path: Path) -> None:
    """``unlabeled`` images (STL-10's split, self-supervised pre-training) are samples, not targets: a blank
    one there was left alone because the name holds ``label``. Targets stay exempt."""
    images = np.random.default_rng(0).integers(0, 256, (10, 16, 16, 3), dtype=np.uint8)
    images[3] = 0
    path = write_h5(tmp_path / "stl.h5", {"unlabeled_X": images, "X_unlabelled": images, "label_map": images})
    found = finding(run_scan(path), "V005")
    assert [(loc.dataset, loc.index) for loc in found.locations] == [("/X_unlabelled", 3), ("/unlabeled_X", 3)]


def test_opaque_bytes_that_are_no_images_are_named_plainly(tmp_path: Path) -> None:
    path = tmp_path / "blobs.h5"
    with h5py.File(path, "w") as fh:
        fh["blobs"] = np.array([np.void(bytes([i]) * 8) for i in range(3)])
        fh["x"] = np.arange(6, dtype=np.float32).reshape(3, 2)
    report = run_scan(path)
    assert report.info["hdf5.not_scanned"] == "1 dataset not scanned: blobs.h5:/blobs (opaque bytes, 8 each)"


def test_copies_of_an_image_under_two_class_names_are_a_label_conflict(make_env: EnvMaker) -> None:
    """msgpack records labelled by class name (``{"img": jpeg, "label": "dog"}``) are left out of the label
    checks, but a copy of an image under ``dog`` and ``eel`` is still two answers for one input: the duplicate
    said nothing of the conflict. Names holding ``@`` or ``:`` do not confuse the split or label parts."""
    names = ["cat", "dog", "e@l:2"]
    records = {key(i): msgpack.packb({"img": jpeg(i), "label": names[i % 3]}) for i in range(30)}
    records[key(20)] = msgpack.packb({"img": jpeg(4), "label": "e@l:2"})  # key(4) is a dog
    records[key(25)] = msgpack.packb({"img": jpeg(7), "label": "dog"})  # so is key(7): no conflict
    found = finding(run_scan(make_env(sorted(records.items()))), "I013")
    assert [(loc.key, loc.detail) for loc in found.locations] == [
        (key(4), f"2 identical copies: also data.mdb[20] key {key(20)}; label conflict: labels dog, e@l:2"),
        (key(7), f"2 identical copies: also data.mdb[25] key {key(25)}"),
    ]
