"""Service benchmark: what the queue costs, how it scales, how fast the status endpoint answers.

On a sharded HDF5 dataset (float32, gzip, 1 MB chunks, 64 MB shards), in one run:

- baseline: ``dscan scan --workers 1`` as a whole process, and the same scan in-process (``runner.scan``,
  no interpreter start-up: the stricter baseline);
- the service (uvicorn + ``celery worker`` + Redis) with 1 worker process: from the POST to the job's
  ``succeeded`` as seen by a client polling every 20 ms (target: at most 1.15x the baseline);
- the service with 2 worker processes against 1 (target: at least 1.7x faster);
- the status endpoint (``GET /api/v1/scans/{id}``) under 200 concurrent pollers, each polling every
  ``--poll-interval`` seconds (with jitter) while scans run: p50, p99 and max latency (target: p99 < 50 ms).

Everything runs on this machine, pollers included: on 2 cores the pollers, the API, Redis and the worker
share them. Medians of ``--repeat`` runs after one warm-up run; the data is read right before every run.

    python bench/bench_service.py                      # 1 GB, 3 repeats
    python bench/bench_service.py --size-gb 0.25 --repeat 1 --poll-seconds 5     # quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import h5py
import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ROW = 1024
CHUNK_ROWS = 256
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Every process runs as installed software does: with bytecode caches (an installed package has its .pyc files)."""


