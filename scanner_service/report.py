"""The versioned report: what a scan found, where, and whether the dataset passes.

``build_report`` turns a plan's source description and the merged partial into a ``Report``. The JSON
schema of ``Report`` is kept in ``scanner_service/schema/report.schema.json`` (``dscan schema`` prints it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from . import __version__, checks
from .config import ScanConfig
from .engine import finalize
from .labels import (
    absent_probability,
    class_counts,
    expected_classes,
    imbalance_ratio,
    inferred_classes,
    is_classification,
    onehot_mode,
    smallest_batch,
    splits_classes,
)
from .location import Location
from .partial import DatasetStats, Partial
from .severity import FailOn, Severity
from .sources.base import SourceInfo
from .text import Text

SCHEMA_VERSION = "1.0"
MISSING_LISTED = 1000
"""Classes without a sample listed in a label report (and in its histogram): K can reach a million."""


class Summary(BaseModel):
    errors: int = Field(description="occurrences of error findings")
    warnings: int = Field(description="occurrences of warning findings")
    infos: int = 0
    items_scanned: int
    bytes_scanned: int
    shards: int
    duration_s: float
    fail_on: FailOn
    passed: bool = Field(description="no finding at or above fail_on")


class Finding(BaseModel):
    code: str
    name: str
    severity: Severity
    message: str
    count: int = Field(description="places affected (samples, files, chunks, records, classes)")
    values: int = Field(description="values affected (for value checks), else equal to count")
    locations: list[Location] = Field(description="the first locations, at most max_locations")
    truncated: bool = Field(description="more locations exist than are listed")


class ClassRow(BaseModel):
    label: int
    name: Text | None = None
    count: int
    fraction: float
    p_absent: float | None = Field(None, description="P(class absent from a batch of batch_size)")
    min_batch_size: int | None = Field(None, description="smallest batch size with p_absent <= threshold")
    missing: bool = False


class LabelReport(BaseModel):
    stream: Text
    path: Text
    dataset: Text | None = None
    kind: str = Field(description="classes, or continuous (regression targets: class checks skipped)")
    total: int
    num_classes: int | None = None
    distinct: int
    missing: list[int] = Field(
        default_factory=list, description="classes without a sample (the first 1,000; missing_count counts all)"
    )
    missing_count: int = Field(0, description="how many classes have no sample")
    imbalance_ratio: float | None = None
    batch_size: int | None = None
    threshold: float
    histogram: list[ClassRow]


class Statistics(BaseModel):
    path: Text
    dataset: Text
    dtype: str
    shape: list[int]
    count: int
    nan: int
    inf: int
    min: float | None = Field(description="null when no finite value was read")
    max: float | None = Field(description="null when no finite value was read")
    mean: float | None = Field(description="null when no finite value was read, or the sum overflowed float64")
    std: float | None = Field(description="null when no finite value was read, or the sum overflowed float64")
    channels: list[dict[str, float | int | None]] = Field(
        default_factory=list,
        description="per channel (axis 1; the last axis of N×H×W×C images) count, min, max, mean, std; up to 256",
    )


class Tool(BaseModel):
    name: str = "dscan"
    version: str = __version__


CHECK_FAMILIES = {
    "hdf5": "VLS",
    "hdf5-list": "VLS",
    "numpy": "VLS",
    "images": "IVLS",
    "image-file": "IVLS",
    "image-list": "IVLS",
    "lmdb": "RIVLS",
}
"""The check families (code letters) that apply to each kind of dataset: an HDF5 scan runs no image check."""

_IMAGES_NEVER = frozenset({"V003", "V004", "V005", "V006", "L001", "S002", "S003", "S007"})
NEVER_APPLY = {
    "images": _IMAGES_NEVER,
    "image-file": _IMAGES_NEVER,
    "image-list": _IMAGES_NEVER,
    "numpy": frozenset({"V006", "S003", "S005", "S007"}),
    "lmdb": frozenset({"V006", "L001", "S002", "S003", "S005", "S007", "I014"}),
    "hdf5": frozenset({"S005"}),
}
"""Checks of an applicable family that never run on a kind of dataset: of the value checks, images get only
nan-value and inf-value (float pixels), and an image has no chunk, filter or sample group."""


def applicable_checks(kind: str, select: Iterable[str], ignore: Iterable[str]) -> frozenset[str]:
    """The codes that ``select`` and ``ignore`` enable and that apply to a ``kind`` dataset. None left means a
    scan whose pass says nothing about the data (``--select I`` on an HDF5 file): a bad option, not a verdict."""
    families = CHECK_FAMILIES.get(kind)
    never = NEVER_APPLY.get(kind, frozenset())
    enabled = checks.enabled_codes(select, ignore)
    return frozenset(code for code in enabled if (families is None or code[0] in families) and code not in never)


def no_check_applies(kind: str) -> str:
    """The message for select and ignore that leave no check applying to a ``kind`` dataset."""
    letters = CHECK_FAMILIES.get(kind, "")
    families = f" (its checks: {', '.join(letters)})" if letters else ""
    return f"select and ignore leave no check that applies to this {kind} dataset{families}: `dscan checks` lists them"


class Report(BaseModel):
    schema_version: str = SCHEMA_VERSION
    tool: Tool = Field(default_factory=Tool)
    created: str
    source: SourceInfo
    config: ScanConfig
    summary: Summary
    findings: list[Finding]
    labels: list[LabelReport]
    statistics: list[Statistics]
    info: dict[Text, Text] = Field(default_factory=dict)

    def exit_code(self) -> int:
        return 0 if self.summary.passed else 1

    def checks_run(self) -> frozenset[str]:
        """The codes of the checks that ran: enabled, of a family that applies to the kind of dataset and that
        met something of its own in this one (``unmet_families``), or with a finding. None left means a pass
        that says nothing about the data."""
        found = {f.code for f in self.findings}
        enabled = checks.enabled_codes(self.config.select, self.config.ignore)
        applicable = applicable_checks(self.source.kind, self.config.select, self.config.ignore)
        unmet = self.unmet_families()
        return frozenset(code for code in applicable if code[0] not in unmet) | (enabled & found)

    def unmet_families(self) -> dict[str, str]:
        """The families of checks that apply to the kind of dataset but met nothing of theirs in this one, each
        with what it lacked: image checks on an LMDB whose records hold no image (no decoder judged one), label
        checks where no label stream was read."""
        unmet = {}
        if self.source.kind == "lmdb" and not any(key.startswith("decoder.") for key in self.info):
            unmet["I"] = "its records hold no image"
        if not self.labels:
            unmet["L"] = "no labels were read from it"
        return unmet

    def no_check_reason(self) -> str:
        """Why no check ran (``checks_run`` is empty): the message of the usage error that replaces the pass."""
        kind = self.source.kind
        if not applicable_checks(kind, self.config.select, self.config.ignore):
            return no_check_applies(kind)
        selected = {code[0] for code in applicable_checks(kind, self.config.select, self.config.ignore)}
        lacks = "; ".join(f"{why} ({family})" for family, why in self.unmet_families().items() if family in selected)
        return (
            f"select and ignore leave only checks that had nothing to check in this {kind} dataset: {lacks}. "
            "`dscan checks` lists the checks"
        )


def _round(x: float | None) -> float | None:
    """``x`` to 7 significant digits; None for NaN and ±Inf (a sum that overflowed), which JSON cannot hold."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.7g}")


