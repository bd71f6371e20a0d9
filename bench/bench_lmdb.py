"""LMDB benchmark: `dscan scan` against a plain protobuf loop over the same environment, in the same run.

Generates two environments of Caffe Datums (in a temporary folder unless --dir is given):

- ``datum``: --records records of 3x32x32 uint8 pixels (like CIFAR; ~4 GB for the default 1,000,000),
  random labels, with a value that is no Datum at one key and a Datum whose data is too short at another;
- ``float``: --float-records records of float_data (--float-shape, default 3x16x16), with one NaN and one
  Inf at known keys;

then times, for each, as whole processes started from here:

- baseline: a read-only cursor over every record, parsing each value with the protobuf Datum class (upb),
  in one process: what a user's own check loop costs;
- ``dscan scan ENV --format json`` with 1 and 2 workers.

Prints records/s (whole process), the ratio to the baseline (targets: >= 0.8 with 1 worker, >= 1.5 with 2),
the peak private memory of the dscan process tree (RssAnon summed over the processes, sampled every 20 ms;
the mapped file's pages are page cache, not counted), the same on an environment a tenth the size (memory must
not grow with the record count), and whether every seeded defect was found at its key. The environment is
read right before every run (this machine's page cache drops cold pages within minutes) so every run reads
from the page cache; baseline and dscan runs are interleaved, and figures are medians of --repeat runs. Both
sides run with bytecode caches, as installed software does (PYTHONDONTWRITEBYTECODE is dropped).

    python bench/bench_lmdb.py                               # the default: 1,000,000 + 200,000 records
    python bench/bench_lmdb.py --records 100000 --float-records 20000 --repeat 1     # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import lmdb
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scanner_service.records.datum import datum_class  # noqa: E402

BASELINE = """
import sys, time, lmdb
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
F = descriptor_pb2.FieldDescriptorProto
proto = descriptor_pb2.FileDescriptorProto(name="caffe.proto", package="caffe", syntax="proto2")
m = proto.message_type.add(name="Datum")
for name, number, kind, label in [("channels", 1, F.TYPE_INT32, 1), ("height", 2, F.TYPE_INT32, 1),
        ("width", 3, F.TYPE_INT32, 1), ("data", 4, F.TYPE_BYTES, 1), ("label", 5, F.TYPE_INT32, 1),
        ("float_data", 6, F.TYPE_FLOAT, 3), ("encoded", 7, F.TYPE_BOOL, 1)]:
    m.field.add(name=name, number=number, type=kind, label=label)
pool = descriptor_pool.DescriptorPool()
pool.Add(proto)
Datum = message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe.Datum"))
env = lmdb.open(sys.argv[1], readonly=True, lock=False)
start = time.perf_counter()
n = bad = 0
parse = Datum.FromString
with env.begin() as txn:
    for key, value in txn.cursor():
        try:
            parse(value)
        except DecodeError:
            bad += 1
        n += 1
print(n, time.perf_counter() - start, bad)
"""

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Both sides run as installed software does: with bytecode caches (an installed package has its .pyc files)."""

SEEDED_DATUM = {"R001": 4242, "R002": 777}
SEEDED_FLOAT = {"V001": 1234, "V002": 5678}


def key(i: int) -> bytes:
    return b"%08d" % i


def generate_datum(path: Path, records: int, seed: int = 0, defects: bool = True) -> None:
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 256, (256, 3 * 32 * 32), dtype=np.uint8)
    labels = rng.integers(0, 10, records)
    datum = datum_class()
    path.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), map_size=records * 4300 + (64 << 20), writemap=True, sync=False, lock=True)
    txn = env.begin(write=True)
    for i in range(records):
        d = datum(channels=3, height=32, width=32, data=pool[i % 256].tobytes(), label=int(labels[i]))
        value = d.SerializeToString()
        if defects and i == SEEDED_DATUM["R001"]:
            value = b"\x0a\xff\xff" + value[3:40]
        if defects and i == SEEDED_DATUM["R002"]:
            value = datum(channels=3, height=32, width=32, data=pool[0][:3000].tobytes(), label=1).SerializeToString()
        txn.put(key(i), value, append=True)
        if i % 100_000 == 99_999:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.sync()
    env.close()
    (path / "lock.mdb").unlink(missing_ok=True)


