"""scan_shard: the pure function every executor runs, and the report it all merges into.

    plan(path) -> Plan ; scan_shard(kind, path, shard, config) -> Partial ; merge(partials) -> Partial

Nothing here knows whether it runs in the CLI's process pool or in a Celery worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import checks
from .checks.image_prepass import inspect_item
from .config import ScanConfig
from .context import ScanContext
from .errors import ScanCancelled
from .labels import close_runs, tally_block
from .numbered import tally as tally_numbered
from .partial import Partial
from .sources import open_source
from .sources.base import Plan, Shard, Source
from .stacked import summarize_batch
from .statistics import flush_moments, summarize

Progress = Callable[[int, int], None]
"""Called with (items, bytes) done since the last call."""


def _labels_prepass(item: Any, ctx: ScanContext) -> Any:
    return tally_block(item, ctx.partial, ctx.config.run_threshold, ctx.config.num_classes)


PREPASS: dict[str, Callable[[Any, ScanContext], Any]] = {
    "numeric": lambda item, ctx: summarize(item, ctx.moments),
    "numeric_batch": summarize_batch,
    "labels": _labels_prepass,
    "image": inspect_item,
    "numbered_keys": lambda item, ctx: tally_numbered(item, ctx.partial.numbered),
}
"""Work shared by every hook of an item kind, done once per item; its result is the hooks' ``summary``."""


def _prepass(kind: str, item: Any, ctx: ScanContext) -> Any:
    shared = PREPASS.get(kind)
    return shared(item, ctx) if shared is not None else None


def plan(path: str | Path, config: ScanConfig, kind: str | None = None) -> Plan:
    """Detect the dataset at ``path`` and plan it into shards."""
    return plan_source(open_source(Path(path), config, kind), config)


def plan_source(source: Source, config: ScanConfig) -> Plan:
    """Plan an opened (detected) source into shards."""
    result = source.plan()
    result.partial.cap = config.max_locations
    return result


def scan_shard(
    kind: str,
    path: str,
    shard: Shard,
    config: ScanConfig,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress_interval: float = 0.25,
) -> Partial:
    """Read one shard and run every enabled check on its items."""
    source = open_source(Path(path), config, kind)
    enabled = checks.enabled_codes(config.select, config.ignore)
    partial = Partial(cap=config.max_locations, shards=1)
    ctx = ScanContext(config=config, partial=partial, enabled=enabled)
    table: dict[str, list[checks.Hook]] = {}
    pending_items = pending_bytes = reported_bytes = 0
    last = time.monotonic()
    for item in source.read(shard):
        kind_name = item.kind
        if kind_name == "failure":
            ctx.emit(item.code, item.location, item.values)
        elif kind_name == "note":
            partial.info.update(item.info)
        else:
            hooks = table.get(kind_name)
            if hooks is None:
                hooks = table[kind_name] = checks.hooks(kind_name, enabled)
            summary = _prepass(kind_name, item, ctx)
            for hook in hooks:
                hook(item, summary, ctx)
        partial.items += item.items
        partial.bytes += item.nbytes
        pending_items += item.items
        pending_bytes += item.nbytes
        item = summary = None  # hold nothing while the source reads the next item (it may reuse or unmap memory)
        now = time.monotonic()
        if now - last >= progress_interval:
            if cancelled is not None and cancelled():
                raise ScanCancelled(f"shard {shard.id} cancelled")
            if progress is not None:
                progress(pending_items, pending_bytes)
            reported_bytes += pending_bytes
            pending_items = pending_bytes = 0
            last = now
    flush_moments(ctx.moments, partial)
    close_runs(partial)
    # A finished shard has done its planned share of the bytes, whatever its items measured (an LMDB plans
    # its file's size, pages and free space included; its records measure their values): progress then
    # ends at the plan's total.
    pending_bytes = max(pending_bytes, shard.bytes - reported_bytes)
    if progress is not None and (pending_items or pending_bytes):
        progress(pending_items, pending_bytes)
    return partial


def finalize(partial: Partial, config: ScanConfig) -> Partial:
    """Run the checks that judge the merged result (labels, constant features) into a copy of it.

    Finalizers only read the merged result and add findings, so the copy is shallow but for the finding
    tallies, which adding to changes in place.
    """
    findings = {code: t.model_copy(update={"locations": list(t.locations)}) for code, t in partial.findings.items()}
    out = partial.model_copy(update={"findings": findings})
    ctx = ScanContext(config=config, partial=out, enabled=checks.enabled_codes(config.select, config.ignore))
    for hook in checks.finalizers(ctx.enabled):
        hook(ctx)
    for code in list(out.findings):
        if code not in ctx.enabled:
            del out.findings[code]
    return out


def split_shard(kind: str, path: str, shard: Shard, config: ScanConfig) -> list[Shard]:
    """Smaller shards covering ``shard``, to isolate the part that kills its reader ([] if indivisible)."""
    return open_source(Path(path), config, kind).split(shard)


def crash_partial(kind: str, path: str, shard: Shard, config: ScanConfig, reason: str) -> Partial:
    """The partial of an indivisible shard whose reader process dies every time: one finding."""
    code, location = open_source(Path(path), config, kind).crash_finding(shard, reason)
    partial = Partial(cap=config.max_locations, shards=1, items=shard.items)
    enabled = checks.enabled_codes(config.select, config.ignore)
    if code in enabled:
        partial.add(code, location)
    return partial