def generate(path: Path, size_gb: float) -> None:
    rows = int(size_gb * (1 << 30)) // (ROW * 4) // CHUNK_ROWS * CHUNK_ROWS
    rng = np.random.default_rng(0)
    block = rng.normal(size=(16 * CHUNK_ROWS, ROW)).astype(np.float32)
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset(
            "data",
            shape=(rows, ROW),
            dtype=np.float32,
            chunks=(CHUNK_ROWS, ROW),
            compression="gzip",
            compression_opts=1,
        )
        for start in range(0, rows, len(block)):
            n = min(len(block), rows - start)
            chunk = np.roll(block, start // len(block), axis=1)[:n].copy()
            if start == 0:
                chunk[11, 5] = np.nan
            ds[start : start + n] = chunk


def warm(path: Path) -> None:
    with path.open("rb") as fh:
        while fh.read(64 << 20):
            pass


def cli_time(path: Path) -> float:
    cmd = [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--workers", "1", "--format", "json"]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, cwd=REPO, env=ENV)
    elapsed = time.perf_counter() - start
    assert out.returncode == 1, out.stderr  # the seeded NaN
    return elapsed


def inprocess_time(path: Path) -> float:
    from scanner_service import ScanConfig, scan

    start = time.perf_counter()
    report = scan(path, ScanConfig(), workers=1)
    elapsed = time.perf_counter() - start
    assert report.findings and report.findings[0].code == "V001"
    return elapsed


def service_time(client: httpx.Client, path: Path) -> float:
    start = time.perf_counter()
    job = client.post("/api/v1/scans", json={"path": str(path), "force": True}).json()
    while True:
        state = client.get(f"/api/v1/scans/{job['id']}").json()
        if state["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.02)
    elapsed = time.perf_counter() - start
    assert state["status"] == "succeeded", state
    assert state["summary"]["errors"] >= 1
    return elapsed


def median_of(fn: Any, repeat: int, data: Path, *args: Any) -> float:
    """Median of ``repeat`` runs after a warm-up run, each right after reading ``data`` into the page cache
    (machines that reclaim idle page cache would otherwise send a later run to the disk)."""
    times = []
    for _ in range(repeat + 1):
        warm(data)
        times.append(fn(*args))
    return statistics.median(times[1:])


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str) -> int:
    """One HTTP/1.1 GET on a kept-alive connection; returns the status. (A minimal client: an httpx
    AsyncClient with 200 connections costs more CPU per request than the server on this machine.)"""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return status


async def pollers(url: str, current: list[str], count: int, interval: float, seconds: float) -> list[float]:
    """``count`` clients, each on its own connection, polling the current job every ``interval`` s."""
    parts = httpx.URL(url)
    host, port = parts.host, parts.port or 80
    latencies: list[float] = []

    async def poll() -> None:
        await asyncio.sleep(random.uniform(0, interval))
        reader, writer = await asyncio.open_connection(host, port)
        try:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                start = time.perf_counter()
                status = await _get(reader, writer, f"{host}:{port}", f"/api/v1/scans/{current[0]}")
                latencies.append(time.perf_counter() - start)
                assert status == 200, status
                await asyncio.sleep(max(0.0, interval * random.uniform(0.8, 1.2) - (time.perf_counter() - start)))
        finally:
            writer.close()

    await asyncio.gather(*(poll() for _ in range(count)))
    return latencies


def latency_under_pollers(url: str, path: Path, count: int, interval: float, seconds: float) -> dict[str, float]:
    current: list[str] = []
    stop = threading.Event()

    def keep_scanning() -> None:  # scans run (and progress changes) while the pollers poll
        with httpx.Client(base_url=url, timeout=30) as client:
            while not stop.is_set():
                job = client.post("/api/v1/scans", json={"path": str(path), "force": True}).json()
                current[:] = [job["id"]]
                while not stop.is_set():
                    if client.get(f"/api/v1/scans/{job['id']}").json()["status"] == "succeeded":
                        break
                    time.sleep(0.25)

    thread = threading.Thread(target=keep_scanning, daemon=True)
    thread.start()
    while not current:
        time.sleep(0.01)
    started = time.perf_counter()
    lat = asyncio.run(pollers(url, current, count, interval, seconds))
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join(30)
    lat.sort()
    return {
        "requests": len(lat),
        "rate": len(lat) / elapsed,
        "p50": lat[len(lat) // 2] * 1000,
        "p99": lat[int(len(lat) * 0.99)] * 1000,
        "max": lat[-1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to write the data [a temporary folder]")
    parser.add_argument("--redis-url", default=os.environ.get("DSCAN_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    parser.add_argument("--pollers", type=int, default=200)
    parser.add_argument("--poll-interval", type=float, default=0.5, help="seconds between one poller's polls")
    parser.add_argument("--poll-seconds", type=float, default=10.0)
    args = parser.parse_args()

    from api.serve import free_port, start
    from workers.settings import Settings

    folder = args.dir or Path(tempfile.mkdtemp(prefix="dscan-bench-service-"))
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"gzip-{args.size_gb:g}.h5"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        generate(path, args.size_gb)
    warm(path)
    size = path.stat().st_size
    print(
        f"dataset: {path.name}, {args.size_gb:g} GB of float32 (gzip: {size / 1e9:.2f} GB on disk), 64 MB shards; "
        f"{os.cpu_count()} cores; medians of {args.repeat} after a warm-up"
    )

    cli = median_of(cli_time, args.repeat, path, path)
    inproc = median_of(inprocess_time, args.repeat, path, path)
    print(f"{'baseline dscan scan -j1 (process)':<44} {cli:7.2f} s")
    print(f"{'baseline runner.scan(workers=1) in-process':<44} {inproc:7.2f} s")

    prefix = f"dscanbench-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in ENV.items() if not k.startswith("DSCAN_")}
    env.update(
        {
            "DSCAN_REDIS_URL": args.redis_url,
            "DSCAN_KEY_PREFIX": prefix,
            "DSCAN_QUEUE": prefix,
            "DSCAN_LOG_LEVEL": "WARNING",
        }
    )
    results: dict[int, float] = {}
    latency: dict[str, float] = {}
    for workers in (1, 2):
        service = start(port=free_port(), workers=workers, data_roots=[data], env=env, log_level="WARNING")
        try:
            with httpx.Client(base_url=service.url, timeout=60) as client:
                results[workers] = median_of(service_time, args.repeat, path, client, path)
            print(f"{f'service, {workers} worker process(es)':<44} {results[workers]:7.2f} s")
            if workers == 1:
                latency = latency_under_pollers(service.url, path, args.pollers, args.poll_interval, args.poll_seconds)
        finally:
            service.stop()
    _cleanup(args.redis_url, prefix, Settings)

    print()
    print(f"service 1 worker / dscan scan -j1 (process):   {results[1] / cli:5.2f}x   (target <= 1.15)")
    print(f"service 1 worker / runner.scan in-process:     {results[1] / inproc:5.2f}x   (target <= 1.15)")
    print(f"service speed-up, 2 workers over 1:            {results[1] / results[2]:5.2f}x   (target >= 1.7)")
    print(
        f"status endpoint, {args.pollers} pollers every {args.poll_interval:g} s for {args.poll_seconds:g} s "
        f"({latency['requests']:.0f} requests, {latency['rate']:.0f}/s): p50 {latency['p50']:.1f} ms, "
        f"p99 {latency['p99']:.1f} ms, max {latency['max']:.1f} ms   (target p99 < 50 ms)"
    )


def _cleanup(url: str, prefix: str, _: Any) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i : i + 500])
    client.close()


if __name__ == "__main__":
    main()