def generate_float(path: Path, records: int, shape: tuple[int, int, int], seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((64, int(np.prod(shape)))).astype(np.float32)
    datum = datum_class()
    path.mkdir(parents=True, exist_ok=True)
    per = int(np.prod(shape)) * 5 + 64
    env = lmdb.open(str(path), map_size=records * (per + 4200) + (64 << 20), writemap=True, sync=False, lock=True)
    txn = env.begin(write=True)
    c, h, w = shape
    for i in range(records):
        values = pool[i % 64]
        if i in (SEEDED_FLOAT["V001"], SEEDED_FLOAT["V002"]):
            values = values.copy()
            values[3] = np.nan if i == SEEDED_FLOAT["V001"] else np.inf
        d = datum(channels=c, height=h, width=w, float_data=values.tolist(), label=i % 10)
        txn.put(key(i), d.SerializeToString(), append=True)
        if i % 50_000 == 49_999:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.sync()
    env.close()
    (path / "lock.mdb").unlink(missing_ok=True)


def warm(path: Path) -> None:
    with (path / "data.mdb").open("rb") as fh:
        while fh.read(64 << 20):
            pass


def _tree(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                stack.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def _rss_anon_kb(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("RssAnon:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def run(cmd: list[str], ok: tuple[int, ...] = (0, 1)) -> tuple[float, int, str, float]:
    """Wall time, peak RssAnon of the process tree (KB, sampled every 20 ms), stdout and CPU seconds of a command."""
    peak = 0
    cpu_before = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    done = threading.Event()
    out: dict[str, str] = {}

    def drain() -> None:
        out["stdout"], out["stderr"] = proc.communicate()
        done.set()

    reader = threading.Thread(target=drain)
    reader.start()
    while not done.wait(0.02):
        peak = max(peak, _rss_anon_kb(_tree(proc.pid)))
    reader.join()
    wall = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out['stderr']}")
    return wall, peak, out["stdout"], _children_cpu() - cpu_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def dscan(path: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", "-j", str(workers)]


def found_at(report: dict[str, Any], seeded: dict[str, int]) -> dict[str, bool]:
    hits = {}
    for code, index in seeded.items():
        finding = next((f for f in report["findings"] if f["code"] == code), None)
        keys = {loc.get("key") for loc in finding["locations"]} if finding else set()
        hits[code] = key(index).decode() in keys
    return hits


def measure(name: str, path: Path, records: int, seeded: dict[str, int], repeat: int, workers: list[int]) -> None:
    """Baseline and dscan runs interleaved (so a burst of load elsewhere hits all alike), each after a warm-up read
    of the file (this machine's page cache evicts cold pages within minutes)."""
    base_runs: list[tuple[float, int, str, float]] = []
    dscan_runs: dict[int, list[tuple[float, int, str, float]]] = {j: [] for j in workers}
    for _ in range(repeat):
        warm(path)
        base_runs.append(run([sys.executable, "-c", BASELINE, str(path)], ok=(0,)))
        for j in workers:
            warm(path)
            dscan_runs[j].append(run(dscan(path, j)))
    base_wall = statistics.median(r[0] for r in base_runs)
    n, loop, _bad = base_runs[0][2].split()
    assert int(n) == records, (n, records)
    base_rate = records / base_wall
    print(f"\n{name}: {records:,} records, {(path / 'data.mdb').stat().st_size / 1e9:.2f} GB")
    base_cpu = statistics.median(r[3] for r in base_runs)
    print(
        f"  baseline (cursor + protobuf parse, 1 process): {base_rate:,.0f} records/s "
        f"({base_wall:.2f} s whole process, {base_cpu:.2f} s CPU; the loop alone {records / float(loop):,.0f} "
        f"records/s), RssAnon {statistics.median(r[1] for r in base_runs) / 1024:.0f} MB"
    )
    for j in workers:
        runs = dscan_runs[j]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[3] for r in runs)
        peak = max(r[1] for r in runs)
        report = json.loads(runs[0][2])
        scanned = report["summary"]["items_scanned"]
        rate = records / wall
        target = {1: 0.8, 2: 1.5}.get(j)
        verdict = ""
        if target is not None:
            verdict = f" [target >= {target}x: {'met' if rate / base_rate >= target else 'MISSED'}]"
        hits = ", ".join(f"{code} {'yes' if ok else 'NO'}" for code, ok in found_at(report, seeded).items())
        print(
            f"  dscan -j{j}: {rate:,.0f} records/s ({wall:.2f} s, {cpu:.2f} s CPU), "
            f"ratio {rate / base_rate:.2f}x{verdict}; peak RssAnon {peak / 1024:.0f} MB; scanned {scanned:,}; "
            f"seeded defects found at their keys: {hits}"
        )


def memory_growth(small: Path, large: Path, small_n: int, large_n: int) -> None:
    print("\nprivate memory against record count (dscan -j1, peak RssAnon of the process tree):")
    for path, n in ((small, small_n), (large, large_n)):
        warm(path)
        _, peak, _, _ = run(dscan(path, 1))
        print(f"  {n:>10,} records: {peak / 1024:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="Datum records of 3x32x32 uint8 [1,000,000]")
    ap.add_argument("--float-records", type=int, default=200_000, help="float_data records [200,000]")
    ap.add_argument("--float-shape", default="3x16x16", help="channels x height x width of float_data [3x16x16]")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median) [3]")
    ap.add_argument("--workers", default="1,2", help="worker counts to time [1,2]")
    ap.add_argument("--dir", type=Path, help="generate (or reuse) the environments here [a temporary folder]")
    args = ap.parse_args()
    shape = tuple(int(x) for x in args.float_shape.split("x"))
    assert len(shape) == 3
    workers = [int(w) for w in args.workers.split(",")]
    base = args.dir or Path(tempfile.mkdtemp(prefix="dscan-bench-lmdb-"))
    print(f"dscan LMDB benchmark in {base} ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        print("  (PYTHONDONTWRITEBYTECODE is set here; the timed processes run without it, as installed software does)")
    run([sys.executable, "-c", "import scanner_service.cli"], ok=(0,))  # compile the bytecode caches once
    envs = {
        "datum": (base / f"datum-{args.records}", args.records),
        "datum-small": (base / f"datum-{args.records // 10}", args.records // 10),
        "float": (base / f"float-{args.float_records}-{args.float_shape}", args.float_records),
    }
    try:
        for name, (path, n) in envs.items():
            if not (path / "data.mdb").exists():
                t = time.perf_counter()
                if name.startswith("datum"):
                    generate_datum(path, n, defects=name == "datum")
                else:
                    generate_float(path, n, shape)  # type: ignore[arg-type]
                print(f"  generated {name}: {n:,} records in {time.perf_counter() - t:.0f} s")
        seeded_datum = {c: i for c, i in SEEDED_DATUM.items() if i < args.records}
        seeded_float = {c: i for c, i in SEEDED_FLOAT.items() if i < args.float_records}
        measure("datum 3x32x32 uint8", envs["datum"][0], args.records, seeded_datum, args.repeat, workers)
        measure(
            f"float_data {args.float_shape}", envs["float"][0], args.float_records, seeded_float, args.repeat, workers
        )
        memory_growth(envs["datum-small"][0], envs["datum"][0], envs["datum-small"][1], args.records)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
