"""A whole worker node lost mid-shard (its main process and pool SIGKILLed together): the job carries on on the
node left within a minute, not after the visibility timeout (over an hour by default), with the same report."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from .conftest import Service, comparable, pool_children, run_and_report, submit, wait_job
from .test_resilience import OPTIONS

pytestmark = [pytest.mark.service, pytest.mark.slow]

RECOVERY_BOUND_S = 60.0
"""What users expect of a job whose node was lost; the default visibility timeout is 3960 s."""


def node_of(svc: Service, pid: int) -> subprocess.Popen[bytes] | None:
    """The worker node (a ``celery worker`` main process) that ``pid`` is or is a pool process of."""
    for node in svc.workers:
        if node.poll() is None and (pid == node.pid or pid in pool_children(node.pid)):
            return node
    return None


def stop_a_node_mid_shard(svc: Service, job_id: str, timeout: float = 30.0) -> tuple[str, subprocess.Popen[bytes]]:
    """Freeze (SIGSTOP) the node of a shard seen running, and keep it frozen if the shard is still unfinished
    then (else let it go on and look again): the shard and the node, which holds it mid-scan for sure."""
    store = svc.store_client()
    running, partials = svc.key("job", job_id, "running"), svc.key("job", job_id, "partials")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for shard, who in store.hgetall(running).items():
            node = node_of(svc, int(who.split()[1]))
            if node is None:
                continue
            os.killpg(node.pid, signal.SIGSTOP)
            if store.hget(running, shard) == who and not store.hexists(partials, shard):
                return shard, node
            os.killpg(node.pid, signal.SIGCONT)
        time.sleep(0.002)
    raise AssertionError("no shard was caught running")


def test_a_lost_worker_node_s_job_carries_on_on_the_node_left(make_service: Callable[..., Service]) -> None:
    svc = make_service(workers=[1, 1])  # two nodes; default visibility timeout and node TTL
    slow = svc.data_root / "slow"
    with svc.client() as client:
        reference = run_and_report(client, slow, **OPTIONS)
        assert reference["summary"]["shards"] >= 4
        job = submit(client, slow, force=True, **OPTIONS)
        shard, node = stop_a_node_mid_shard(svc, job["id"])
        os.killpg(node.pid, signal.SIGKILL)  # main process and pool: nothing is requeued, nothing acknowledged
        node.wait(10)
        lost = time.monotonic()
        state = wait_job(client, job["id"], timeout=RECOVERY_BOUND_S)
        recovered_s = time.monotonic() - lost
        assert state["status"] == "succeeded", state
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    survivor = svc.workers.index(next(w for w in svc.workers if w is not node))
    store = svc.store_client()
    deliveries = store.hgetall(svc.key("job", job["id"], "deliveries"))
    assert deliveries[shard] == "2", deliveries  # the lost node's shard ran again on the node left ...
    assert comparable(report) == comparable(reference)  # ... and the report is the undisturbed one
    assert state["progress"]["items_done"] == reference["summary"]["items_scanned"]
    assert state["progress"]["shards_done"] == state["progress"]["shards_total"] == reference["summary"]["shards"]
    log = svc.log(f"worker{survivor}")
    assert "is lost" in log and "dscan.shard" in log, log[-3000:]
    print(f"job done {recovered_s:.1f} s after its node was lost")
