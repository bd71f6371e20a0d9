"""The task bodies called in this process against real Redis: idempotence, isolation, the status machine."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from scanner_service import engine
from scanner_service.config import ScanConfig
from scanner_service.partial import Partial
from workers.settings import SCAN_RESULTS_KEPT_S, Settings, get_settings
from workers.store import JobStatus, Store

from .conftest import delete_prefix

pytestmark = [pytest.mark.service]


@pytest.fixture
def tasks(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    prefix = f"dscantest-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("DSCAN_REDIS_URL", redis_url)
    monkeypatch.setenv("DSCAN_DATA_ROOTS", str(tmp_path))
    monkeypatch.setenv("DSCAN_KEY_PREFIX", prefix)
    monkeypatch.setenv("DSCAN_QUEUE", prefix)
    get_settings.cache_clear()
    from workers import tasks as module

    module.store.cache_clear()
    yield module
    module.store().close()
    module.store.cache_clear()
    get_settings.cache_clear()
    delete_prefix(redis_url, prefix)


def running_job(st: Store, target: Path, options: dict[str, Any]) -> str:
    job_id = uuid.uuid4().hex
    st.create_job(job_id, path=str(target), target=str(target), options=options, callback_url=None, digest=None)
    moved, _ = st.transition(job_id, JobStatus.RUNNING, [JobStatus.QUEUED], started=time.time())
    assert moved
    st.set_fields(job_id, kind="hdf5")
    return job_id


def queued_job(st: Store, tmp_path: Path) -> str:
    """A job just created (queued, not planned) on a small HDF5 file."""
    path = tmp_path / "small.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("data", data=np.zeros((10, 4), np.float32))
    job_id = uuid.uuid4().hex
    st.create_job(job_id, path=str(path), target=str(path), options={}, callback_url=None, digest=None)
    return job_id


def test_an_indivisible_shard_that_killed_its_worker_twice_becomes_a_finding(tasks: Any, tmp_path: Path) -> None:
    path = tmp_path / "one-row.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("data", data=np.ones((1, 40_000), np.float32))  # one row above the shard size
    options = {"shard_bytes": 1 << 16}
    planned = engine.plan(path, ScanConfig(**options))
    (shard,) = planned.shards
    assert engine.split_shard("hdf5", str(path), shard, ScanConfig(**options)) == []
    st = tasks.store()
    job_id = running_job(st, path, options)
    st.count_delivery(job_id, "0")
    st.count_delivery(job_id, "0")  # two deliveries whose worker died
    assert tasks.scan_shard(job_id, shard.model_dump(mode="json")) == "0"
    partial = Partial.model_validate_json(st.get_partial(job_id, "0") or "")
    (location,) = partial.findings["S002"].locations
    assert location.path == "one-row.h5" and location.dataset == "/data"
    assert location.detail == "row 0: the worker process died 2 times while reading it"
    assert st.redis.hget(st.job_key(job_id), "shards_done") == "1"
    # Delivered once more (the acknowledgement was lost): the stored partial stands, nothing is redone.
    assert tasks.scan_shard(job_id, shard.model_dump(mode="json")) == "0"
    assert st.deliveries(job_id) == {"0": 3}
    assert st.redis.hget(st.job_key(job_id), "shards_done") == "1"


def test_an_isolated_shard_gives_the_partial_of_a_normal_read(tasks: Any, tmp_path: Path) -> None:
    path = tmp_path / "rows.h5"
    data = np.random.default_rng(1).normal(size=(2000, 64)).astype(np.float32)
    data[1234, 5] = np.nan
    with h5py.File(path, "w") as fh:
        fh.create_dataset("data", data=data, chunks=(100, 64))
    config = ScanConfig()
    (shard,) = engine.plan(path, config).shards
    normal = engine.scan_shard("hdf5", str(path), shard, config)
    st = tasks.store()
    job_id = running_job(st, path, {})
    for _ in range(st.settings.max_deliveries):
        st.count_delivery(job_id, "0")
    tasks.scan_shard(job_id, shard.model_dump(mode="json"))
    isolated = Partial.model_validate_json(st.get_partial(job_id, "0") or "")
    assert isolated.findings == normal.findings and isolated.findings["V001"].locations[0].index == 1234
    assert (isolated.items, isolated.bytes, isolated.shards) == (normal.items, normal.bytes, 1)
    assert isolated.stats["rows.h5::/data"].count == normal.stats["rows.h5::/data"].count


def test_a_cancelled_job_never_gets_a_report(tasks: Any, tmp_path: Path) -> None:
    path = tmp_path / "small.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("data", data=np.zeros((10, 4), np.float32))
    st: Store = tasks.store()
    job_id = running_job(st, path, {})
    planned = engine.plan(path, ScanConfig())
    plan = {"source": planned.source.model_dump(mode="json"), "shards": ["0"]}
    st.save_plan(job_id, plan, planned.partial.model_dump_json(), {"shards_total": 1})
    tasks.scan_shard(job_id, planned.shards[0].model_dump(mode="json"))
    moved, previous = st.cancel(job_id)
    assert moved and previous is JobStatus.RUNNING
    tasks.merge_scan(["0"], job_id)
    assert st.status(job_id) is JobStatus.CANCELLED
    assert st.get_report(job_id) is None and st.load_plan(job_id) is None
    assert st.transition(job_id, JobStatus.SUCCEEDED, [JobStatus.RUNNING]) == (False, JobStatus.CANCELLED)
    assert st.cancel(job_id) == (False, JobStatus.CANCELLED)
    ids = {job.id for job in st.list_jobs(JobStatus.CANCELLED)[0]}
    assert job_id in ids and job_id not in {job.id for job in st.list_jobs(JobStatus.RUNNING)[0]}


def test_a_time_limit_while_queueing_the_shards_fails_the_job(
    tasks: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soft time limit can strike while the plan task queues its shard tasks: the job must end failed,
    with a reason (it stayed "running" for good, and deduplication kept handing it out)."""
    from celery.exceptions import SoftTimeLimitExceeded

    st: Store = tasks.store()
    job_id = queued_job(st, tmp_path)

    def interrupted(*_args: Any) -> None:
        raise SoftTimeLimitExceeded()  # what Celery raises wherever the task is when the limit passes

    monkeypatch.setattr(tasks, "dispatch", interrupted)
    tasks.plan_scan(job_id)
    job = st.get_job(job_id)
    assert job is not None and job.status is JobStatus.FAILED
    assert job.error is not None and "time limit" in job.error


