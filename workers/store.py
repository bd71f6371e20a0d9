"""The Redis store shared by the API and the workers: job records, shard results, reports, the job index.

This module is the one place both sides agree on: the key layout, the job record, the status machine and
the names of the tasks. It imports Redis, pydantic and the core's types only (no Celery, no FastAPI), so the
API imports it without importing the workers and the workers without importing the API.

Keys (``P`` is ``DSCAN_KEY_PREFIX``)::

    P:job:ID               hash    the job record (status, request, timings, progress, summary, error, linked files)
    P:job:ID:plan          string  the planned source and shard ids (JSON)
    P:job:ID:partials      hash    shard id -> Partial JSON ("plan" holds what planning found)
    P:job:ID:progress      hash    shard id -> items and bytes done by its current delivery
    P:job:ID:deliveries    hash    shard id -> how many times a worker started it
    P:job:ID:running       hash    shard id -> "host pid" of the worker process running it
    P:job:ID:report        string  the report (JSON), kept DSCAN_RETENTION_S after the job ends
    P:idx:all              zset    job ids by creation time (listing, newest first; never KEYS)
    P:idx:STATUS           zset    the same, per status (filter, counts for /metrics)
    P:dedup:HASH           string  job id of a request (options + files' sizes and mtimes)
    P:metrics              hash    totals for /metrics (jobs ended by status, items, bytes, durations)
    P:node:NODE            string  a live worker node, renewed by its watchdog; expires DSCAN_NODE_TTL_S after
                                   its last beat (NODE: host, pid of its main process, a random part)
    P:held:TAG             string  the NODE that received the broker message TAG (a delivery tag), kept as
                                   long as the visibility timeout (a later delivery of TAG overwrites it)
    P:lost:TAG:NODE        string  claim of the one watchdog that delivers TAG again for the lost NODE

Every status change goes through one Lua script that checks the current status, so a job that was cancelled
is never marked succeeded by a late merge, and ended jobs never change again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

import redis
import redis.asyncio
from pydantic import BaseModel, Field
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from scanner_service.linked_files import LinkedStates, unchanged
from scanner_service.report import Summary

from .settings import Settings

UNAVAILABLE: Final = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
"""What Redis raises when it cannot be reached (the API answers 503, tasks retry)."""

DURATION_BUCKETS: Final = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)


class TaskName(StrEnum):
    """The registered names of the worker tasks (the API sends ``PLAN`` and ``CALLBACK`` by name)."""

    PLAN = "dscan.plan"
    SHARD = "dscan.shard"
    MERGE = "dscan.merge"
    FAILED = "dscan.failed"
    CALLBACK = "dscan.callback"


class JobStatus(StrEnum):
    """Where a job stands. ``queued``: waiting for a worker, before planning and again once planned until a
    worker takes its first shard; ``running``: a worker plans it or scans its shards; then one of the ends."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


ACTIVE: Final = (JobStatus.QUEUED, JobStatus.RUNNING)
PLAN_KEY: Final = "plan"


class Progress(BaseModel):
    shards_done: int = 0
    shards_total: int = 0
    items_done: int = 0
    items_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0

    @property
    def fraction(self) -> float:
        """Share of the work done, by bytes when known, else by shards."""
        if self.bytes_total:
            return min(1.0, self.bytes_done / self.bytes_total)
        if self.shards_total:
            return min(1.0, self.shards_done / self.shards_total)
        return 0.0


class Linked(BaseModel):
    """The files outside the dataset's HDF5 files that the job reads data from (virtual dataset sources,
    external raw data files, external link targets), with their state when its plan task looked."""

    files: LinkedStates | None = Field(description="path -> size, mtime and inode; None: they cannot be told")


