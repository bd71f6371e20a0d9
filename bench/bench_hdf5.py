"""HDF5 benchmark: `dscan scan` against the check users write today, in the same run.

Generates float32 HDF5 files (chunked uncompressed, chunked gzip, contiguous) with NaNs at known rows, then
times, for each layout:

- baseline: ``np.isnan(f[name][:]).any()`` in a fresh process (reads the whole dataset into memory);
- ``dscan scan FILE --format json`` as a whole process, with 1 and 2 workers.

Prints throughput (GB/s of dataset bytes), the peak RSS of the whole process tree (the sum over processes, so
pages the forked workers share with their parent count once per process), the ratio to the baseline, whether
dscan's NaN locations are exactly the seeded rows, and dscan's peak PSS (shared pages split between the processes
that map them: the tree's real footprint). The file is read right before every timed run, so every run reads
from the page cache: machines that reclaim idle page cache (DAMON's pageout of pages unread for a minute, as on
the machines dscan is measured on) otherwise send a later run to the disk.

    python bench/bench_hdf5.py --size-gb 4          # the default; needs ~12 GB of disk
    python bench/bench_hdf5.py --size-gb 0.5 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

ROW = 1024  # float32 values per sample: 4 KB rows
CHUNK_ROWS = 256  # 1 MB chunks
NAN_ROWS = (11, 4097, 123_457)
BASELINE = "import sys,h5py,numpy as np; f=h5py.File(sys.argv[1],'r'); print(bool(np.isnan(f['data'][:]).any()))"


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Both sides run as installed software does: with bytecode caches (an installed package has its .pyc files)."""


def generate(path: Path, rows: int, layout: str) -> None:
    rng = np.random.default_rng(0)
    kwargs: dict[str, object] = {}
    if layout != "contiguous":
        kwargs["chunks"] = (CHUNK_ROWS, ROW)
    if layout == "gzip":
        kwargs["compression"] = "gzip"
        kwargs["compression_opts"] = 4
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset("data", shape=(rows, ROW), dtype=np.float32, **kwargs)
        block = 16 * CHUNK_ROWS
        base = rng.normal(size=(block, ROW)).astype(np.float32)
        for start in range(0, rows, block):
            n = min(block, rows - start)
            chunk = np.roll(base, start // block, axis=0)[:n].copy()
            for r in NAN_ROWS:
                if start <= r < start + n:
                    chunk[r - start, 5] = np.nan
            ds[start : start + n] = chunk


def tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        found.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                stack.extend(int(c) for c in fh.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def memory_kb(pids: list[int], field: str) -> int:
    """Sum of one field (VmRSS: from /proc/PID/status; Pss: from smaps_rollup) over processes, in KB."""
    total = 0
    for p in pids:
        name = "smaps_rollup" if field == "Pss" else "status"
        try:
            with open(f"/proc/{p}/{name}") as fh:
                for line in fh:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
                        break
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def run(cmd: list[str], pss: bool = False) -> tuple[float, int, int, str]:
    """Wall time, peak RSS of the process tree (MB; shared pages counted in every process that maps them),
    peak PSS of the tree (MB; shared pages split between them; only when ``pss``) and stdout of a command."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=ENV)
        peak = peak_pss = 0
        while proc.poll() is None:
            pids = tree(proc.pid)
            peak = max(peak, memory_kb(pids, "VmRSS"))
            if pss:
                peak_pss = max(peak_pss, memory_kb(pids, "Pss"))
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        out.seek(0)
        return elapsed, peak // 1024, peak_pss // 1024, out.read().decode()


def warm(path: Path) -> None:
    with path.open("rb") as fh:
        while fh.read(64 << 20):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=4.0, help="size of each dataset [4]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median) [3]")
    parser.add_argument("--dir", type=Path, help="where to write the data [a temporary folder]")
    parser.add_argument("--layouts", default="chunked,gzip,contiguous")
    args = parser.parse_args()
    run([sys.executable, "-c", "import scanner_service.cli"])  # write the bytecode caches before any timed run

    rows = int(args.size_gb * (1 << 30)) // (ROW * 4)
    rows = max(rows, NAN_ROWS[-1] + 1)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="dscan-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    dscan = [sys.executable, "-m", "scanner_service.cli", "scan", "--format", "json"]
    print(f"{rows:,} rows of {ROW} float32 = {rows * ROW * 4 / 1e9:.2f} GB per dataset; {os.cpu_count()} cores")
    print(f"{'layout':<11} {'method':<16} {'GB/s':>7} {'peak RSS':>9} {'ratio':>6}  locations")
    for layout in args.layouts.split(","):
        path = folder / f"{layout}.h5"
        if not path.exists():
            generate(path, rows, layout)
        size = rows * ROW * 4
        warm(path)
        run([sys.executable, "-c", BASELINE, str(path)])  # warm-up: page cache and interpreter files
        base_times, base_rss = [], 0
        for _ in range(args.repeat):
            warm(path)
            t, rss, _, out = run([sys.executable, "-c", BASELINE, str(path)])
            assert out.strip() == "True", out
            base_times.append(t)
            base_rss = max(base_rss, rss)
        base = statistics.median(base_times)
        print(f"{layout:<11} {'baseline':<16} {size / base / 1e9:7.2f} {base_rss:7d} MB {1.0:6.2f}")
        for workers in (1, 2):
            times, peak, peak_pss, exact = [], 0, 0, True
            for _ in range(args.repeat):
                warm(path)
                t, rss, pss, out = run([*dscan, "--workers", str(workers), str(path)], pss=True)
                peak_pss = max(peak_pss, pss)
                report = json.loads(out)
                nan = next(f for f in report["findings"] if f["code"] == "V001")
                exact = exact and sorted(loc["index"] for loc in nan["locations"]) == list(NAN_ROWS)
                times.append(t)
                peak = max(peak, rss)
            med = statistics.median(times)
            print(
                f"{layout:<11} {f'dscan -j{workers}':<16} {size / med / 1e9:7.2f} {peak:7d} MB {base / med:6.2f}"
                f"  {'exact' if exact else 'WRONG'}; peak PSS {peak_pss} MB"
            )


if __name__ == "__main__":
    main()
