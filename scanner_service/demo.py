"""A small dataset with seeded defects, for ``dscan scan`` without a path and for trying dscan out.

Every defect sits at a known place; the tests check that the scan finds each one there.
"""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numpy as np

NUM_CLASSES = 10
SEEDED = {
    "V001": ("train.h5", "/data", 17),
    "V002": ("train.h5", "/data", 1203),
    "V003": ("train.h5", "/data", 640),
    "V004": ("train.h5", "/data", None),
    "L001": ("extra.h5", "/features", None),
    "L003": ("train.h5", "/label", None),  # train.h5 is a split of its own: extra.h5 names none
    "L005": ("train.h5", "/label", 0),
    "S002": ("damaged.h5", "/data", 64),
    "S001": ("truncated.h5", None, None),
    "I003": ("photos.h5", "/images", 13),
    "I006": ("photos.h5", "/images", 29),
}
"""Code -> (file, dataset, first-axis index) of each seeded defect."""


def corrupt_chunk(path: Path, dataset: str, offset: tuple[int, ...]) -> None:
    """Overwrite the middle of one stored (compressed) chunk with garbage, in place."""
    with h5py.File(path, "r") as fh:
        info = fh[dataset].id.get_chunk_info_by_coord(offset)
    with path.open("r+b") as raw:
        raw.seek(info.byte_offset + info.size // 4)
        raw.write(b"\xff\x00\xde\xad" * max(1, info.size // 8))


def build_demo(folder: Path, seed: int = 7) -> Path:
    """Write the demo dataset into ``folder``/dscan-demo and return that path."""
    rng = np.random.default_rng(seed)
    root = folder / "dscan-demo"
    root.mkdir(parents=True, exist_ok=True)

    n = 2000
    data = rng.normal(0.0, 1.0, size=(n, 3, 8, 8)).astype(np.float32)
    data[:, 2] = 0.5  # a constant channel
    data[17, 0, 3, 3] = np.nan
    data[1203, 1, 0, 0] = np.inf
    data[640, 0, 0, 0] = 1.0e5
    labels = rng.integers(0, NUM_CLASSES, size=n)
    labels[labels == 7] = 8  # class 7: missing
    labels[labels == 3] = 4
    labels[rng.choice(np.arange(700, n), size=5, replace=False)] = 3  # class 3: rare
    labels[:600] = 0  # sorted storage: 600 zeros in a row
    with h5py.File(root / "train.h5", "w") as fh:
        fh.create_dataset("data", data=data, chunks=(64, 3, 8, 8), compression="gzip", shuffle=True)
        fh.create_dataset("label", data=labels.astype(np.float32))

    with h5py.File(root / "extra.h5", "w") as fh:
        fh.create_dataset("features", data=rng.normal(size=(500, 16)).astype(np.float32))
        extra = rng.integers(0, NUM_CLASSES, size=480)
        extra[(extra == 7) | (extra == 3)] = 1
        fh.create_dataset("label", data=extra.astype(np.float32))

    damaged = root / "damaged.h5"
    with h5py.File(damaged, "w") as fh:
        fh.create_dataset(
            "data", data=rng.normal(size=(256, 32)).astype(np.float32), chunks=(64, 32), compression="gzip"
        )
    corrupt_chunk(damaged, "/data", (64, 0))

    with h5py.File(root / "photos.h5", "w") as fh:  # encoded images, one JPEG a row
        images = fh.create_dataset("images", (40,), dtype=h5py.vlen_dtype(np.uint8))
        for i in range(40):
            jpeg = _jpeg(rng)
            if i == 13:
                jpeg = jpeg[: len(jpeg) // 2]  # cut short: the decoder fails
            if i == 29:
                jpeg += b"PK\x03\x04" + bytes(60)  # an archive glued on after the image's end
            images[i] = np.frombuffer(jpeg, np.uint8)

    truncated = root / "truncated.h5"
    with h5py.File(truncated, "w") as fh:
        fh.create_dataset("data", data=rng.normal(size=(1000, 64)).astype(np.float32))
    truncated.write_bytes(truncated.read_bytes()[:1500])
    return root


def _jpeg(rng: np.random.Generator) -> bytes:
    """A small photo-like JPEG: a colour gradient with noise."""
    from PIL import Image

    y, x = np.mgrid[0:48, 0:64]
    base = np.stack([x * 4, y * 5, (x + y) * 2], axis=-1) + rng.integers(0, 40, size=(48, 64, 3))
    out = io.BytesIO()
    Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()