class JobRecord(BaseModel):
    """A scan job as stored: what was asked, where it stands, what it found."""

    id: str
    status: JobStatus
    path: str = Field(description="the dataset path as requested")
    target: str = Field(description="the dataset path after resolving symlinks and ..")
    kind: str | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="scan options that differ from defaults")
    callback_url: str | None = None
    created: float
    started: float | None = None
    planned: float | None = None
    paused: float | None = Field(None, description="planned, its shards waiting for a worker since then")
    waited_s: float = Field(0.0, description="seconds its planned shards waited for a worker")
    finished: float | None = None
    progress: Progress = Field(default_factory=Progress)
    summary: Summary | None = None
    error: str | None = None
    linked: Linked | None = Field(None, description="None until the plan task has looked")

    def reusable(self) -> bool:
        """Whether a request on the same, unchanged dataset may get this job instead of a new scan: it did
        not fail or get cancelled, and the files it reads data from outside the dataset are as it found them
        (or it has not looked yet: then it reads them as they are now)."""
        if self.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            return False
        if self.linked is None:
            return not self.status.ended  # a job ended without looking cannot vouch for them
        return self.linked.files is not None and unchanged(self.linked.files)

    @property
    def duration_s(self) -> float | None:
        """Seconds of work from the start of planning to the end (or until now while running), without the
        time its planned shards waited for a worker (behind other jobs' shards)."""
        if self.started is None:
            return None
        end = self.finished if self.finished is not None else time.time()
        if self.paused is not None:  # waiting (or ended while waiting): the clock stopped then
            end = min(end, self.paused)
        return round(max(0.0, end - self.started - self.waited_s), 3)

    @classmethod
    def from_hash(cls, data: Mapping[str, str]) -> JobRecord:
        def num(name: str) -> int:
            return int(data.get(name) or 0)

        def ts(name: str) -> float | None:
            value = data.get(name)
            return float(value) if value else None

        summary = data.get("summary")
        linked = data.get("linked")
        return cls(
            id=data["id"],
            status=JobStatus(data["status"]),
            path=data.get("path", ""),
            target=data.get("target", ""),
            kind=data.get("kind") or None,
            options=json.loads(data.get("options") or "{}"),
            callback_url=data.get("callback_url") or None,
            created=float(data["created"]),
            started=ts("started"),
            planned=ts("planned"),
            paused=ts("paused"),
            waited_s=float(data.get("waited_s") or 0.0),
            finished=ts("finished"),
            progress=Progress(
                shards_done=num("shards_done"),
                shards_total=num("shards_total"),
                items_done=num("items_done"),
                items_total=num("items_total"),
                bytes_done=num("bytes_done"),
                bytes_total=num("bytes_total"),
            ),
            summary=Summary.model_validate_json(summary) if summary else None,
            error=data.get("error") or None,
            linked=Linked.model_validate_json(linked) if linked else None,
        )


def iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds") if ts is not None else None


_TRANSITION = """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return {0, ''} end
local allowed = false
for s in string.gmatch(ARGV[2], '[^,]+') do
  if s == cur then allowed = true end
end
if not allowed then return {0, cur} end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
for i = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
local score = redis.call('ZSCORE', KEYS[2] .. cur, ARGV[3])
redis.call('ZREM', KEYS[2] .. cur, ARGV[3])
if score then
  redis.call('ZADD', KEYS[2] .. ARGV[1], score, ARGV[3])
end
if tonumber(ARGV[4]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[4])
end
return {1, cur}
"""

_ADVANCE = """
local function advance(shard, items, nbytes)
  local fi, fb = shard .. ':i', shard .. ':b'
  local oi = tonumber(redis.call('HGET', KEYS[2], fi) or '0')
  local ob = tonumber(redis.call('HGET', KEYS[2], fb) or '0')
  if items > oi then
    redis.call('HSET', KEYS[2], fi, items)
    redis.call('HINCRBY', KEYS[1], 'items_done', items - oi)
  end
  if nbytes > ob then
    redis.call('HSET', KEYS[2], fb, nbytes)
    redis.call('HINCRBY', KEYS[1], 'bytes_done', nbytes - ob)
  end
end
"""
"""A shard's items and bytes done are the most any of its deliveries reached: a new delivery of a shard whose
worker died starts its count at 0 again, and the job's progress stands still until it passes the old one
(it went back: a bar at 40% fell to 3%), never counting the shard twice."""

_ACTIVE = "local status = redis.call('HGET', KEYS[1], 'status')\n"
_ENDED = "if status ~= 'queued' and status ~= 'running' then return {gone} end\n"
"""An ended job's record never changes again: shards still finishing their block after a cancel do not move
its numbers, and a job that vanished (expired, Redis emptied) is not recreated as a bare counter hash."""

