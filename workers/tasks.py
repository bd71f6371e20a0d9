"""The tasks: plan a job, scan its shards, merge them. They call the core and keep state in the store.

::

    plan(job) ──▶ chord([shard(job, s) for s in shards]) ──▶ merge(job)      (on a failed chord: failed(job))
                                                                          └──▶ callback(job) when it ends

A planned job is queued again until a worker takes its first shard (its shards may wait behind other jobs'),
and that wait is no part of its duration.

Tasks take ids and JSON and never wait for other tasks. A shard task is idempotent per (job, shard): its
partial is stored in Redis once, and a delivery that finds it there returns at once. Late acknowledgement with
``task_reject_on_worker_lost`` redelivers the shard of a worker that died; each delivery is counted, and a
shard delivered more than ``DSCAN_MAX_DELIVERIES`` times (it killed its worker each time) is split by the core
and its pieces read in child processes, down to the indivisible part that kills its reader, which becomes a
finding. So the job always ends.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
from celery import chord
from celery.exceptions import SoftTimeLimitExceeded

from scanner_service import engine
from scanner_service.config import ScanConfig
from scanner_service.errors import DscanError, ScanCancelled
from scanner_service.linked_files import linked_files
from scanner_service.partial import Partial, merge
from scanner_service.render import render
from scanner_service.report import build_report
from scanner_service.sources import detect_kind
from scanner_service.sources.base import Plan, Shard, SourceInfo
from scanner_service.sources.walk import fence
from scanner_service.text import dump_json

from .app import app
from .logs import job_context
from .settings import get_settings
from .store import ACTIVE, PLAN_KEY, UNAVAILABLE, JobRecord, JobStatus, Store, TaskName

log = logging.getLogger("dscan.worker")

RETRY: dict[str, Any] = {"autoretry_for": UNAVAILABLE, "retry_backoff": 1, "retry_backoff_max": 30, "max_retries": 8}
"""Redis unreachable inside a task: try again later (the job's state is all in Redis)."""

REDIS_PATIENCE_S = 120.0
"""How long a task step waits for an unreachable Redis to come back. A retry through Celery is no help in
a short outage: it needs the broker, which is that same Redis, and a task that cannot be re-queued is
dropped, failing its job."""

SHARD_PRIORITY = 6
"""The queue priority of shard tasks. On Redis, a worker takes priority 0 first (kombu keeps a list per
priority step, 0, 3, 6, 9), where plan and merge tasks go: a scan whose shards are done is merged at once,
not after the shards of every scan queued since (it stood at "running 100%" meanwhile)."""

T = TypeVar("T")


def patiently(step: Callable[[], T]) -> T:
    """``step()``, run again (after a pause growing to 5 s) while Redis cannot be reached, for at most
    ``REDIS_PATIENCE_S``; then the error goes to Celery's retry."""
    deadline = time.monotonic() + REDIS_PATIENCE_S
    pause = 0.25
    while True:
        try:
            return step()
        except UNAVAILABLE:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("Redis cannot be reached: waiting for it")
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


@functools.cache
def store() -> Store:
    """This process's store (created after the fork of each worker process)."""
    return Store(get_settings())


def who() -> str:
    return f"{socket.gethostname()} {os.getpid()}"


class Tracker:
    """Progress and cancellation of one shard, as the engine reports them, written to the job record."""

    def __init__(self, st: Store, job_id: str, shard: str) -> None:
        self.store, self.job_id, self.shard = st, job_id, shard
        self.items = self.bytes = 0
        self.last = 0.0

    def advance(self, items: int, nbytes: int) -> None:
        self.items += items
        self.bytes += nbytes
        now = time.monotonic()
        if now - self.last >= 0.2:
            self.last = now
            with contextlib.suppress(*UNAVAILABLE):  # progress is a display: the scan goes on without Redis
                self.store.progress(self.job_id, self.shard, max(0, self.items), max(0, self.bytes))

    def cancelled(self) -> bool:
        try:
            return self.store.is_cancelled(self.job_id)
        except UNAVAILABLE:
            return False  # asked again in a moment


# -- planning ---------------------------------------------------------------------------------------


@app.task(name=TaskName.PLAN.value, **RETRY)
def plan_scan(job_id: str) -> None:
    """Plan the job's dataset into shards and start the chord of shard tasks."""
    with job_context(job_id):
        st = store()
        job = st.get_job(job_id)
        if job is None or job.status.ended:
            log.info("job is %s: nothing to plan", job.status.value if job else "gone")
            return
        if st.redis.hget(st.job_key(job_id), "dispatched"):
            log.info("shards were dispatched by an earlier delivery")
            return
        moved, previous = st.transition(job_id, JobStatus.RUNNING, [JobStatus.QUEUED], started=time.time())
        if not moved and previous is not JobStatus.RUNNING:
            return
        config = ScanConfig(**job.options)
        log.info("planning %s", job.target)
        try:
            kind = detect_kind(Path(job.target).absolute(), fence(config.confine))  # once, for both
            record_linked(st, job, kind)
            planned = engine.plan(job.target, config, kind)
        except DscanError as exc:
            end(st, job_id, JobStatus.FAILED, error=str(exc))
            return
        except SoftTimeLimitExceeded:
            end(st, job_id, JobStatus.FAILED, error="planning took longer than the task time limit")
            return
        except UNAVAILABLE:
            raise
        except Exception as exc:
            log.exception("planning failed")
            end(st, job_id, JobStatus.FAILED, error=f"planning failed: {type(exc).__name__}: {exc}")
            return
        if st.status(job_id) is not JobStatus.RUNNING:  # cancelled while planning: queue nothing, record nothing
            log.info("job was cancelled while it was planned: its shards are not queued")
            st.drop_work(job_id)
            return
        try:
            dispatch(st, job_id, planned)
        except SoftTimeLimitExceeded:  # some shards may be queued: they see the job ended and do nothing
            error = "planning took longer than the task time limit (while queueing the shard tasks)"
            end(st, job_id, JobStatus.FAILED, error=error)


def record_linked(st: Store, job: JobRecord, kind: str) -> None:
    """Record the files outside the dataset that the scan reads data from (virtual dataset sources, external
    raw data files, external link targets), before anything is read: a request may reuse this job only while
    they stay as found here (``JobRecord.reusable``). ``kind``: the dataset's, detected already."""
    files = linked_files(Path(job.target), ScanConfig(**job.options), kind)
    if files is None:
        log.info("the files this dataset reads data from cannot be told: its report will not be reused")
    patiently(lambda: st.record_linked(job.id, files))


def dispatch(st: Store, job_id: str, planned: Plan) -> None:
    """Store the plan, then queue the chord of shard tasks (or the merge alone, for a plan without shards)."""
    source, shards = planned.source, planned.shards
    st.set_fields(job_id, kind=source.kind, planned=time.time())
    plan = {"source": source.model_dump(mode="json"), "shards": [str(s.id) for s in shards]}
    totals = {"shards_total": len(shards), "items_total": source.items, "bytes_total": source.bytes}
    st.save_plan(job_id, plan, dump_json(planned.partial), totals)
    log.info("planned %d shards, %d items, %d bytes", len(shards), source.items, source.bytes)
    if shards:
        # The shards may wait behind other jobs' shards: the job is queued again until a worker takes one.
        st.transition(job_id, JobStatus.QUEUED, [JobStatus.RUNNING], paused=time.time())
        header = [scan_shard.s(job_id, s.model_dump(mode="json")).set(priority=SHARD_PRIORITY) for s in shards]
        chord(header)(merge_scan.s(job_id).on_error(scan_failed.s(job_id=job_id)))
    else:
        merge_scan.delay([], job_id)
    st.set_fields(job_id, dispatched=1)


# -- shards -----------------------------------------------------------------------------------------


def resume(st: Store, job: JobRecord) -> bool:
    """A worker took the first shard of a planned job: it runs again, and the time its shards waited is
    left out of its duration. False when the job is no longer queued or running (cancelled)."""
    waited = job.waited_s + (time.time() - job.paused if job.paused is not None else 0.0)
    moved, previous = st.transition(job.id, JobStatus.RUNNING, [JobStatus.QUEUED], paused="", waited_s=waited)
    return moved or previous is JobStatus.RUNNING


def isolate(kind: str, path: str, shard: Shard, config: ScanConfig, tracker: Tracker, reason: str) -> Partial:
    """Read ``shard`` in pieces, each in a child process: a piece that kills its reader is split again by
    the core's pool, down to the part that does it, which becomes a finding. The worker itself survives."""
    from scanner_service.pool import ShardPool

    pieces = engine.split_shard(kind, path, shard, config)
    if not pieces:
        return engine.crash_partial(kind, path, shard, config, reason)
    with children_allowed():
        pool = ShardPool(kind, path, config, 1)
        merged = merge(pool.run(pieces, tracker.advance, tracker.cancelled))
    merged.shards = 1  # still one shard of the plan, however many pieces it was read in
    return merged


@contextlib.contextmanager
def children_allowed() -> Iterator[None]:
    """Celery's pool processes are marked daemonic, and multiprocessing refuses children to daemonic
    processes. The pool's readers are joined or killed before this returns, so lift the mark meanwhile."""
    current = multiprocessing.current_process()
    config: dict[str, Any] = current._config  # type: ignore[attr-defined]
    daemon = config.get("daemon")
    config["daemon"] = False
    try:
        yield
    finally:
        if daemon is not None:
            config["daemon"] = daemon


@app.task(name=TaskName.SHARD.value, **RETRY)
def scan_shard(job_id: str, shard_doc: dict[str, Any]) -> str:
    """Scan one shard into a partial stored under the job. Returns the shard id."""
    shard = Shard.model_validate(shard_doc)
    key = str(shard.id)
    with job_context(job_id):
        st = store()
        if patiently(lambda: st.get_partial(job_id, key)) is not None:
            log.info("shard %s was done by an earlier delivery", key)
            return key
        job = patiently(lambda: st.get_job(job_id))
        if job is None or job.status not in ACTIVE or job.kind is None:
            return key
        if job.status is JobStatus.QUEUED and not patiently(lambda: resume(st, job)):
            return key  # cancelled meanwhile
        deliveries = patiently(lambda: st.count_delivery(job_id, key))
        patiently(lambda: st.mark_running(job_id, key, who()))
        config = ScanConfig(**job.options)
        tracker = Tracker(st, job_id, key)
        limit = st.settings.max_deliveries
        try:
            if deliveries > limit:
                log.warning(
                    "shard %s was delivered %d times: its reader kills the worker; isolating it", key, deliveries
                )
                reason = f"the worker process died {deliveries - 1} times while reading it"
                partial = isolate(job.kind, job.target, shard, config, tracker, reason)
            else:
                partial = engine.scan_shard(
                    job.kind, job.target, shard, config, progress=tracker.advance, cancelled=tracker.cancelled
                )
        except ScanCancelled:
            log.info("shard %s stopped: job cancelled", key)
            return key
        except (SoftTimeLimitExceeded, *UNAVAILABLE):
            raise
        except Exception as exc:
            log.exception("shard %s raised; isolating it", key)
            try:
                partial = isolate(job.kind, job.target, shard, config, tracker, f"the reader raised {exc}")
            except ScanCancelled:
                log.info("shard %s stopped: job cancelled", key)
                return key
        finally:
            with contextlib.suppress(*UNAVAILABLE):  # (a shard record's entry expires with the job's work)
                patiently(lambda: st.clear_running(job_id, key))
        done = dump_json(partial)
        patiently(lambda: st.complete_shard(job_id, key, done, partial.items, partial.bytes))
        log.info("shard %s done: %d items, %d bytes", key, partial.items, partial.bytes)
        return key


# -- the end ----------------------------------------------------------------------------------------


@app.task(name=TaskName.MERGE.value, **RETRY)
def merge_scan(results: list[str], job_id: str) -> None:
    """Merge the stored partials, build and store the report, end the job."""
    del results  # the partials are read from the store, in shard order
    with job_context(job_id):
        patiently(lambda: _merge(store(), job_id))


def _merge(st: Store, job_id: str) -> None:
    """Merge the stored partials, build and store the report, end the job (run again as a whole when
    Redis went away meanwhile: the job ends once)."""
    job = st.get_job(job_id)
    if job is None:
        return
    if job.status is not JobStatus.RUNNING:
        if job.status is JobStatus.CANCELLED:
            st.drop_work(job_id)
        return
    plan = st.load_plan(job_id)
    partials = st.partials(job_id)
    order = [PLAN_KEY, *(plan["shards"] if plan else [])]
    missing = [k for k in order if k not in partials]
    if plan is None or missing:
        if st.is_cancelled(job_id):
            return
        end(st, job_id, JobStatus.FAILED, error=f"internal error: results of shards {missing} are missing")
        return
    config = ScanConfig(**job.options)
    merged = merge(Partial.model_validate_json(partials[k]) for k in order)
    source = SourceInfo.model_validate(plan["source"])
    duration = job.duration_s if job.duration_s is not None else time.time() - job.created  # (without waits)
    report = build_report(source, merged, config, duration)
    if not report.checks_run():  # a pass that says nothing about the data: no verdict, as `dscan scan` gives
        end(st, job_id, JobStatus.FAILED, error=report.no_check_reason())
        return
    st.save_report(job_id, render(report, "json"))
    end(
        st,
        job_id,
        JobStatus.SUCCEEDED,
        summary=report.summary.model_dump_json(),
        items_done=merged.items,
        bytes_done=merged.bytes,
        # The plan's totals are estimates (an LMDB's is its file size, pages and free space included): what
        # was scanned is the whole, so a finished job reads "done of total" at the total.
        items_total=merged.items,
        bytes_total=merged.bytes,
    )
    log.info(
        "job done: %d errors, %d warnings, %s",
        report.summary.errors,
        report.summary.warnings,
        "passed" if report.summary.passed else "failed",
    )


@app.task(name=TaskName.FAILED.value)
def scan_failed(request: Any, exc: BaseException, traceback: Any, job_id: str) -> None:
    """Errback of the chord: a shard task failed for good (time limit, Redis gone for too long)."""
    del request, traceback
    with job_context(job_id):
        if isinstance(exc, SoftTimeLimitExceeded) or "TimeLimitExceeded" in repr(exc):
            message = "a shard took longer than the task time limit"
        else:
            message = f"a shard task failed: {exc}"
        log.error("job failed: %s", message)
        patiently(lambda: end(store(), job_id, JobStatus.FAILED, error=message))


def end(st: Store, job_id: str, status: JobStatus, **fields: str | float | int) -> bool:
    """End a running or queued job (once), count it in the metrics and send its callback."""
    moved, _ = st.transition(job_id, status, [JobStatus.QUEUED, JobStatus.RUNNING], finished=time.time(), **fields)
    if not moved:
        return False
    job = st.get_job(job_id)
    if job is not None:
        if status is JobStatus.SUCCEEDED:
            st.adopt_duplicate(job)
        st.record_end(status, job.duration_s, job.progress.items_done, job.progress.bytes_done)
        if job.callback_url:
            send_callback.delay(job_id)
    st.drop_work(job_id)
    return True


def callback_body(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.id,
        "status": job.status.value,
        "path": job.path,
        "summary": job.summary.model_dump(mode="json") if job.summary else None,
        "error": job.error,
    }


@app.task(
    name=TaskName.CALLBACK.value,
    autoretry_for=(httpx.TransportError, httpx.HTTPStatusError, *UNAVAILABLE),
    retry_backoff=2,
    max_retries=4,
)
def send_callback(job_id: str) -> None:
    """POST the job's summary to its callback URL (hosts re-checked against the allowlist; no redirects)."""
    with job_context(job_id):
        st = store()
        job = st.get_job(job_id)
        if job is None or not job.callback_url:
            return
        url = httpx.URL(job.callback_url)
        if not st.settings.callback_allowed(job.callback_url):  # (the API's test, with today's allowed hosts)
            log.warning("callback host %s is not allowed any more: not sent", url.host)
            return
        response = httpx.post(
            url, json=callback_body(job), timeout=st.settings.callback_timeout_s, follow_redirects=False
        )
        log.info("callback %s answered %d", url.host, response.status_code)
        if response.status_code >= 500:
            response.raise_for_status()