def test_a_scan_cancelled_while_it_is_planned_queues_no_shard(
    tasks: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DELETE that lands while the plan task walks the dataset: the plan task went on to record the plan's
    totals on the cancelled job (the status page showed "0 of 131,072 items" on it) and to queue every shard
    task of it, each then waiting in the queue before other scans' shards only to return at once."""
    st: Store = tasks.store()
    job_id = queued_job(st, tmp_path)
    plan = engine.plan

    def cancelled_meanwhile(*args: Any, **kwargs: Any) -> Any:
        assert st.cancel(job_id)[0]  # what the API's DELETE does, at this moment
        return plan(*args, **kwargs)

    monkeypatch.setattr(tasks.engine, "plan", cancelled_meanwhile)
    tasks.plan_scan(job_id)
    job = st.get_job(job_id)
    assert job is not None and job.status is JobStatus.CANCELLED
    assert job.kind is None and job.progress.shards_total == job.progress.items_total == 0, job
    assert st.redis.hget(st.job_key(job_id), "dispatched") is None and st.load_plan(job_id) is None


def test_progress_of_a_redelivered_shard_is_not_counted_twice(tasks: Any, tmp_path: Path) -> None:
    st: Store = tasks.store()
    job_id = running_job(st, tmp_path, {})
    st.progress(job_id, "3", 100, 4000)
    st.progress(job_id, "3", 250, 9000)
    st.progress(job_id, "3", 40, 1000)  # a new delivery starts over: the job's progress does not go back
    job = st.get_job(job_id)
    assert job is not None and (job.progress.items_done, job.progress.bytes_done) == (250, 9000)
    st.progress(job_id, "3", 260, 9500)  # ... and moves on once the new delivery passes the old one
    job = st.get_job(job_id)
    assert job is not None and (job.progress.items_done, job.progress.bytes_done) == (260, 9500)
    assert st.complete_shard(job_id, "3", Partial().model_dump_json(), 300, 12000)
    assert not st.complete_shard(job_id, "3", Partial().model_dump_json(), 300, 12000)
    st.progress(job_id, "3", 5, 5)  # a late duplicate after completion changes nothing
    job = st.get_job(job_id)
    assert job is not None and (job.progress.items_done, job.progress.shards_done) == (300, 1)


def test_a_cancelled_job_keeps_the_progress_it_was_cancelled_at(tasks: Any, tmp_path: Path) -> None:
    """Shards still reading when a scan is cancelled stop at their next block, and wrote their progress and
    partials on the way: the cancelled scan's numbers kept moving on the status page (61 of 257 shards, then
    62), against "ended jobs never change again"."""
    st: Store = tasks.store()
    job_id = running_job(st, tmp_path, {})
    st.progress(job_id, "0", 10, 400)
    assert st.cancel(job_id)[0]
    before = st.get_job(job_id)
    st.progress(job_id, "0", 20, 800)
    st.progress(job_id, "1", 5, 200)
    assert not st.complete_shard(job_id, "1", Partial().model_dump_json(), 30, 1200)
    after = st.get_job(job_id)
    assert before is not None and after is not None
    assert after.progress == before.progress and after.progress.items_done == 10, after.progress
    assert st.get_partial(job_id, "1") is None


def test_settings_refuse_placeholders_and_missing_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    for name in ("DSCAN_REDIS_URL", "DSCAN_DATA_ROOTS", "DSCAN_API_TOKENS"):
        monkeypatch.delenv(name, raising=False)

    base = {"redis_url": "redis://127.0.0.1:6379/15", "data_roots": str(tmp_path)}
    assert Settings(**base).data_roots == [tmp_path.resolve()]  # type: ignore[arg-type]
    assert Settings(**{**base, "data_roots": f"{tmp_path}:{tmp_path}"}).data_roots == [tmp_path.resolve()] * 2  # type: ignore[arg-type]
    for bad in (
        {"api_tokens": "changeme"},
        {"api_tokens": "short"},
        {"data_roots": "relative/path"},
        {"data_roots": str(tmp_path / "missing")},
        {"redis_url": "http://example.com"},
    ):
        with pytest.raises(ValidationError):
            Settings(**{**base, **bad})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="redis_url"):
        Settings(data_roots=str(tmp_path))  # type: ignore[call-arg,arg-type]
    conf = Settings(**base).celery_conf()  # type: ignore[arg-type]
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"] and conf["worker_prefetch_multiplier"] == 1
    assert conf["task_serializer"] == "json" and conf["accept_content"] == ["json"]
    assert json.dumps(conf)  # plain data
    # a chord's count of shards lives as long as Celery's results: with the retention of reports (60 s here), a
    # scan still queued or running after it was never merged (running 100% forever)
    short = Settings(**base, retention_s=60).celery_conf()  # type: ignore[arg-type]
    assert short["result_expires"] == SCAN_RESULTS_KEPT_S == 30 * 24 * 3600
    assert Settings(**base, retention_s=90 * 86400).celery_conf()["result_expires"] == 90 * 86400  # type: ignore[arg-type]