_PROGRESS = (
    _ADVANCE
    + _ACTIVE
    + _ENDED.format(gone=0)
    + """
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 0 end
advance(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""
)

_COMPLETE = (
    _ADVANCE
    + _ACTIVE
    + _ENDED.format(gone=-1)
    + """
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2]) == 0 then return 0 end
advance(ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]))
if ARGV[1] ~= 'plan' then redis.call('HINCRBY', KEYS[1], 'shards_done', 1) end
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('EXPIRE', KEYS[3], ARGV[5])
return 1
"""
)

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def connect(settings: Settings) -> redis.Redis[str]:
    """A Redis client that fails fast (socket timeouts, one retry) instead of hanging when Redis is down."""
    return redis.Redis.from_url(
        settings.redis_url,
        decode_responses=True,
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=settings.redis_timeout_s,
        retry=Retry(NoBackoff(), 1),
        health_check_interval=15,
        client_name="dscan",
    )


def connect_async(settings: Settings) -> redis.asyncio.Redis[str]:
    """The asyncio twin of :func:`connect` (same timeouts)."""
    return redis.asyncio.Redis.from_url(
        settings.redis_url,
        decode_responses=True,
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=settings.redis_timeout_s,
        retry=AsyncRetry(NoBackoff(), 1),
        health_check_interval=15,
        client_name="dscan",
    )


class Store:
    """Job records and results in Redis. Thread-safe (a connection pool); cheap to share per process."""

    def __init__(self, settings: Settings, client: redis.Redis[str] | None = None) -> None:
        self.settings = settings
        self.redis: redis.Redis[str] = client if client is not None else connect(settings)
        self.prefix = settings.key_prefix
        self.retention = settings.retention_s
        # Work keys of a running job live at most this long (a job that never ends does not leak).
        self.work_ttl = settings.retention_s + 2 * settings.hard_time_limit_s
        self._async: redis.asyncio.Redis[str] | None = None
        self._transition = self.redis.register_script(_TRANSITION)
        self._progress = self.redis.register_script(_PROGRESS)
        self._complete = self.redis.register_script(_COMPLETE)
        self._release = self.redis.register_script(_RELEASE)

    # -- keys -----------------------------------------------------------------------------------

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def job_key(self, job_id: str, part: str | None = None) -> str:
        return self.key("job", job_id) if part is None else self.key("job", job_id, part)

    def index_key(self, status: JobStatus | str | None = None) -> str:
        return self.key("idx", str(status) if status else "all")

    # -- health ---------------------------------------------------------------------------------

    def ping(self) -> bool:
        return bool(self.redis.ping())

    def close(self) -> None:
        self.redis.close()

    # -- jobs -----------------------------------------------------------------------------------

    def dedup_key(self, digest: str) -> str:
        return self.key("dedup", digest)

    def find_duplicate(self, digest: str) -> JobRecord | None:
        """The job made for the same request, if it is still kept and reusable (``JobRecord.reusable``: this
        stats the files the job reads data from outside the dataset)."""
        job_id = self.redis.get(self.dedup_key(digest))
        if not job_id:
            return None
        job = self.get_job(str(job_id))
        return job if job is not None and job.reusable() else None

    def adopt_duplicate(self, job: JobRecord) -> None:
        """A job that succeeded answers its request from now on (a forced re-scan replaces the earlier one)."""
        digest = self.redis.hget(self.job_key(job.id), "dedup")
        if digest:
            self.redis.set(self.dedup_key(str(digest)), job.id, ex=self.retention)

    def create_job(
        self,
        job_id: str,
        *,
        path: str,
        target: str,
        options: Mapping[str, Any],
        callback_url: str | None,
        digest: str | None,
        force: bool = False,
    ) -> JobRecord:
        """Write a queued job. With ``digest``, claims the dedup key unless a live job holds it already:
        then that job is returned instead (two identical requests at once make one job)."""
        now = time.time()
        if digest is not None and not force:
            claimed = self.redis.set(self.dedup_key(digest), job_id, nx=True, ex=self.retention)
            if not claimed:
                existing = self.find_duplicate(digest)
                if existing is not None:
                    return existing
                self.redis.set(self.dedup_key(digest), job_id, ex=self.retention)
        elif digest is not None and self.find_duplicate(digest) is None:
            # a forced scan takes the request's place only where no kept job answers it: until it succeeds
            # (``adopt_duplicate``), the same request still finds the earlier scan, should it be cancelled or fail
            self.redis.set(self.dedup_key(digest), job_id, ex=self.retention)
        fields: dict[str | bytes, str | bytes | float | int] = {
            "id": job_id,
            "status": JobStatus.QUEUED.value,
            "path": path,
            "target": target,
            "options": json.dumps(dict(options), sort_keys=True),
            "callback_url": callback_url or "",
            "created": repr(now),
            "dedup": digest or "",
        }
        with self.redis.pipeline() as pipe:
            pipe.hset(self.job_key(job_id), mapping=fields)
            pipe.expire(self.job_key(job_id), self.work_ttl)
            pipe.zadd(self.index_key(), {job_id: now})
            pipe.zadd(self.index_key(JobStatus.QUEUED), {job_id: now})
            pipe.execute()
        self.prune()
        job = self.get_job(job_id)
        assert job is not None
        return job

    def get_job(self, job_id: str) -> JobRecord | None:
        data = self.redis.hgetall(self.job_key(job_id))
        return JobRecord.from_hash(data) if data else None

    async def aget_job(self, job_id: str) -> JobRecord | None:
        """``get_job`` for the event loop (the API's status polls): no thread hop, never blocks the loop."""
        if self._async is None:
            self._async = connect_async(self.settings)
        data = await self._async.hgetall(self.job_key(job_id))
        return JobRecord.from_hash(data) if data else None

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()  # type: ignore[attr-defined]
            self._async = None

    def status(self, job_id: str) -> JobStatus | None:
        value = self.redis.hget(self.job_key(job_id), "status")
        return JobStatus(str(value)) if value else None

    def list_jobs(
        self, status: JobStatus | None = None, offset: int = 0, limit: int = 50
    ) -> tuple[list[JobRecord], int]:
        """Jobs newest first, from the sorted index; records that expired are dropped from the index."""
        index = self.index_key(status)
        out: list[JobRecord] = []
        for _ in range(3):
            ids = [str(i) for i in self.redis.zrevrange(index, offset, offset + limit - 1)]
            if not ids:
                break
            with self.redis.pipeline(transaction=False) as pipe:
                for job_id in ids:
                    pipe.hgetall(self.job_key(job_id))
                rows = pipe.execute()
            gone = [job_id for job_id, row in zip(ids, rows, strict=True) if not row]
            if not gone:
                out = [JobRecord.from_hash(row) for row in rows]
                break
            self._unindex(gone)
        total = int(self.redis.zcard(index))
        return out, total

    def counts(self) -> dict[JobStatus, int]:
        with self.redis.pipeline(transaction=False) as pipe:
            for status in JobStatus:
                pipe.zcard(self.index_key(status))
            values = pipe.execute()
        return {status: int(n) for status, n in zip(JobStatus, values, strict=True)}

    def prune(self, batch: int = 200) -> int:
        """Drop index entries of the oldest jobs whose records have expired."""
        horizon = time.time() - self.retention
        ids = [str(i) for i in self.redis.zrangebyscore(self.index_key(), "-inf", horizon, start=0, num=batch)]
        if not ids:
            return 0
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.exists(self.job_key(job_id))
            alive = pipe.execute()
        gone = [job_id for job_id, n in zip(ids, alive, strict=True) if not n]
        self._unindex(gone)
        return len(gone)

    def _unindex(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if not ids:
            return
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrem(self.index_key(), *ids)
            for status in JobStatus:
                pipe.zrem(self.index_key(status), *ids)
            pipe.execute()

    def transition(
        self, job_id: str, to: JobStatus, allowed: Iterable[JobStatus], **fields: str | float | int
    ) -> tuple[bool, JobStatus | None]:
        """Move the job to ``to`` if its status is one of ``allowed``, setting ``fields`` with it.

        Returns whether it moved and the status it had. Ended jobs keep their record for the retention.
        """
        ttl = self.retention if to.ended else self.work_ttl
        args: list[str] = [to.value, ",".join(s.value for s in allowed), job_id, str(ttl)]
        for name, value in fields.items():
            args += [name, repr(value) if isinstance(value, float) else str(value)]
        moved, previous = self._transition(keys=[self.job_key(job_id), self.key("idx") + ":"], args=args)
        return bool(moved), JobStatus(previous) if previous else None

    def cancel(self, job_id: str) -> tuple[bool, JobStatus | None]:
        return self.transition(job_id, JobStatus.CANCELLED, ACTIVE, finished=time.time())

    def is_cancelled(self, job_id: str) -> bool:
        status = self.status(job_id)
        return status is None or status is JobStatus.CANCELLED

    def record_linked(self, job_id: str, files: LinkedStates | None) -> None:
        """Record the files outside the dataset that the job reads data from (None: they cannot be told)."""
        self.set_fields(job_id, linked=Linked(files=files).model_dump_json())

    def set_fields(self, job_id: str, **fields: str | float | int) -> None:
        if fields:
            mapping: dict[str | bytes, str | bytes | float | int] = {
                k: repr(v) if isinstance(v, float) else str(v) for k, v in fields.items()
            }
            self.redis.hset(self.job_key(job_id), mapping=mapping)

    # -- plan and shards ------------------------------------------------------------------------

    def save_plan(self, job_id: str, plan: Mapping[str, Any], plan_partial: str, totals: Mapping[str, int]) -> None:
        with self.redis.pipeline() as pipe:
            pipe.set(self.job_key(job_id, "plan"), json.dumps(plan), ex=self.work_ttl)
            pipe.hset(self.job_key(job_id), mapping={k: str(v) for k, v in totals.items()})
            pipe.execute()
        self.complete_shard(job_id, PLAN_KEY, plan_partial, 0, 0)

    def load_plan(self, job_id: str) -> dict[str, Any] | None:
        raw = self.redis.get(self.job_key(job_id, "plan"))
        return json.loads(str(raw)) if raw else None

    def count_delivery(self, job_id: str, shard: str) -> int:
        key = self.job_key(job_id, "deliveries")
        with self.redis.pipeline() as pipe:
            pipe.hincrby(key, shard, 1)
            pipe.expire(key, self.work_ttl)
            count, _ = pipe.execute()
        return int(count)

    def deliveries(self, job_id: str) -> dict[str, int]:
        return {k: int(v) for k, v in self.redis.hgetall(self.job_key(job_id, "deliveries")).items()}

    def mark_running(self, job_id: str, shard: str, who: str) -> None:
        key = self.job_key(job_id, "running")
        with self.redis.pipeline() as pipe:
            pipe.hset(key, shard, who)
            pipe.expire(key, self.work_ttl)
            pipe.execute()

    def clear_running(self, job_id: str, shard: str) -> None:
        self.redis.hdel(self.job_key(job_id, "running"), shard)

    def running(self, job_id: str) -> dict[str, str]:
        return dict(self.redis.hgetall(self.job_key(job_id, "running")))

    def progress(self, job_id: str, shard: str, items: int, nbytes: int) -> None:
        """Record the items and bytes done so far by the current delivery of ``shard`` (absolute values: a
        redelivered shard is not counted twice, and the job's progress never goes back, see ``_ADVANCE``).
        Nothing changes once the job has ended."""
        self._progress(
            keys=[self.job_key(job_id), self.job_key(job_id, "progress"), self.job_key(job_id, "partials")],
            args=[shard, int(items), int(nbytes), self.work_ttl],
        )

    def complete_shard(self, job_id: str, shard: str, partial_json: str, items: int, nbytes: int) -> bool:
        """Store a shard's partial once; False if it was stored already (a redelivered shard) or the job has
        ended (cancelled: the partial would never be merged)."""
        done = self._complete(
            keys=[self.job_key(job_id), self.job_key(job_id, "progress"), self.job_key(job_id, "partials")],
            args=[shard, partial_json, int(items), int(nbytes), self.work_ttl],
        )
        return int(done) == 1

    def get_partial(self, job_id: str, shard: str) -> str | None:
        raw = self.redis.hget(self.job_key(job_id, "partials"), shard)
        return str(raw) if raw is not None else None

    def partials(self, job_id: str) -> dict[str, str]:
        return dict(self.redis.hgetall(self.job_key(job_id, "partials")))

    def drop_work(self, job_id: str) -> None:
        """Delete a finished job's intermediate keys (the record and report stay for the retention)."""
        self.redis.delete(*(self.job_key(job_id, part) for part in ("plan", "partials", "progress", "running")))
        self.redis.expire(self.job_key(job_id, "deliveries"), self.retention)

    # -- worker nodes ---------------------------------------------------------------------------

    def beat(self, node: str) -> None:
        """``node`` is alive: its key lives ``node_ttl_s`` more seconds (Redis's clock: no skew between
        machines)."""
        self.redis.set(self.key("node", node), "1", ex=self.settings.node_ttl_s)

    def hold(self, tag: str, node: str) -> None:
        """``node`` received the broker message ``tag``. Kept as long as the visibility timeout, after which
        the broker delivers an unacknowledged message again by itself anyway."""
        self.redis.set(self.key("held", tag), node, ex=self.settings.redelivery_s)

    def lost(self, tags: Sequence[str]) -> dict[str, str]:
        """Of the unacknowledged messages ``tags``, those whose node has stopped beating: tag -> node. A tag
        no node is known to hold is none of them (the visibility timeout still covers it)."""
        if not tags:
            return {}
        holders = self.redis.mget([self.key("held", tag) for tag in tags])
        held = {tag: str(node) for tag, node in zip(tags, holders, strict=True) if node}
        nodes = sorted(set(held.values()))
        if not nodes:
            return {}
        with self.redis.pipeline(transaction=False) as pipe:
            for node in nodes:
                pipe.exists(self.key("node", node))
            alive = {node for node, n in zip(nodes, pipe.execute(), strict=True) if n}
        return {tag: node for tag, node in held.items() if node not in alive}

    def claim_lost(self, tag: str, node: str) -> bool:
        """Whether this caller is the one to deliver ``tag`` again for the lost ``node`` (one atomic SET NX:
        of the watchdogs of all live nodes, one wins). The claim expires after ``node_ttl_s``, so a delivery
        that failed half-way is tried again, and a message delivered again meanwhile has a new holder."""
        claimed = self.redis.set(self.key("lost", tag, node), "1", nx=True, ex=self.settings.node_ttl_s)
        return bool(claimed)

    def release(self, tag: str, node: str) -> None:
        """Forget that the lost ``node`` held ``tag`` (delivered again): once the message waits in its queue
        again, it is held by no node until one receives it and records itself, whenever that is. Unless that
        happened already: one atomic compare-and-delete."""
        self._release(keys=[self.key("held", tag)], args=[node])

    # -- reports --------------------------------------------------------------------------------

    def save_report(self, job_id: str, report_json: str) -> None:
        self.redis.set(self.job_key(job_id, "report"), report_json, ex=self.retention)

    def get_report(self, job_id: str) -> str | None:
        raw = self.redis.get(self.job_key(job_id, "report"))
        return str(raw) if raw is not None else None

    # -- metrics --------------------------------------------------------------------------------

    def record_end(self, status: JobStatus, duration_s: float | None, items: int, nbytes: int) -> None:
        key = self.key("metrics")
        with self.redis.pipeline() as pipe:
            pipe.hincrby(key, f"ended:{status.value}", 1)
            pipe.hincrby(key, "items", items)
            pipe.hincrby(key, "bytes", nbytes)
            if duration_s is not None and status is JobStatus.SUCCEEDED:
                pipe.hincrby(key, "duration_count", 1)
                pipe.hincrbyfloat(key, "duration_sum", duration_s)
                for bound in DURATION_BUCKETS:
                    if duration_s <= bound:
                        pipe.hincrby(key, f"duration_le:{bound:g}", 1)
            pipe.execute()

    def metrics(self) -> dict[str, float]:
        raw: dict[str, str] = self.redis.hgetall(self.key("metrics"))
        return {k: float(v) for k, v in raw.items()}
