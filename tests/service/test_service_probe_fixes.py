"""What a pipeline and a status-page watcher met: an LMDB scan whose progress ended short of its total, a
planned scan waiting behind another job's shards (shown running, its wait counted as its duration), the
message of ``dscan submit --wait`` on a cancelled scan. Real API, real Celery workers, real Redis."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import lmdb
import numpy as np
import pytest
from PIL import Image

from .conftest import REPO, Service, cli_report, comparable, submit, wait_job

pytestmark = [pytest.mark.service]


def write_lmdb(folder: Path, n: int = 20, truncated: int = 7) -> Path:
    """An LMDB of small PNGs, one of them cut short."""
    rng = np.random.default_rng(5)
    env = lmdb.open(str(folder), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i in range(n):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(buf, "PNG")
            value = buf.getvalue()
            txn.put(f"{i:08d}".encode(), value[:30] if i == truncated else value)
    env.close()
    return folder


def test_a_finished_lmdb_scan_shows_its_progress_at_the_total(service: Service) -> None:
    """The plan's byte total of an LMDB is its file size (pages, free space): the job ended at "16 KB of
    37 KB" on the status page, although it had scanned everything."""
    db = write_lmdb(service.data_root / f"lmdb-{os.getpid()}-{time.monotonic_ns()}")
    with service.client() as client:
        job = submit(client, db)
        state = wait_job(client, job["id"])
        assert state["status"] == "succeeded", state
        progress = state["progress"]
        assert progress["items_done"] == progress["items_total"] == 20, progress
        assert progress["bytes_done"] == progress["bytes_total"] > 0, progress
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    assert report["summary"]["items_scanned"] == progress["items_done"]
    assert report["summary"]["bytes_scanned"] == progress["bytes_done"]
    assert comparable(report) == comparable(cli_report(db))


def queue_behind_a_long_scan(svc: Service, client: httpx.Client) -> tuple[str, str]:
    """A long scan (128 shards) and a short one submitted right after it: ids of both."""
    first = submit(client, svc.data_root / "slow" / "slow.h5", shard_bytes=1 << 20, force=True)
    second = submit(client, svc.data_root / "small" / "s1.h5", force=True)
    return first["id"], second["id"]


def while_waiting(client: httpx.Client, first: str, second: str) -> list[dict[str, Any]]:
    """The states of ``second``, planned, while ``first`` has more than half of its shards to go (with one
    worker process, ``second``'s shard cannot start meanwhile)."""

    def planned(state: dict[str, Any]) -> bool:
        return state["progress"]["shards_total"] > 0 or state["status"] not in ("queued", "running")

    wait_job(client, second, timeout=120, until=planned)
    seen: list[dict[str, Any]] = []
    while True:
        ahead = client.get(f"/api/v1/scans/{first}").json()["progress"]
        if ahead["shards_done"] >= ahead["shards_total"] // 2:
            break  # its last shards may run beside ours from here on
        seen.append(client.get(f"/api/v1/scans/{second}").json())
        time.sleep(0.05)
    assert seen, "the first scan ended before the second was planned: make it longer"
    return seen


def test_a_planned_scan_waiting_behind_another_is_queued(make_service: Callable[..., Service]) -> None:
    """One worker process, a long scan first: the second scan, planned, showed "running" with 0 items for as
    long as the first one's shards ran before its own."""
    svc = make_service(workers=[1])
    with svc.client() as client:
        first, second = queue_behind_a_long_scan(svc, client)
        seen = while_waiting(client, first, second)
        assert [s["status"] for s in seen] == ["queued"] * len(seen), [(s["status"], s["progress"]) for s in seen]
        assert all(s["progress"]["items_done"] == 0 for s in seen)
        done = wait_job(client, second, timeout=120)
        assert done["status"] == "succeeded" and done["progress"]["items_done"] == done["progress"]["items_total"]


def test_the_wait_behind_another_scan_is_no_part_of_its_duration(make_service: Callable[..., Service]) -> None:
    """``duration_s`` of the job and of its report counted the time its shards waited for the worker."""
    svc = make_service(workers=[1])
    with svc.client() as client:
        first, second = queue_behind_a_long_scan(svc, client)
        seen = while_waiting(client, first, second)
        assert seen[-1]["duration_s"] is not None and seen[-1]["duration_s"] < 1.0, seen[-1]  # its clock stopped
        done = wait_job(client, second, timeout=120)
        ahead = wait_job(client, first, timeout=120)
        assert done["status"] == ahead["status"] == "succeeded"
        assert done["duration_s"] < ahead["duration_s"] / 2, (done["duration_s"], ahead["duration_s"])
        report = client.get(f"/api/v1/scans/{second}/report").json()
        assert report["summary"]["duration_s"] <= done["duration_s"] + 0.01


def test_submit_wait_of_a_cancelled_scan_says_so_once(make_service: Callable[..., Service]) -> None:
    """``dscan submit --wait`` of a scan cancelled by someone else exits 2 with "scan ID cancelled" (it said
    "cancelled: cancelled")."""
    svc = make_service(workers=[1])
    with svc.client() as client:
        first = submit(client, svc.data_root / "slow" / "slow.h5", shard_bytes=1 << 20, force=True)
        target = str(svc.data_root / "small" / "s2.h5")
        cmd = [sys.executable, "-m", "scanner_service.cli", "submit", target, "--server", svc.url, "--wait", "--force"]
        gate = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        try:
            deadline = time.monotonic() + 60
            job: dict[str, Any] | None = None
            while job is None and time.monotonic() < deadline:
                items = client.get("/api/v1/scans", params={"limit": 5}).json()["items"]
                job = next((j for j in items if j["path"] == target), None)
                time.sleep(0.05)
            assert job is not None, "the CLI's scan did not appear"
            assert client.delete(f"/api/v1/scans/{job['id']}").status_code == 202
            _, err = gate.communicate(timeout=60)
        finally:
            if gate.poll() is None:
                gate.kill()
                gate.wait()
        assert gate.returncode == 2, err
        assert f"scan {job['id']} cancelled" in err and "cancelled: cancelled" not in err, err
        client.delete(f"/api/v1/scans/{first['id']}")


def test_submit_wait_that_times_out_says_the_scan_goes_on_and_how_to_cancel_it(
    make_service: Callable[..., Service],
) -> None:
    """``--timeout`` gives up waiting, not the scan: the message says so, with the job's address and how to
    cancel it (it said only "did not end within 0.5 s", and the scan went on using the shared workers)."""
    svc = make_service(workers=[1])
    target = str(svc.data_root / "slow" / "slow.h5")
    cmd = [sys.executable, "-m", "scanner_service.cli", "submit", target, "--server", svc.url, "--wait"]
    gate = subprocess.run(
        [*cmd, "--timeout", "0.5", "--force"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert gate.returncode == 2, gate.stderr
    assert "did not end within 0.5 s" in gate.stderr and "it goes on on the server" in gate.stderr, gate.stderr
    job_url = gate.stderr.split("its status is at ", 1)[1].split(",", 1)[0]
    assert job_url.startswith(f"{svc.url}/api/v1/scans/") and "HTTP DELETE" in gate.stderr
    with svc.client() as client:
        assert client.get(job_url).json()["status"] in ("queued", "running")
        assert client.delete(job_url).status_code == 202
