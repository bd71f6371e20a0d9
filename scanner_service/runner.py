"""Local execution: plan, run the shards in a process pool, merge, report. The CLI's ``dscan scan``."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .config import ScanConfig
from .cpus import usable_cpus
from .engine import plan_source, scan_shard
from .head_start import HeadStart
from .partial import Partial, merge
from .report import Report, build_report
from .sources import open_source
from .sources.base import Plan

if TYPE_CHECKING:
    from .pool import ShardPool

MERGE_EVERY = 8
"""Partials held before they are merged into one."""


class ProgressSink(Protocol):
    def start(self, total_items: int, total_bytes: int, shards: int) -> None: ...
    def advance(self, items: int, nbytes: int) -> None: ...
    def finish(self) -> None: ...


def default_workers() -> int:
    """One reader per CPU this process may use (its affinity, capped by a container's CPU quota)."""
    return usable_cpus()


def _plan(
    path: Path, target: str, config: ScanConfig, kind: str | None, n: int, head_start: HeadStart | None
) -> tuple[Plan, ShardPool | None]:
    """Detect and plan the dataset; for a format whose readers may start early, one started meanwhile."""
    source = open_source(path, config, kind)
    pool = None
    if n > 0 and source.early_readers:  # one reader starts now, while the plan is made
        from .pool import ShardPool

        with contextlib.suppress(Exception):  # (a decoder that cannot be imported is reported by the scan)
            source.warm_up()  # imported once, here, for every reader forked from this process
        pool = ShardPool(source.kind, target, config, n)
        pool.start(1)
    try:
        planned = plan_source(source, config)
        if head_start is not None:
            source.adopt(planned.shards, head_start)
    except BaseException:
        if pool is not None:
            pool.close(kill=True)
        raise
    return planned, pool


def scan(
    path: str | Path,
    config: ScanConfig | None = None,
    workers: int | None = None,
    progress: ProgressSink | None = None,
    kind: str | None = None,
    head_start: HeadStart | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Report:
    """Scan the dataset at ``path``. ``workers=0`` runs in this process (no crash isolation). ``head_start``:
    verdicts on some of the folder's images, found while the caller started (``scanner_service.head_start``);
    stopped here, whatever the dataset turns out to be. ``meanwhile``: the caller's own work for the end (the
    CLI imports its text renderer), called once the readers are busy (when the first shard's result comes)."""
    config = config or ScanConfig()
    started = time.perf_counter()
    target = os.fspath(Path(path).absolute())  # (``source.path`` is for showing: a name that is no UTF-8 is escaped)
    n = default_workers() if workers is None else workers
    try:
        planned, pool = _plan(Path(path), target, config, kind, n, head_start)
    finally:
        if head_start is not None:
            head_start.stop()
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
        if meanwhile is not None:  # (each worker has a shard to read, and the next one sent ahead)
            meanwhile()
            meanwhile = None
        partials.append(part)
        if len(partials) >= MERGE_EVERY:
            partials = [merge(partials)]
    if progress:
        progress.finish()
    return build_report(info, merge(partials), config, time.perf_counter() - started)