def _channel(stats: DatasetStats, c: int) -> dict[str, float | int | None]:
    n = stats.count[c]
    return {
        "channel": c,
        "count": n,
        "min": _round(stats.min[c]) if n else None,
        "max": _round(stats.max[c]) if n else None,
        "mean": _round(stats.mean[c]) if n else None,
        "std": _round(math.sqrt(stats.m2[c] / n)) if n else None,
    }


CHANNEL_ROWS = 100_000
"""Per-channel rows a report's statistics list at most. Past it (an HDF5 file of 20,000 images stored one per
dataset lists 64 channels each: a report of 240 MB), no dataset lists its channels; each keeps its totals."""
CHANNELS_OMITTED = "statistics.channels"
"""The report ``info`` note for per-channel statistics not listed."""


def _lists_channels(stats: DatasetStats) -> bool:
    return stats.channel_axis is not None and 1 < len(stats.count) <= 256


def _statistics(stats: DatasetStats, channels: bool = True) -> Statistics:
    n = sum(stats.count)
    mean = m2 = 0.0
    seen = 0
    for nc, mean_c, m2_c in zip(stats.count, stats.mean, stats.m2, strict=True):
        if not nc:
            continue
        total = seen + nc
        delta = mean_c - mean
        mean += delta * nc / total
        m2 += m2_c + delta * delta * seen * nc / total
        seen = total
    if all(stats.count):  # (many small datasets: this runs once per dataset)
        lows, highs = stats.min, stats.max
    else:
        lows = [lo for lo, nc in zip(stats.min, stats.count, strict=True) if nc]
        highs = [hi for hi, nc in zip(stats.max, stats.count, strict=True) if nc]
    return Statistics(
        path=stats.path,
        dataset=stats.dataset,
        dtype=stats.dtype,
        shape=[stats.samples, *stats.shape[1:]] if stats.shape else stats.shape,
        count=n,
        nan=stats.nan,
        inf=stats.inf,
        min=_round(min(lows)) if lows else None,
        max=_round(max(highs)) if highs else None,
        mean=_round(mean) if n else None,
        std=_round(math.sqrt(m2 / n)) if n else None,
        channels=[_channel(stats, c) for c in range(len(stats.count))] if channels and _lists_channels(stats) else [],
    )


