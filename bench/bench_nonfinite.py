"""Slow paths of defective data: NaN in every block, and LMDB records without a label.

Generates (in a temporary folder unless --dir is given):

- ``nan.npy`` and ``nan.h5`` (contiguous ``/x``): --rows rows of 512 float32 (2 GB for the default 1,000,000),
  one NaN in every row (tabular data with NaN as its missing value) and one +Inf; ``clean.npy`` and ``clean.h5``
  the same values without them;
- ``labelled`` and ``gaps``: --records msgpack records (msgpack-numpy arrays of 3x4x4 uint8 and a label), in
  ``gaps`` every tenth record without a label;

then times as whole processes started from here, interleaved, each file read right before its run (the
machine's page cache drops cold pages within minutes), medians of --repeat runs:

- the loop a user writes: ``np.isnan`` over 2,048-row blocks of the memory-mapped .npy, or of ``d[r:r+2048]``
  from h5py;
- ``dscan scan -j1 --format json`` on the clean and the defective file.

Prints the times, dscan's ratio of defective to clean data (1.0: a defect costs nothing more) and to the loop,
and for LMDB the extra time per unlabelled record.

    python bench/bench_nonfinite.py                            # 1,000,000 rows, 200,000 records
    python bench/bench_nonfinite.py --rows 250000 --records 50000 --repeat 1     # a quick look
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import lmdb
import msgpack
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DSCAN = [sys.executable, "-m", "scanner_service.cli"]
COLUMNS = 512
STEP = 8192

NPY_LOOP = """
import sys, numpy as np
a = np.load(sys.argv[1], mmap_mode="r")
print(sum(bool(np.isnan(a[r : r + 2048]).any()) for r in range(0, len(a), 2048)))  # every block, no early stop
"""
H5_LOOP = """
import sys, h5py, numpy as np
d = h5py.File(sys.argv[1])["x"]
print(sum(bool(np.isnan(d[r : r + 2048]).any()) for r in range(0, d.shape[0], 2048)))
"""


def generate_arrays(folder: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    nan = np.lib.format.open_memmap(folder / "nan.npy", mode="w+", dtype=np.float32, shape=(rows, COLUMNS))
    clean = np.lib.format.open_memmap(folder / "clean.npy", mode="w+", dtype=np.float32, shape=(rows, COLUMNS))
    for r in range(0, rows, STEP):
        x = rng.standard_normal((min(STEP, rows - r), COLUMNS), dtype=np.float32)
        clean[r : r + len(x)] = x
        x[np.arange(len(x)), rng.integers(0, COLUMNS, len(x))] = np.nan
        nan[r : r + len(x)] = x
    nan[rows // 2, 7] = np.inf
    nan.flush()
    clean.flush()
    del nan, clean
    for name in ("nan", "clean"):
        src = np.load(folder / f"{name}.npy", mmap_mode="r")
        with h5py.File(folder / f"{name}.h5", "w") as fh:
            d = fh.create_dataset("x", shape=src.shape, dtype=np.float32)
            for r in range(0, rows, STEP):
                d[r : r + STEP] = src[r : r + STEP]


def generate_lmdb(path: Path, records: int, gaps: bool) -> None:
    rng = np.random.default_rng(1)
    env = lmdb.open(str(path), map_size=max(1 << 26, records * 400), lock=True)
    with env.begin(write=True) as txn:
        for i in range(records):
            pixels = rng.integers(0, 255, 48, dtype=np.uint8).tobytes()
            record: dict[str, object] = {
                "x": {b"nd": True, b"type": "|u1", b"kind": b"", b"shape": (3, 4, 4), b"data": pixels}
            }
            if not gaps or i % 10 != 9:
                record["label"] = i % 7
            txn.put(f"{i:08d}".encode(), msgpack.packb(record, use_bin_type=True))
    env.close()
    (path / "lock.mdb").unlink(missing_ok=True)


def warm(path: Path) -> None:
    for f in [path] if path.is_file() else sorted(path.iterdir()):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


def timed(cmd: list[str], data: Path) -> float:
    warm(data)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=ROOT)
    return time.perf_counter() - start


def scan(path: Path, *extra: str) -> list[str]:
    return [*DSCAN, "scan", str(path), "-j1", "--format", "json", "-o", "/dev/null", "--fail-on", "never", *extra]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of 512 float32 [1,000,000: 2 GB]")
    ap.add_argument("--records", type=int, default=200_000, help="msgpack records per environment [200,000]")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median) [3]")
    ap.add_argument("--dir", type=Path, help="generate (or reuse) the data here [a temporary folder]")
    args = ap.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="dscan-nonfinite-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if not (folder / "clean.h5").exists():
            generate_arrays(folder, args.rows)
        for name, gaps in (("labelled", False), ("gaps", True)):
            if not (folder / name).exists():
                generate_lmdb(folder / name, args.records, gaps)
        times: dict[str, list[float]] = {}
        runs = {
            "npy loop": ([sys.executable, "-c", NPY_LOOP, str(folder / "nan.npy")], folder / "nan.npy"),
            "npy clean": (scan(folder / "clean.npy"), folder / "clean.npy"),
            "npy NaN": (scan(folder / "nan.npy"), folder / "nan.npy"),
            "h5 loop": ([sys.executable, "-c", H5_LOOP, str(folder / "nan.h5")], folder / "nan.h5"),
            "h5 clean": (scan(folder / "clean.h5"), folder / "clean.h5"),
            "h5 NaN": (scan(folder / "nan.h5"), folder / "nan.h5"),
            "lmdb labelled": (scan(folder / "labelled", "--decoder", "msgpack"), folder / "labelled"),
            "lmdb gaps": (scan(folder / "gaps", "--decoder", "msgpack"), folder / "gaps"),
        }
        for _ in range(args.repeat):
            for name, (cmd, data) in runs.items():
                times.setdefault(name, []).append(timed(cmd, data))
        m = {name: statistics.median(ts) for name, ts in times.items()}
        for kind in ("npy", "h5"):
            print(
                f"{kind:4s} {args.rows:,} x {COLUMNS} float32: loop {m[f'{kind} loop']:.2f} s, dscan -j1 clean "
                f"{m[f'{kind} clean']:.2f} s, NaN in every row {m[f'{kind} NaN']:.2f} s "
                f"(NaN / clean {m[f'{kind} NaN'] / m[f'{kind} clean']:.2f}x, NaN / loop "
                f"{m[f'{kind} NaN'] / m[f'{kind} loop']:.2f}x)"
            )
        extra = (m["lmdb gaps"] - m["lmdb labelled"]) / (args.records // 10) * 1e6
        print(
            f"lmdb {args.records:,} msgpack records: all labelled {m['lmdb labelled']:.2f} s, every tenth "
            f"unlabelled {m['lmdb gaps']:.2f} s ({m['lmdb gaps'] / m['lmdb labelled']:.2f}x; "
            f"{extra:.0f} us more per unlabelled record)"
        )
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
