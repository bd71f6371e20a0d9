"""Workers killed with SIGKILL, Redis stopped: the service loses nothing, ends every job, answers 503."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from .conftest import (
    REPO,
    SLOW_SHARD_BYTES,
    Service,
    comparable,
    free_port,
    redis_server_available,
    run_and_report,
    submit,
    wait_job,
)

pytestmark = [pytest.mark.service, pytest.mark.slow]

OPTIONS: dict[str, Any] = {"shard_bytes": SLOW_SHARD_BYTES, "num_classes": 4}


def running_shard(svc: Service, job_id: str, skip: set[str], timeout: float = 30.0) -> tuple[str, int]:
    """The first shard (not in ``skip``) seen running, and the pid of the worker process running it."""
    store = svc.store_client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for shard, who in store.hgetall(svc.key("job", job_id, "running")).items():
            if shard not in skip:
                return shard, int(who.split()[1])
        time.sleep(0.002)
    raise AssertionError("no shard started running")


def rerun(svc: Service, job_id: str, shard: str, old_pid: int, timeout: float = 30.0) -> int:
    """The pid of the worker process that took ``shard`` again after ``old_pid`` died."""
    store = svc.store_client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        who = store.hget(svc.key("job", job_id, "running"), shard)
        if who and int(who.split()[1]) != old_pid:
            return int(who.split()[1])
        time.sleep(0.002)
    raise AssertionError(f"shard {shard} was not delivered again")


def test_sigkilled_worker_process_loses_nothing(make_service: Callable[..., Service]) -> None:
    svc = make_service(workers=[1])
    slow = svc.data_root / "slow"
    with svc.client() as client:
        reference = run_and_report(client, slow, **OPTIONS)
        assert reference["summary"]["shards"] >= 4
        job = submit(client, slow, force=True, **OPTIONS)
        first, _ = running_shard(svc, job["id"], skip=set())
        shard, pid = running_shard(svc, job["id"], skip={first})  # a shard mid-scan, not the first
        os.kill(pid, signal.SIGKILL)
        state = wait_job(client, job["id"], timeout=120)
        assert state["status"] == "succeeded", state
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    deliveries = svc.store_client().hgetall(svc.key("job", job["id"], "deliveries"))
    assert deliveries[shard] == "2", deliveries  # the killed shard ran again ...
    assert comparable(report) == comparable(reference)  # ... and the report is the undisturbed one
    assert state["progress"]["items_done"] == reference["summary"]["items_scanned"]


def test_shard_that_kills_its_worker_twice_is_isolated(make_service: Callable[..., Service]) -> None:
    svc = make_service(workers=[1])
    slow = svc.data_root / "slow"
    with svc.client() as client:
        reference = run_and_report(client, slow, **OPTIONS)
        job = submit(client, slow, force=True, **OPTIONS)
        shard, pid = running_shard(svc, job["id"], skip=set())
        os.kill(pid, signal.SIGKILL)
        again = rerun(svc, job["id"], shard, pid)
        os.kill(again, signal.SIGKILL)
        state = wait_job(client, job["id"], timeout=120)
        assert state["status"] == "succeeded", state
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    deliveries = svc.store_client().hgetall(svc.key("job", job["id"], "deliveries"))
    assert deliveries[shard] == "3", deliveries
    assert "isolating it" in svc.log("worker0")
    # The pieces were read in child processes and nothing crashed them: the same report as undisturbed.
    assert comparable(report) == comparable(reference)


def test_worker_node_killed_whole_is_redelivered_elsewhere(make_service: Callable[..., Service]) -> None:
    svc = make_service(workers=[1], env={"DSCAN_VISIBILITY_TIMEOUT_S": "3", "DSCAN_RESTORE_INTERVAL_S": "1"})
    slow = svc.data_root / "slow"
    with svc.client() as client:
        reference = run_and_report(client, slow, **OPTIONS)
        job = submit(client, slow, force=True, **OPTIONS)
        shard, _ = running_shard(svc, job["id"], skip=set())
        node = svc.workers[0]
        os.killpg(node.pid, signal.SIGKILL)  # the main process and its pool: no chance to requeue anything
        node.wait(10)
        svc.start_worker(1)
        state = wait_job(client, job["id"], timeout=120)
        assert state["status"] == "succeeded", state
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    deliveries = svc.store_client().hgetall(svc.key("job", job["id"], "deliveries"))
    assert deliveries[shard] == "2", deliveries
    assert comparable(report) == comparable(reference)


def start_redis(port: int, folder: Path, keep: bool = False) -> subprocess.Popen[bytes]:
    """A private redis-server; ``keep``: an append-only file in ``folder``, so a restart keeps the data."""
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    cmd += ["--appendonly", "yes" if keep else "no"]
    proc = subprocess.Popen([*cmd, "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=0.2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if client.ping():
                client.close()
                return proc
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


@pytest.mark.skipif(not redis_server_available(), reason="needs redis-server on PATH")
def test_redis_stopped_gives_503_then_recovers(make_service: Callable[..., Service]) -> None:
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="dscan-test-redis-"))
    own = start_redis(port, folder)
    try:
        svc = make_service(workers=[1], url=f"redis://127.0.0.1:{port}/0")
        small = svc.data_root / "small"
        with svc.client(timeout=30) as client:
            before = run_and_report(client, small, force=True)
            own.terminate()
            own.wait(10)
            for method, url, body in (
                ("GET", "/api/v1/scans", None),
                ("GET", f"/api/v1/scans/{'a' * 32}", None),
                ("POST", "/api/v1/scans", {"path": str(small)}),
            ):
                started = time.monotonic()
                r = client.request(method, url, json=body)
                elapsed = time.monotonic() - started
                assert r.status_code == 503, (url, r.text)
                assert "unavailable" in r.json()["detail"] and "Traceback" not in r.text
                assert r.headers["retry-after"]
                assert elapsed < 10, f"{method} {url} took {elapsed:.1f} s to answer"
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "does not answer" in ready.json()["detail"]
            assert client.get("/healthz").status_code == 200
            metrics = httpx.get(f"{svc.url}/metrics", timeout=30)
            assert metrics.status_code == 200 and "dscan_redis_up 0.0" in metrics.text
            own = start_redis(port, folder)  # back (empty: this one keeps nothing on disk)
            deadline = time.monotonic() + 90
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "the service did not recover"
                time.sleep(0.5)
            after = run_and_report(client, small, force=True)
            assert comparable(after) == comparable(before)
            assert svc.api is not None and svc.api.poll() is None
    finally:
        own.kill()
        own.wait(10)


@pytest.mark.skipif(not redis_server_available(), reason="needs redis-server on PATH")
def test_a_short_redis_outage_during_a_scan_loses_nothing(make_service: Callable[..., Service]) -> None:
    """Redis stopped for five seconds while shards run, then started again with its data: the job finishes
    with the report of an undisturbed run (a shard that met the outage was dropped, failing the job)."""
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="dscan-test-redis-"))
    own = start_redis(port, folder, keep=True)
    try:
        svc = make_service(workers=[1], url=f"redis://127.0.0.1:{port}/0")
        slow = svc.data_root / "slow"
        with svc.client(timeout=30) as client:
            reference = run_and_report(client, slow, **OPTIONS)
            job = submit(client, slow, force=True, **OPTIONS)
            running_shard(svc, job["id"], skip=set())
            own.terminate()
            own.wait(10)
            time.sleep(5)
            own = start_redis(port, folder, keep=True)
            state = wait_job(client, job["id"], timeout=180)
            assert state["status"] == "succeeded", state
            report = client.get(f"/api/v1/scans/{job['id']}/report").json()
        assert comparable(report) == comparable(reference)
    finally:
        own.kill()
        own.wait(10)


@pytest.mark.skipif(not redis_server_available(), reason="needs redis-server on PATH")
def test_submit_wait_rides_out_a_short_redis_outage(make_service: Callable[..., Service], tmp_path: Path) -> None:
    """Redis restarted (with its data) while ``dscan submit --wait`` polls: the scan goes on and so does the
    gate, which exits with the scan's verdict (1: the data has NaNs), not 2 on the API's 503."""
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="dscan-test-redis-"))
    own = start_redis(port, folder, keep=True)
    try:
        svc = make_service(workers=[1], url=f"redis://127.0.0.1:{port}/0")
        config = tmp_path / "dscan.toml"
        config.write_text(f"shard_bytes = {OPTIONS['shard_bytes']}\nnum_classes = {OPTIONS['num_classes']}\n")
        cmd = [sys.executable, "-m", "scanner_service.cli", "submit", str(svc.data_root / "slow"), "--force"]
        cmd += ["--server", svc.url, "--config", str(config), "--wait", "--timeout", "170", "--format", "json"]
        gate = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with svc.client(timeout=30) as client:
            deadline = time.monotonic() + 30
            while not (jobs := client.get("/api/v1/scans", params={"status": "running"}).json()["items"]):
                assert time.monotonic() < deadline and gate.poll() is None, "the scan did not start"
                time.sleep(0.05)
            running_shard(svc, jobs[0]["id"], skip=set())
            own.terminate()
            own.wait(10)
            time.sleep(5)
            own = start_redis(port, folder, keep=True)
        out, err = gate.communicate(timeout=200)
        assert gate.returncode == 1, err
        assert '"nan-value"' in out and "503" not in err
    finally:
        own.kill()
        own.wait(10)
