"""Fixtures for the service tests: real Redis, real uvicorn servers and real ``celery worker`` processes.

Redis comes from ``DSCAN_TEST_REDIS_URL`` (``scripts/test`` sets it), else redis://127.0.0.1:6379/15. Every
service started here uses its own key prefix (queues included), and its keys are deleted afterwards with
SCAN (never FLUSHALL/FLUSHDB). Tests that stop Redis start their own redis-server on a free port.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import httpx
import numpy as np
import pytest
import redis

from scanner_service.demo import build_demo

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"
SLOW_ROWS = 32 * 1024  # 128 MB of float32 rows of 4 KB, gzip: about 0.2 s per 32 MB shard
SLOW_SHARD_BYTES = 32 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_url_from_env() -> str:
    return os.environ.get("DSCAN_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def delete_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    try:
        batch = []
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.delete(*batch)
                batch = []
        if batch:
            client.delete(*batch)
    except redis.exceptions.ConnectionError:
        pass
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = redis_url_from_env()
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.exceptions.ConnectionError as exc:
        if "DSCAN_TEST_REDIS_URL" in os.environ:
            pytest.fail(f"DSCAN_TEST_REDIS_URL={url} does not answer: {exc}")
        pytest.skip(f"no Redis at {url} (run scripts/test, which starts one): {exc}")
    return url


def write_slow(path: Path, rows: int = SLOW_ROWS, nan_rows: tuple[int, ...] = (5, 20_000)) -> Path:
    rng = np.random.default_rng(3)
    block = rng.random((4096, 1024), dtype=np.float32)
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset(
            "data", shape=(rows, 1024), dtype="f4", chunks=(8, 1024), compression="gzip", compression_opts=1
        )
        for start in range(0, rows, 4096):
            chunk = block[: min(4096, rows - start)].copy()
            for r in nan_rows:
                if start <= r < start + len(chunk):
                    chunk[r - start, 7] = np.nan
            ds[start : start + len(chunk)] = chunk
        labels = rng.integers(0, 4, size=rows).astype(np.int64)
        fh.create_dataset("label", data=labels)
    return path


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Datasets every service test may scan: the seeded demo, a slow sharded file, small ones."""
    root = tmp_path_factory.mktemp("roots") / "data"
    root.mkdir()
    build_demo(root)
    (root / "slow").mkdir()
    write_slow(root / "slow" / "slow.h5")
    small = root / "small"
    small.mkdir()
    for i in range(4):
        with h5py.File(small / f"s{i}.h5", "w") as fh:
            fh.create_dataset("x", data=np.arange(100 * (i + 1), dtype=np.float32).reshape(-1, 10))
    return root


def write_vds(path: Path, source: Path, shape: tuple[int, ...] = (10, 4)) -> Path:
    """A file whose dataset ``v`` is a virtual dataset over ``x`` of ``source`` (named relative to ``path``)."""
    layout = h5py.VirtualLayout(shape=shape, dtype="f4")
    layout[:] = h5py.VirtualSource(os.path.relpath(source, path.parent), "x", shape=shape)
    with h5py.File(path, "w") as fh:
        fh.create_virtual_dataset("v", layout, fillvalue=0)
    return path


def write_external(path: Path, raw: Path, rows: int = 10) -> Path:
    """A file whose dataset ``e`` keeps its values in the raw file ``raw`` (external storage)."""
    raw.write_bytes(np.arange(rows * 4, dtype="<f4").tobytes())
    with h5py.File(path, "w") as fh:
        fh.create_dataset("e", shape=(rows, 4), dtype="<f4", external=[(str(raw), 0, rows * 16)])
    return path


def write_external_link(path: Path, target: Path) -> Path:
    with h5py.File(path, "w") as fh:
        fh["x"] = np.ones((4, 2), np.float32)
        fh["elsewhere"] = h5py.ExternalLink(target.name, "/x")
    return path


