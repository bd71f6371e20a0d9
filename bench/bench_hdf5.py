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

With ``--small COUNTS``, files of many small datasets too (``--layouts ''`` for those alone): COUNT samples of
64×64×3 values, one group per sample (``/sample_000001/image`` beside a scalar ``label``) or flat (``/d000001``),
stored contiguous, chunked (one chunk each) or compact, float32 or uint8 (``--small-layouts``). The baseline
there is the loop users write: one process that visits every dataset, reads it with ``ds[()]`` and tests
``np.isnan(a).any()`` (float data); dscan runs as the installed ``dscan`` console script. Float files hold a NaN
in every 997th sample: "exact" means dscan names exactly those datasets and rows, and the loop found them too.

    python bench/bench_hdf5.py --layouts '' --small 20000,100000
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


SMALL_SHAPE = (64, 64, 3)
SMALL_NAN_EVERY = 997
SMALL_LAYOUTS = "grouped-contiguous-float32,grouped-compact-uint8,flat-chunked-float32,flat-contiguous-uint8"
SMALL_BASELINE = (
    "import sys,h5py,numpy as np\n"
    "f=h5py.File(sys.argv[1],'r'); bad=[]\n"
    "def visit(name, obj):\n"
    "    if isinstance(obj, h5py.Dataset):\n"
    "        a=obj[()]\n"
    "        if a.dtype.kind=='f' and np.isnan(a).any(): bad.append(name)\n"
    "f.visititems(visit); print(len(bad))"
)


def generate_small(path: Path, count: int, layout: str) -> list[tuple[str, int]]:
    """``count`` small datasets laid out as ``layout`` (grouped|flat - contiguous|chunked|compact - dtype);
    returns the (dataset, row) of every NaN seeded."""
    grouping, storage, dtype = layout.split("-")
    rng = np.random.default_rng(0)
    base = (rng.random((16, *SMALL_SHAPE)) * 255).astype(dtype)
    seeded: list[tuple[str, int]] = []
    with h5py.File(path, "w") as fh:
        for i in range(count):
            name = f"/sample_{i:06d}/image" if grouping == "grouped" else f"/d{i:06d}"
            data = base[i % len(base)]
            if data.dtype.kind == "f" and i % SMALL_NAN_EVERY == 7:
                data = data.copy()
                data[i % SMALL_SHAPE[0], 1, 0] = np.nan
                seeded.append((name, i % SMALL_SHAPE[0]))
            if grouping == "grouped":
                group = fh.require_group(name.rsplit("/", 1)[0])
                group["label"] = np.int64(i % 10)
            if storage == "compact":
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_layout(h5py.h5d.COMPACT)
                space = h5py.h5s.create_simple(data.shape)
                dsid = h5py.h5d.create(fh.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
                dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
            else:
                fh.create_dataset(name, data=data, chunks=data.shape if storage == "chunked" else None)
    return seeded


def bench_small(folder: Path, counts: list[int], layouts: list[str], repeat: int) -> None:
    """Many small datasets: dscan as a whole process against the plain loop, both from the page cache."""
    script = Path(sys.executable).with_name("dscan")
    dscan = [str(script)] if script.exists() else [sys.executable, "-c", "from scanner_service.entry import run; run()"]
    print(f"\nmany small datasets of {'×'.join(map(str, SMALL_SHAPE))}; baseline: visit, ds[()], np.isnan(a).any()")
    print(f"{'file':<38} {'method':<10} {'s':>7} {'ms/1k ds':>9} {'peak RSS':>9} {'ratio':>6}  locations")
    for count in counts:
        for layout in layouts:
            path = folder / f"small-{count}-{layout}.h5"
            seeded = generate_small(path, count, layout)  # (written every time: the NaN list comes with it)
            datasets = count * (2 if layout.startswith("grouped") else 1)
            warm(path)
            run([sys.executable, "-c", SMALL_BASELINE, str(path)])  # warm-up
            base_times, base_rss = [], 0
            for _ in range(repeat):
                warm(path)
                t, rss, _, out = run([sys.executable, "-c", SMALL_BASELINE, str(path)])
                assert int(out) == len(seeded), out
                base_times.append(t)
                base_rss = max(base_rss, rss)
            base = statistics.median(base_times)
            label = f"{count:,} {layout}"
            print(f"{label:<38} {'loop':<10} {base:7.2f} {base / datasets * 1e6:9.1f} {base_rss:7d} MB {1.0:6.2f}")
            for workers in (1, 2):
                times, peak, exact = [], 0, True
                for _ in range(repeat):
                    warm(path)
                    t, rss, _, out = run([*dscan, "scan", "--format", "json", "--workers", str(workers), str(path)])
                    report = json.loads(out)
                    nan = next((f for f in report["findings"] if f["code"] == "V001"), None)
                    found = sorted((loc["dataset"], loc["index"]) for loc in nan["locations"]) if nan else []
                    exact = exact and found == sorted(seeded)[: report["config"]["max_locations"]]
                    exact = exact and (nan["count"] if nan else 0) == len(seeded)
                    times.append(t)
                    peak = max(peak, rss)
                med = statistics.median(times)
                print(
                    f"{label:<38} {f'dscan -j{workers}':<10} {med:7.2f} {med / datasets * 1e6:9.1f} {peak:7d} MB "
                    f"{base / med:6.2f}  {'exact' if exact else 'WRONG'}"
                )
            path.unlink()


def warm(path: Path) -> None:
    with path.open("rb") as fh:
        while fh.read(64 << 20):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=4.0, help="size of each dataset [4]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median) [3]")
    parser.add_argument("--dir", type=Path, help="where to write the data [a temporary folder]")
    parser.add_argument("--layouts", default="chunked,gzip,contiguous", help="'' for none")
    parser.add_argument("--small", default="", help="counts of small datasets, e.g. 20000,100000 [none]")
    parser.add_argument("--small-layouts", default=SMALL_LAYOUTS, help=f"[{SMALL_LAYOUTS}]")
    args = parser.parse_args()
    run([sys.executable, "-c", "import scanner_service.cli"])  # write the bytecode caches before any timed run

    rows = int(args.size_gb * (1 << 30)) // (ROW * 4)
    rows = max(rows, NAN_ROWS[-1] + 1)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="dscan-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    dscan = [sys.executable, "-m", "scanner_service.cli", "scan", "--format", "json"]
    if not args.layouts:
        bench_small(folder, [int(n) for n in args.small.split(",")], args.small_layouts.split(","), args.repeat)
        return
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
    if args.small:
        bench_small(folder, [int(n) for n in args.small.split(",")], args.small_layouts.split(","), args.repeat)


if __name__ == "__main__":
    main()
