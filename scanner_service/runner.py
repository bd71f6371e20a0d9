"""Local execution: plan, run the shards in a process pool, merge, report. The CLI's ``dscan scan``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol

from .config import ScanConfig
from .engine import plan_source, scan_shard
from .partial import Partial, merge
from .report import Report, build_report
from .sources import open_source

MERGE_EVERY = 8
"""Partials held before they are merged into one."""


class ProgressSink(Protocol):
    def start(self, total_items: int, total_bytes: int, shards: int) -> None: ...
    def advance(self, items: int, nbytes: int) -> None: ...
    def finish(self) -> None: ...


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def scan(
    path: str | Path,
    config: ScanConfig | None = None,
    workers: int | None = None,
    progress: ProgressSink | None = None,
    kind: str | None = None,
) -> Report:
    """Scan the dataset at ``path``. ``workers=0`` runs in this process (no crash isolation)."""
    config = config or ScanConfig()
    started = time.perf_counter()
    source = open_source(Path(path), config, kind)
    target = os.fspath(Path(path).absolute())  # (``source.path`` is for showing: a name that is no UTF-8 is escaped)
    n = default_workers() if workers is None else workers
    pool = None
    if n > 0 and source.early_readers:  # one reader starts now and imports its decoders while the plan is made
        from .pool import ShardPool

        pool = ShardPool(source.kind, target, config, n)
        pool.start(1)
    try:
        planned = plan_source(source, config)
    except BaseException:
        if pool is not None:
            pool.close(kill=True)
        raise
    info = planned.source
    partials: list[Partial] = [planned.partial]
    advance = progress.advance if progress else None
    if pool is None and n > 0 and planned.shards:
        from .pool import ShardPool

        pool = ShardPool(info.kind, target, config, min(n, len(planned.shards)))
        pool.start()
    elif pool is not None and not planned.shards:
        pool.close()
        pool = None
    if progress:
        progress.start(info.items, info.bytes, len(planned.shards))
    done = (
        (scan_shard(info.kind, target, shard, config, progress=advance) for shard in planned.shards)
        if pool is None
        else pool.run(planned.shards, advance)
    )
    for part in done:  # folded in as they come: memory does not grow with the number of shards
        partials.append(part)
        if len(partials) >= MERGE_EVERY:
            partials = [merge(partials)]
    if progress:
        progress.finish()
    return build_report(info, merge(partials), config, time.perf_counter() - started)