@dataclass
class Service:
    """A running API plus worker nodes, all real processes, with their own key prefix."""

    redis_url: str
    data_root: Path
    folder: Path
    prefix: str = field(default_factory=lambda: f"dscantest-{uuid.uuid4().hex[:12]}")
    extra_env: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    port: int = 0
    api: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSCAN_")}
        env.update(
            {
                "DSCAN_REDIS_URL": self.redis_url,
                "DSCAN_DATA_ROOTS": str(self.data_root),
                "DSCAN_KEY_PREFIX": self.prefix,
                "DSCAN_QUEUE": self.prefix,
                "DSCAN_LOG_LEVEL": "INFO",
                "PYTHONPATH": str(REPO),
            }
        )
        if self.token:
            env["DSCAN_API_TOKENS"] = self.token
        env.update(self.extra_env)
        return env

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_worker(self, concurrency: int = 1) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        cmd = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--concurrency", str(concurrency)]
        cmd += ["-n", f"w{n}-{self.prefix}@%h", "--without-gossip", "--without-mingle", "--loglevel", "INFO"]
        with (self.folder / f"worker{n}.log").open("ab") as log:
            proc = subprocess.Popen(cmd, env=self.env, cwd=REPO, stdout=log, stderr=log, start_new_session=True)
        self.workers.append(proc)
        return proc

    def start_api(self) -> None:
        self.port = self.port or free_port()
        cmd = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory", "--port", str(self.port)]
        cmd += ["--host", "127.0.0.1", "--no-access-log"]
        with (self.folder / "api.log").open("ab") as log:
            self.api = subprocess.Popen(cmd, env=self.env, cwd=REPO, stdout=log, stderr=log, start_new_session=True)

    def client(self, token: str | None = "default", timeout: float = 30.0) -> httpx.Client:
        use = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {use}"} if use else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def wait_ready(self, timeout: float = 60.0, workers: bool = True) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.api is not None and self.api.poll() is not None:
                raise RuntimeError(f"API exited: {self.log('api')[-3000:]}")
            try:
                r = httpx.get(f"{self.url}/readyz" if workers else f"{self.url}/healthz", timeout=3)
                if r.status_code == 200:
                    return
                last = r.text
            except httpx.HTTPError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(f"service not ready: {last}\n{self.log('api')[-2000:]}\n{self.log('worker0')[-3000:]}")

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def store_client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, decode_responses=True, socket_timeout=5)

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def stop_worker(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def stop(self) -> None:
        procs = [p for p in [self.api, *self.workers] if p is not None]
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        delete_prefix(self.redis_url, self.prefix)


def pool_children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except FileNotFoundError:
        return []


@pytest.fixture
def make_service(redis_url: str, data_root: Path, tmp_path: Path) -> Iterator[Callable[..., Service]]:
    """Start a service of one's own: ``make_service(workers=[1], env={...}, token=None)``."""
    started: list[Service] = []

    def make(
        workers: list[int] | tuple[int, ...] = (1,),
        env: dict[str, str] | None = None,
        token: str | None = None,
        url: str | None = None,
        ready: bool = True,
    ) -> Service:
        folder = tmp_path / f"svc{len(started)}"
        folder.mkdir()
        svc = Service(url or redis_url, data_root, folder, extra_env=dict(env or {}), token=token)
        started.append(svc)
        for concurrency in workers:
            svc.start_worker(concurrency)
        svc.start_api()
        if ready:
            svc.wait_ready(workers=bool(workers))
        return svc

    yield make
    for svc in started:
        svc.stop()


@pytest.fixture(scope="session")
def service(redis_url: str, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The shared service: tokens on, callbacks to 127.0.0.1 allowed, a worker node of two processes."""
    folder = tmp_path_factory.mktemp("shared-service")
    svc = Service(
        redis_url,
        data_root,
        folder,
        token=TOKEN,
        extra_env={"DSCAN_CALLBACK_HOSTS": "127.0.0.1", "DSCAN_MAX_BODY_BYTES": "65536"},
    )
    try:
        svc.start_worker(2)
        svc.start_api()
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


def wait_job(
    client: httpx.Client, job_id: str, timeout: float = 60.0, until: Callable[[dict[str, Any]], bool] | None = None
) -> dict[str, Any]:
    """Poll a job until it ends (or ``until`` holds)."""
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        r = client.get(f"/api/v1/scans/{job_id}")
        assert r.status_code == 200, r.text
        state = r.json()
        if until(state) if until is not None else state["status"] in ("succeeded", "failed", "cancelled"):
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {state.get('status')} after {timeout} s: {state}")


def submit(client: httpx.Client, path: str | Path, **options: Any) -> dict[str, Any]:
    r = client.post("/api/v1/scans", json={"path": str(path), **options})
    assert r.status_code in (200, 202), r.text
    return r.json()


def run_and_report(client: httpx.Client, path: str | Path, **options: Any) -> dict[str, Any]:
    job = submit(client, path, **options)
    state = wait_job(client, job["id"])
    assert state["status"] == "succeeded", state
    r = client.get(f"/api/v1/scans/{job['id']}/report")
    assert r.status_code == 200
    return r.json()


def cli_report(path: str | Path, *args: str) -> dict[str, Any]:
    """The report of ``dscan scan --format json`` on the same data, as a user would run it."""
    cmd = [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between two runs on the same data: all but timings and dates."""
    summary = {k: v for k, v in report["summary"].items() if k != "duration_s"}
    return {
        "summary": summary,
        "findings": report["findings"],
        "labels": report["labels"],
        "statistics": report["statistics"],
        "source": {k: v for k, v in report["source"].items() if k not in ("path", "root")},
        "config": {k: v for k, v in report["config"].items() if k != "confine"},  # the service's data roots
    }


def redis_server_available() -> bool:
    return shutil.which("redis-server") is not None