def test_shards_queue_behind_plans_and_merges(tasks: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan whose shards were done waited at "running 100%" for the shards of every scan queued after it,
    its merge at the back of one first-in first-out queue. Shards go at a lower priority: on Redis a worker
    takes every task of priority 0 (plans, merges) before them."""
    from workers.app import app

    captured: list[Any] = []
    monkeypatch.setattr(tasks, "chord", lambda header: captured.extend(header) or (lambda callback: None))
    st = tasks.store()
    job_id = queued_job(st, tmp_path)
    planned = engine.plan(tmp_path / "small.h5", ScanConfig(shard_bytes=64))
    assert len(planned.shards) > 1
    tasks.dispatch(st, job_id, planned)
    assert [sig.options.get("priority") for sig in captured] == [tasks.SHARD_PRIORITY] * len(planned.shards)
    # and the broker, as configured, hands out priority 0 first whatever was queued before it
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue(f"{get_settings().queue}-order")
        try:
            queue.put({"task": "shard"}, priority=tasks.SHARD_PRIORITY)
            queue.put({"task": "merge"})
            assert [queue.get(timeout=5).payload["task"] for _ in range(2)] == ["merge", "shard"]
        finally:
            queue.clear()
            queue.close()


def test_job_counts_leave_out_jobs_whose_records_expired(tasks: Any, tmp_path: Path) -> None:
    """``dscan_jobs{status}`` counted jobs whose records had expired until someone listed the scans."""
    from api.metrics import StoreCollector

    st = tasks.store()
    job_id = queued_job(st, tmp_path)
    old = time.time() - st.retention - 100
    st.redis.zadd(st.index_key(), {job_id: old})  # created long ago
    st.redis.zadd(st.index_key(JobStatus.QUEUED), {job_id: old})
    st.redis.delete(st.job_key(job_id))  # and its record expired since

    def queued() -> float:
        jobs = next(m for m in StoreCollector(st).collect() if m.name == "dscan_jobs")
        return next(s.value for s in jobs.samples if s.labels["status"] == "queued")

    assert queued() == 0


def test_a_forced_scan_answers_its_request_only_once_it_succeeds(tasks: Any, tmp_path: Path) -> None:
    """The same request on unchanged data finds the scan that answered it: a forced re-scan took its place at
    once, so when it was cancelled (or failed) the earlier good scan was no longer found and a new one ran."""
    st = tasks.store()
    job: dict[str, Any] = {"path": str(tmp_path), "target": str(tmp_path), "options": {}, "callback_url": None}
    first = uuid.uuid4().hex
    st.create_job(first, digest="d1", **job)
    st.record_linked(first, {})  # it read no file outside the dataset
    assert tasks.end(st, first, JobStatus.SUCCEEDED)
    forced = uuid.uuid4().hex
    st.create_job(forced, digest="d1", force=True, **job)
    found = st.find_duplicate("d1")
    assert found is not None and found.id == first  # while it runs, the earlier scan still answers
    st.cancel(forced)
    found = st.find_duplicate("d1")
    assert found is not None and found.id == first
    again = uuid.uuid4().hex
    st.create_job(again, digest="d1", force=True, **job)
    st.record_linked(again, {})
    assert tasks.end(st, again, JobStatus.SUCCEEDED)
    found = st.find_duplicate("d1")
    assert found is not None and found.id == again  # the newest good scan answers from now on
    lone = uuid.uuid4().hex
    st.create_job(lone, digest="d2", force=True, **job)  # forced with no earlier scan: it holds the request
    found = st.find_duplicate("d2")
    assert found is not None and found.id == lone