def _labels(partial: Partial, config: ScanConfig) -> list[LabelReport]:
    out = []
    for stream, tally in sorted(partial.labels.items()):
        classes = is_classification(tally, config.num_classes)
        names = expected_classes(partial, stream, config.num_classes) if classes else None
        counts, total = class_counts(tally, config.num_classes)  # multi-hot: rows that set each class
        absent = [c for c in range(len(names)) if not counts.get(c)] if names else []
        ids = sorted({c for c, n in counts.items() if n} | set(absent[:MISSING_LISTED])) if classes else []
        rows = []
        for label in ids:
            n = counts.get(label, 0)
            p = absent_probability(total, n, config.batch_size) if config.batch_size and total else None
            rows.append(
                ClassRow(
                    label=label,
                    name=names[label] if names and label < len(names) and names[label] != str(label) else None,
                    count=n,
                    fraction=_round(n / total if total else 0.0) or 0.0,
                    p_absent=_round(p),
                    min_batch_size=smallest_batch(total, n, config.batch_absence_threshold)
                    if config.batch_size and n
                    else None,
                    missing=n == 0,
                )
            )
        out.append(
            LabelReport(
                stream=stream,
                path=tally.path,
                dataset=tally.dataset,
                kind="classes" if classes else "continuous",
                total=tally.total,
                num_classes=len(names) if names else None,
                distinct=len([n for n in counts.values() if n]),
                missing=[r.label for r in rows if r.missing],
                missing_count=len(absent),
                imbalance_ratio=_round(imbalance_ratio(counts)) if classes else None,
                batch_size=config.batch_size,
                threshold=config.batch_absence_threshold,
                histogram=rows,
            )
        )
    return out


ONEHOT_NOTE = "labels.onehot "
"""Prefix of the report ``info`` note, one per N×K label array, that says how it was read."""


def _onehot_notes(partial: Partial, config: ScanConfig) -> dict[str, str]:
    """How each N×K label array was read (one-hot, multi-hot, soft labels, not labels): no silent skip."""
    out = {}
    for stream, tally in sorted(partial.labels.items()):
        oh = tally.onehot
        if oh is None:
            continue
        mode, k = onehot_mode(oh), oh.width
        rows = f"{tally.total:,} rows of {k} columns"  # (the note's key names the stream)
        if mode == "onehot":
            text = f"{rows}, one-hot labels: read as class ids (the column of each row's 1), {k} classes"
        elif mode == "multihot":
            text = (
                f"{rows}, multi-hot labels ({oh.several:,} rows set several classes): each class counted by the rows "
                "that set it for label-missing-class and label-batch-absence; rows with no class are no finding; "
                "label-sorted-storage does not judge them"
            )
        elif mode == "soft":
            text = (
                f"{rows}, soft labels ({oh.soft:,} rows of probabilities summing to 1, label smoothing?): not one-hot, "
                "no label check ran on them"
            )
        else:
            text = f"{rows}, values other than 0 and 1: not read as labels, no label check ran on them"
        if mode in ("onehot", "multihot") and config.num_classes is not None and config.num_classes != k:
            text += f"; --num-classes {config.num_classes} differs from its {k} columns" + (
                f": 1s in columns ≥ {config.num_classes} are label-invalid" if config.num_classes < k else ""
            )
        if oh.nonfinite:
            rows_hold = "row holds" if oh.nonfinite == 1 else "rows hold"
            text += f"; {oh.nonfinite:,} {rows_hold} NaN or Inf (reported by nan-value or inf-value)"
        out[ONEHOT_NOTE + stream] = text
    return out


