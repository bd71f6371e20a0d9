"""What a status-page watcher saw of a scan's progress: a bar that went backwards when a worker process died
mid-shard and the shard was read again from its start, and numbers that kept changing on a scan that had been
cancelled. Real API, real Celery workers, real Redis."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import Service, submit, wait_job
from .test_resilience import running_shard

pytestmark = [pytest.mark.service, pytest.mark.slow]

ONE_SHARD: dict[str, Any] = {"shard_bytes": 1 << 30, "block_bytes": 4 << 10, "force": True}
"""The whole slow file in one shard, read a row at a time: two seconds, its progress written every tenth or so,
so a delivery killed halfway was ahead of the first progress the next one writes."""


def test_progress_never_goes_back_when_a_killed_shard_is_read_again(make_service: Callable[..., Service]) -> None:
    """The new delivery of a shard whose worker died restarted the shard's count at 0, and the job's
    ``bytes_done`` and ``fraction`` fell back with it (a bar at 40% jumped to 3%)."""
    svc = make_service(workers=[1])
    with svc.client() as client:
        job = submit(client, svc.data_root / "slow" / "slow.h5", **ONE_SHARD)
        shard, pid = running_shard(svc, job["id"], skip=set())
        halfway = wait_job(client, job["id"], until=lambda s: s["progress"]["fraction"] >= 0.4)
        assert halfway["status"] == "running", halfway
        os.kill(pid, signal.SIGKILL)
        seen = [halfway]
        while seen[-1]["status"] not in ("succeeded", "failed", "cancelled"):
            seen.append(client.get(f"/api/v1/scans/{job['id']}").json())
            time.sleep(0.005)
    deliveries = svc.store_client().hgetall(svc.key("job", job["id"], "deliveries"))
    assert seen[-1]["status"] == "succeeded" and deliveries[shard] == "2", (seen[-1], deliveries)
    for key in ("fraction", "bytes_done", "items_done"):
        values = [s["progress"][key] for s in seen]
        assert values == sorted(values), (key, values)
    assert seen[-1]["progress"]["fraction"] == 1.0
