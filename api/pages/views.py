"""What the pages show, computed from job records and reports: numbers in words, findings grouped, bars sized.

Plain functions and dataclasses, no HTTP: the routes build these and the templates only lay them out.
``static/app.js`` formats the live numbers of the jobs list the same way (``human_bytes``, ``rates``, ``eta``).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from scanner_service import checks
from scanner_service.location import Location
from scanner_service.render import NOTE_PREFIXES, NOTES
from scanner_service.report import ClassRow, Finding, LabelReport, Report, Statistics
from scanner_service.severity import Severity
from scanner_service.text import printable

from ..schemas import ScanView

LOCATIONS_PER_PAGE = 50
LOCATION_FIELDS = ("path", "dataset", "index", "key", "line", "chunk", "detail")
LOCATION_HEADERS = {
    "path": "File",
    "dataset": "Dataset",
    "index": "Index",
    "key": "Key",
    "line": "Line",
    "chunk": "Chunk",
    "detail": "Detail",
}
SEVERITY_TITLES = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Information"}
NO_VALUE = "—"
GENERIC_LABELS = "Class labels"
WAITING = {"queued": "waiting for a worker", "running": "planning the shards"}
"""What a queued job (planned or not: its shards may wait behind other scans') or a running job without a plan
yet is doing (``static/app.js`` says the same)."""


# -- numbers in words ---------------------------------------------------------------------------------


def human_bytes(n: float | None) -> str:
    """``1.5 MB`` (powers of 1024, as the CLI prints them)."""
    if n is None:
        return NO_VALUE
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"  # pragma: no cover - the loop returns at TB


def human_count(n: int | None) -> str:
    return NO_VALUE if n is None else f"{n:,}"


def human_duration(seconds: float | None) -> str:
    """``0.4 s``, ``12 s``, ``3 min 05 s``, ``2 h 04 min``."""
    if seconds is None or not math.isfinite(seconds):
        return NO_VALUE
    s = max(0.0, seconds)
    if s < 9.95:
        return f"{s:.1f} s"
    if s < 59.5:
        return f"{s:.0f} s"
    t = round(s)
    if t < 3600:
        return f"{t // 60} min {t % 60:02d} s"
    return f"{t // 3600} h {t % 3600 // 60:02d} min"


def human_number(x: float | int | None) -> str:
    """A statistic: integers as they are, floats to 4 significant digits, NaN and Inf by name."""
    if x is None:
        return NO_VALUE
    if isinstance(x, int):
        return f"{x:,}"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "−Inf"
    return f"{x:.4g}"


def human_percent(fraction: float | None, digits: int = 0) -> str:
    if fraction is None:
        return NO_VALUE
    return f"{fraction * 100:.{digits}f}%"


def probability(p: float | None) -> str:
    """A probability as a percentage readable at both ends: ``< 0.01%``, ``2.14%``, ``100%``."""
    if p is None:
        return NO_VALUE
    if p <= 0:
        return "0%"
    if p < 0.0001:
        return "< 0.01%"
    if p >= 0.99995:
        return "100%"
    return f"{p * 100:.2f}%"


def when(timestamp: str | None) -> str:
    """An ISO timestamp of the API (UTC) as ``2025-05-01 12:00:03 UTC``."""
    if not timestamp:
        return NO_VALUE
    return timestamp[:19].replace("T", " ") + " UTC"


def share(p: float) -> str:
    """A threshold as a short percentage: ``1%``, ``0.5%``."""
    return f"{p * 100:g}%"


def rates(view: ScanView) -> tuple[str, str]:
    """Bytes and items per second since the scan started."""
    elapsed = view.duration_s
    done = view.progress
    if not elapsed or elapsed < 0.05 or (not done.bytes_done and not done.items_done):
        return NO_VALUE, ""
    items = f"{human_count(round(done.items_done / elapsed))} items/s" if done.items_done else ""
    return f"{human_bytes(done.bytes_done / elapsed)}/s", items


def display_path(path: str, roots: Iterable[str]) -> str:
    """A dataset path without the data root it lies in (``/data/train.h5`` under ``/data``: ``train.h5``),
    with control characters and bytes that are no UTF-8 spelled out as in the reports (``a\\x0ab``)."""
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix) and len(path) > len(prefix):
            return printable(path[len(prefix) :])
    return printable(path)


NO_WORKER_ETA = "none while no worker runs"
NO_WORKER_NOTICE = (
    "No worker answers: the scan waits until one starts (`celery -A workers.app worker`, or `dscan serve`)."
)
"""What the pages say of a scan under way when no worker answers the service's ping (``static/app.js`` too)."""


def eta(view: ScanView, workers: bool = True) -> str:
    """Estimated time left of a running scan, from its rate so far; none while no worker answers (``workers``
    false): the scan then waits, and a time left from its past rate would be a false promise."""
    if view.status.value == "running" and not workers:
        return NO_WORKER_ETA
    if view.status.value != "running" or not view.duration_s:
        return NO_VALUE
    fraction = view.progress.fraction
    if fraction <= 0.0:
        return NO_VALUE
    if fraction >= 1.0:
        return "finishing"
    return "about " + human_duration(view.duration_s * (1.0 - fraction) / fraction)


# -- the jobs list ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRow:
    """One line of the jobs list."""

    view: ScanView
    page_url: str
    roots: tuple[str, ...] = ()
    workers: bool = True
    """Whether a worker answered the service's ping (when a scan is under way; else left true)."""

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def short_id(self) -> str:
        return self.view.id[:8]

    @property
    def active(self) -> bool:
        return self.view.status.value in ("queued", "running")

    @property
    def percent(self) -> str:
        return human_percent(self.view.progress.fraction)

    @property
    def items_text(self) -> str:
        p = self.view.progress
        if self.view.status.value == "queued" or (not p.shards_total and not p.items_done):
            return WAITING.get(self.view.status.value, "0 items")
        if p.items_total:
            return f"{human_count(p.items_done)} of {human_count(p.items_total)} items"
        return f"{human_count(p.items_done)} items"

    @property
    def bytes_text(self) -> str:
        p = self.view.progress
        if p.bytes_total:
            return f"{human_bytes(p.bytes_done)} of {human_bytes(p.bytes_total)}"
        return human_bytes(p.bytes_done)

    @property
    def path(self) -> str:
        return display_path(self.view.path, self.roots)

    @property
    def rate_bytes(self) -> str:
        return rates(self.view)[0]

    @property
    def rate_items(self) -> str:
        return rates(self.view)[1]

    @property
    def eta(self) -> str:
        return eta(self.view, self.workers)

    @property
    def duration(self) -> str:
        return human_duration(self.view.duration_s)

    @property
    def errors(self) -> str:
        return human_count(self.view.summary.errors) if self.view.summary else NO_VALUE

    @property
    def warnings(self) -> str:
        return human_count(self.view.summary.warnings) if self.view.summary else NO_VALUE

    @property
    def verdict(self) -> str:
        """``passed``/``failed`` for a finished scan, else its status."""
        if self.view.summary is not None:
            return "passed" if self.view.summary.passed else "failed"
        return ""


# -- one report -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocationPage:
    """One page of a finding's locations."""

    rows: list[Location]
    number: int
    pages: int
    first: int
    last: int
    total: int
    prev_url: str | None
    next_url: str | None


@dataclass(frozen=True)
class FindingView:
    finding: Finding
    check: dict[str, Any] | None
    columns: list[str]
    page: LocationPage

    @property
    def anchor(self) -> str:
        return f"finding-{self.finding.code}"

    @property
    def more(self) -> int:
        """Occurrences the report does not list (beyond ``max_locations``)."""
        return max(0, self.finding.count - len(self.finding.locations)) if self.finding.truncated else 0


@dataclass(frozen=True)
class SeverityGroup:
    severity: Severity
    title: str
    findings: list[FindingView]

    @property
    def count(self) -> int:
        return sum(f.finding.count for f in self.findings)


def location_columns(locations: Iterable[Location]) -> list[str]:
    """The location fields that any of ``locations`` has (``path`` always)."""
    used = {"path"}
    for loc in locations:
        for name in LOCATION_FIELDS[1:]:
            if getattr(loc, name) is not None:
                used.add(name)
    return [name for name in LOCATION_FIELDS if name in used]


def page_of(locations: list[Location], number: int, url: Callable[[int], str], size: int) -> LocationPage:
    pages = max(1, math.ceil(len(locations) / size))
    number = min(max(1, number), pages)
    start = (number - 1) * size
    rows = locations[start : start + size]
    return LocationPage(
        rows=rows,
        number=number,
        pages=pages,
        first=start + 1 if rows else 0,
        last=start + len(rows),
        total=len(locations),
        prev_url=url(number - 1) if number > 1 else None,
        next_url=url(number + 1) if number < pages else None,
    )


def group_findings(
    report: Report,
    page_number: Callable[[str], int],
    page_url: Callable[[str, int], str],
    size: int = LOCATIONS_PER_PAGE,
) -> list[SeverityGroup]:
    """The findings by severity (errors first), each with its catalogue entry and a page of locations."""
    catalogue = {c["code"]: c for c in checks.catalogue()}
    groups: list[SeverityGroup] = []
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        views = []
        for f in sorted((f for f in report.findings if f.severity is severity), key=lambda f: f.code):
            page = page_of(f.locations, page_number(f.code), functools.partial(page_url, f.code), size)
            views.append(
                FindingView(finding=f, check=catalogue.get(f.code), columns=location_columns(f.locations), page=page)
            )
        if views:
            groups.append(SeverityGroup(severity=severity, title=SEVERITY_TITLES[severity], findings=views))
    return groups


@dataclass(frozen=True)
class ClassBar:
    row: ClassRow
    width: float
    """Bar length, percent of the largest class."""
    risky: bool
    """Likely absent from a batch (P(absent) above the report's threshold)."""

    @property
    def p_absent(self) -> str:
        return probability(self.row.p_absent)

    @property
    def fraction(self) -> str:
        return human_percent(self.row.fraction, 2)


@dataclass(frozen=True)
class LabelView:
    labels: LabelReport
    bars: list[ClassBar] = field(default_factory=list)

    @property
    def title(self) -> str:
        """The label dataset, or for labels from folder names or list files, a generic title."""
        name = self.labels.dataset or self.labels.stream
        return GENERIC_LABELS if name in (".", "") else name

    @property
    def split(self) -> str | None:
        """The split these labels are of, in an image folder of splits (``train/<class>/``): its stream and
        path are the split's folder name."""
        lab = self.labels
        if lab.dataset is None and lab.stream not in (".", "") and lab.stream == lab.path:
            return lab.stream
        return None

    @property
    def missing(self) -> str:
        """The missing classes, with their names when they have one: ``0 (bird), 7``."""
        rows = [b.row for b in self.bars if b.row.missing]
        text = ", ".join(f"{r.label} ({r.name})" if r.name else str(r.label) for r in rows) or "none"
        unlisted = self.labels.missing_count - len(rows)
        return f"{text} and {unlisted:,} more" if unlisted > 0 else text

    @property
    def risky(self) -> list[int]:
        return [b.row.label for b in self.bars if b.risky and not b.row.missing]


def label_views(report: Report) -> list[LabelView]:
    out = []
    for lab in report.labels:
        top = max((r.count for r in lab.histogram), default=0)
        bars = [
            ClassBar(
                row=r,
                width=round(100.0 * r.count / top, 2) if top else 0.0,
                risky=r.p_absent is not None and r.p_absent > lab.threshold,
            )
            for r in lab.histogram
        ]
        out.append(LabelView(labels=lab, bars=bars))
    return out


@dataclass(frozen=True)
class StatRow:
    stats: Statistics

    @property
    def shape(self) -> str:
        return " × ".join(str(n) for n in self.stats.shape) or "scalar"

    def number(self, name: str) -> str:
        value: float | int | None = getattr(self.stats, name)
        return human_number(value)

    @property
    def flagged(self) -> bool:
        return bool(self.stats.nan or self.stats.inf)


def stat_rows(report: Report) -> list[StatRow]:
    return [StatRow(s) for s in report.statistics]


def about(report: Report) -> list[tuple[str, str]]:
    """The report's ``info`` entries that are not notes (decoders, layout): the notes show in the summary."""
    return [(k, v) for k, v in report.info.items() if k not in NOTES and not k.startswith(NOTE_PREFIXES)]


def options_text(options: dict[str, Any]) -> list[tuple[str, str]]:
    """The scan's non-default options as (name, value) for display."""
    out = []
    for name, value in sorted(options.items()):
        if name == "confine":  # set by the service itself (its data roots), not by whoever asked for the scan
            continue
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        out.append((name.replace("_", " "), str(value)))
    return out


# -- dataset suggestions ----------------------------------------------------------------------------


def _suggestible(name: str) -> bool:
    """Not hidden, and a name a form can send back: printable UTF-8 (a name that is not UTF-8 or holds control
    characters cannot be typed, and would not even reach the page)."""
    return not name.startswith(".") and name.isprintable()


class Suggestions:
    """Entries under the data roots (folders and files, a few levels deep) for the form's datalist.

    Walked at most every ``ttl`` seconds and capped at ``limit`` entries, so a page view stays cheap on a
    root with millions of files. Hidden entries and names that are not printable UTF-8 are skipped; symlinked
    folders are listed, not entered.
    """

    def __init__(self, roots: list[Path], depth: int = 3, limit: int = 400, ttl: float = 15.0) -> None:
        self.roots, self.depth, self.limit, self.ttl = roots, depth, limit, ttl
        self._lock = threading.Lock()
        self._cached: tuple[float, list[str]] = (-math.inf, [])

    def get(self) -> list[str]:
        with self._lock:
            at, entries = self._cached
            if time.monotonic() - at < self.ttl:
                return entries
        entries = self.walk()
        with self._lock:
            self._cached = (time.monotonic(), entries)
        return entries

    def walk(self) -> list[str]:
        out: list[str] = []
        for root in self.roots:
            level = [root]
            for _ in range(self.depth):
                following = []
                for folder in level:
                    try:
                        with os.scandir(folder) as it:
                            entries = sorted((e for e in it if _suggestible(e.name)), key=lambda e: e.name)
                    except OSError:
                        continue
                    for entry in entries:
                        out.append(entry.path)
                        if len(out) >= self.limit:
                            return sorted(out)
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                following.append(Path(entry.path))
                        except OSError:
                            continue
                level = following
                if not level:
                    break
        return sorted(out)


def code_spans(text: str) -> Markup:
    """A check's explanation for HTML: the text escaped, its `code` spans shown as code (the explanations are
    written in Markdown for the terminal and Markdown reports)."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no spans at all
        return Markup("`".join(parts))
    return Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))