INFERRED_NOTE = "labels.inferred "
"""Prefix of the report ``info`` note, one per stream of class ids whose K the labels' own holes gave."""


def _inferred_notes(partial: Partial, config: ScanConfig) -> dict[str, str]:
    """Where the class count K came from the labels (``inferred_classes``): said, with how to set it."""
    if config.num_classes is not None:
        return {}
    out = {}
    for stream, tally in sorted(partial.labels.items()):
        if not is_classification(tally, None):
            continue
        k = inferred_classes(tally)
        together = splits_classes(partial, stream) if not tally.classes else None
        if together is not None and together[0] > (k or 0):
            k, splits = together
            out[INFERRED_NOTE + stream] = (
                f"{k} classes (0..{k - 1}) taken from the largest label of the splits {', '.join(splits)} together, "
                "as no --num-classes was given: this split lacks some of them; --num-classes K sets the count"
            )
        elif k is not None:
            out[INFERRED_NOTE + stream] = (
                f"{k} classes (0..{k - 1}) taken from the largest label, as no --num-classes was given: the labels "
                "skip some classes below it; --num-classes K sets the count"
            )
    return out


NO_LABELS = "labels.none"
"""The report ``info`` note for label options (``--num-classes``, ``--batch-size``) given to a dataset without
labels."""


def build_report(source: SourceInfo, merged: Partial, config: ScanConfig, duration_s: float) -> Report:
    """The final report from the merged partial of every shard (plan findings included)."""
    final = finalize(merged, config)
    fail_on = FailOn(config.fail_on)
    findings = []
    totals = {Severity.ERROR: 0, Severity.WARNING: 0, Severity.INFO: 0}
    for code, tally in final.findings.items():
        if tally.count == 0:
            continue
        check = checks.BY_CODE[code]
        totals[check.severity] += tally.count
        findings.append(
            Finding(
                code=code,
                name=check.name,
                severity=check.severity,
                message=check.format_message(tally.count, tally.values),
                count=tally.count,
                values=tally.values,
                locations=tally.sorted_locations()[: config.max_locations],
                truncated=tally.count > min(len(tally.locations), config.max_locations),
            )
        )
    findings.sort(key=lambda f: (-f.severity.rank, f.code))
    passed = not any(fail_on.fails(f.severity) for f in findings)
    info = dict(final.info)
    info.update(_onehot_notes(final, config))
    info.update(_inferred_notes(final, config))
    unused = [f"--{o}" for o, v in (("num-classes", config.num_classes), ("batch-size", config.batch_size)) if v]
    if unused and not final.labels:  # a gate that asked for label checks must not pass without a word
        info[NO_LABELS] = (
            f"{' and '.join(unused)} given, but no class labels were found in the dataset: no label check ran "
            "(HDF5 and NumPy: name the labels with --labels; images: class folders, or a list file with labels "
            "(a CSV's label column by another name: --labels NAME); "
            "LMDB: Datum or msgpack labels)"
        )
    stats = [s for _, s in sorted(final.stats.items())]
    rows = sum(len(s.count) for s in stats if _lists_channels(s))
    if rows > CHANNEL_ROWS:
        info[CHANNELS_OMITTED] = (
            f"per-channel statistics not listed: {rows:,} channels in {len(stats):,} datasets (a report lists at "
            f"most {CHANNEL_ROWS:,}); every dataset's totals are"
        )
    return Report(
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        source=source,
        config=config,
        summary=Summary(
            errors=totals[Severity.ERROR],
            warnings=totals[Severity.WARNING],
            infos=totals[Severity.INFO],
            items_scanned=final.items,
            bytes_scanned=final.bytes,
            shards=final.shards,
            duration_s=round(duration_s, 3),
            fail_on=fail_on,
            passed=passed,
        ),
        findings=findings,
        labels=_labels(final, config),
        statistics=[_statistics(s, rows <= CHANNEL_ROWS) for s in stats],
        info=dict(sorted(info.items())),
    )
