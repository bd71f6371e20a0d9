"""What one shard produces, and how shard results merge.

``merge`` is associative and commutative: counts add, location samples keep the smallest ``cap`` in a fixed
order, histograms add, running moments combine with Chan's formula, label runs coalesce by position.
So shard size, shard order and grouping never change the report (floating-point statistics up to rounding).
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .location import Location
from .numbered import NumberedKeys
from .text import Text


class FindingTally(BaseModel):
    """Occurrences of one finding kind: how many places, how many values, a capped sample of places."""

    count: int = 0
    values: int = 0
    locations: list[Location] = Field(default_factory=list)

    def add(self, location: Location, values: int, cap: int) -> None:
        self.count += 1
        self.values += values
        if cap <= 0:
            return
        if len(self.locations) < cap:
            self.locations.append(location)
            if len(self.locations) == cap:
                self.locations.sort(key=Location.sort_key)
        elif location.sort_key() < self.locations[-1].sort_key():
            self.locations[-1] = location
            self.locations.sort(key=Location.sort_key)

    def merged(self, other: FindingTally, cap: int) -> FindingTally:
        keyed = [(loc.sort_key(), loc) for part in (self.locations, other.locations) for loc in part]
        keyed.sort(key=itemgetter(0))  # (each location's key computed once; stable: ties keep their order)
        unique: list[Location] = []
        for _, loc in keyed:
            if len(unique) >= cap:
                break
            if not unique or unique[-1] != loc:
                unique.append(loc)
        return FindingTally(count=self.count + other.count, values=self.values + other.values, locations=unique)

    def sorted_locations(self) -> list[Location]:
        return sorted(self.locations, key=Location.sort_key)


class DatasetStats(BaseModel):
    """Running moments of one numeric dataset, per channel (feature) where it has channels."""

    # Finite data can overflow a moment (the squares of values above 1e154 in float64): the service's JSON
    # between shard and merge keeps such an infinity (JSON's null would not validate as a number).
    model_config = ConfigDict(ser_json_inf_nan="constants")

    path: Text
    dataset: Text
    dtype: str
    shape: list[int]
    channel_axis: int | None = None
    count: list[int]
    mean: list[float]
    m2: list[float]
    min: list[float]
    max: list[float]
    nan: int = 0
    inf: int = 0
    rows: int | None = None
    """Samples seen, where the source counts them block by block (an LMDB shape); else ``shape[0]``."""

    @property
    def samples(self) -> int:
        return self.rows if self.rows is not None else (self.shape[0] if self.shape else 0)

    @classmethod
    def empty(
        cls, path: str, dataset: str, dtype: str, shape: list[int], channel_axis: int | None, channels: int
    ) -> DatasetStats:
        return cls(
            path=path,
            dataset=dataset,
            dtype=dtype,
            shape=shape,
            channel_axis=channel_axis,
            count=[0] * channels,
            mean=[0.0] * channels,
            m2=[0.0] * channels,
            min=[0.0] * channels,
            max=[0.0] * channels,
        )

    def merged(self, other: DatasetStats) -> DatasetStats:
        return DatasetStats.combined([self, other])

    @staticmethod
    def combined(parts: list[DatasetStats]) -> DatasetStats:
        """The statistics of the union of ``parts`` (Chan's formula for any number of parts, per channel,
        vectorised: one pass whatever the number of shards)."""
        if len(parts) == 1:
            return parts[0]
        n = np.array([p.count for p in parts], np.float64)
        means = np.array([p.mean for p in parts], np.float64)
        seen = n > 0
        total = n.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            mean = np.where(total > 0, (n * means).sum(axis=0) / np.maximum(total, 1), 0.0)
            spread = np.where(seen, n * (means - mean) ** 2, 0.0).sum(axis=0)
            m2 = np.array([p.m2 for p in parts], np.float64).sum(axis=0) + spread
        lo = np.where(seen, np.array([p.min for p in parts], np.float64), np.inf).min(axis=0)
        hi = np.where(seen, np.array([p.max for p in parts], np.float64), -np.inf).max(axis=0)
        return parts[0].model_copy(
            update={
                "count": np.array([p.count for p in parts], np.int64).sum(axis=0).tolist(),
                "mean": mean.tolist(),
                "m2": m2.tolist(),
                "min": np.where(total > 0, lo, 0.0).tolist(),
                "max": np.where(total > 0, hi, 0.0).tolist(),
                "nan": sum(p.nan for p in parts),
                "inf": sum(p.inf for p in parts),
                "rows": None if parts[0].rows is None else sum(p.rows or 0 for p in parts),
            }
        )


class LabelRun(BaseModel):
    """A run of one label in storage order, at global position ``start`` of its label stream."""

    start: int
    length: int
    label: int
    path: Text
    dataset: Text | None = None
    index: int | None = None
    key: Text | None = None
    line: int | None = None


class OneHotTally(BaseModel):
    """The rows of an N×K label array, by kind: whether it is one-hot, multi-hot, soft or no labels is decided
    on the merged counts (``labels.onehot_mode``), so the rows a kind makes invalid wait here with their places."""

    width: int = 0
    """K, the number of columns (classes)."""
    one: int = 0
    """Rows of 0/1 values with exactly one 1."""
    zero: int = 0
    """Rows of 0/1 values, all 0."""
    several: int = 0
    """Rows of 0/1 values with several 1s."""
    soft: int = 0
    """Rows of values in [0, 1] summing to 1, not all 0/1 (label smoothing, probabilities)."""
    other: int = 0
    """Rows of finite values of which one is neither 0 nor 1 (and not soft)."""
    nonfinite: int = 0
    """Rows holding NaN or Inf: the numeric checks report them."""
    positives: dict[int, int] = Field(default_factory=dict)
    """Per class, the rows of 0/1 values that have it set (multi-hot class counts)."""
    zero_at: FindingTally = Field(default_factory=FindingTally)
    several_at: FindingTally = Field(default_factory=FindingTally)
    other_at: FindingTally = Field(default_factory=FindingTally)
    """Rows of values other than 0/1, soft rows included (invalid where the stream is one-hot or multi-hot)."""
    beyond_at: FindingTally = Field(default_factory=FindingTally)
    """Rows with a 1 in a column ≥ --num-classes."""

    def merged(self, other: OneHotTally, cap: int) -> OneHotTally:
        pos = dict(self.positives)
        for label, n in other.positives.items():
            pos[label] = pos.get(label, 0) + n
        return OneHotTally(
            width=max(self.width, other.width),
            one=self.one + other.one,
            zero=self.zero + other.zero,
            several=self.several + other.several,
            soft=self.soft + other.soft,
            other=self.other + other.other,
            nonfinite=self.nonfinite + other.nonfinite,
            positives=pos,
            zero_at=self.zero_at.merged(other.zero_at, cap),
            several_at=self.several_at.merged(other.several_at, cap),
            other_at=self.other_at.merged(other.other_at, cap),
            beyond_at=self.beyond_at.merged(other.beyond_at, cap),
        )


class LabelTally(BaseModel):
    """Class labels of one label stream (the labels of a dataset, in storage order)."""

    path: Text = "."
    dataset: Text | None = None
    classes: list[Text] = Field(default_factory=list)
    """Class names by id, when the source knows them (ImageFolder folders)."""
    dtype_kind: str = "i"
    total: int = 0
    histogram: dict[int, int] = Field(default_factory=dict)
    nonint: int = 0
    nonint_locations: FindingTally = Field(default_factory=FindingTally)
    nan_locations: FindingTally = Field(default_factory=FindingTally)
    inf_locations: FindingTally = Field(default_factory=FindingTally)
    """NaN and infinite float labels: label-invalid where the labels are classes, nan-value and inf-value where
    they are regression targets (which the merged counts decide)."""
    runs: list[LabelRun] = Field(default_factory=list)
    run_threshold: int = 0
    onehot: OneHotTally | None = None
    """Rows of an N×K array of 0/1 labels (one-hot or multi-hot), None for a stream of class ids."""

    def merged(self, other: LabelTally, cap: int) -> LabelTally:
        hist = dict(self.histogram)
        for label, n in other.histogram.items():
            hist[label] = hist.get(label, 0) + n
        onehot = self.onehot or other.onehot
        if self.onehot is not None and other.onehot is not None:
            onehot = self.onehot.merged(other.onehot, cap)
        return LabelTally(
            path=self.path if self.path != "." else other.path,
            dataset=self.dataset or other.dataset,
            classes=self.classes if len(self.classes) >= len(other.classes) else other.classes,
            dtype_kind=max(self.dtype_kind, other.dtype_kind, key="biuf".find),
            total=self.total + other.total,
            histogram=hist,
            nonint=self.nonint + other.nonint,
            nonint_locations=self.nonint_locations.merged(other.nonint_locations, cap),
            nan_locations=self.nan_locations.merged(other.nan_locations, cap),
            inf_locations=self.inf_locations.merged(other.inf_locations, cap),
            runs=coalesce_runs([*self.runs, *other.runs], max(self.run_threshold, other.run_threshold)),
            run_threshold=max(self.run_threshold, other.run_threshold),
            onehot=onehot,
        )


def coalesce_runs(runs: Iterable[LabelRun], threshold: int) -> list[LabelRun]:
    """Join runs that touch and share a label. Keeps every run: short ones may still join neighbours."""
    out: list[LabelRun] = []
    for run in sorted(runs, key=lambda r: r.start):
        last = out[-1] if out else None
        if last is not None and last.label == run.label and last.start + last.length == run.start:
            out[-1] = last.model_copy(update={"length": last.length + run.length})
        else:
            out.append(run)
    # A short run flanked by runs of other labels on both sides can never grow: drop it.
    kept: list[LabelRun] = []
    for i, run in enumerate(out):
        inner = (
            0 < i < len(out) - 1
            and out[i - 1].start + out[i - 1].length == run.start
            and run.start + run.length == out[i + 1].start
        )
        if run.length > threshold or not inner:
            kept.append(run)
    return kept


class Partial(BaseModel):
    """The mergeable result of scanning one or more shards."""

    cap: int = 20
    shards: int = 0
    items: int = 0
    bytes: int = 0
    findings: dict[str, FindingTally] = Field(default_factory=dict)
    stats: dict[str, DatasetStats] = Field(default_factory=dict)
    labels: dict[str, LabelTally] = Field(default_factory=dict)
    counters: dict[str, int] = Field(default_factory=dict)
    groups: dict[str, dict[str, list[Location]]] = Field(default_factory=dict)
    digests: dict[str, list[str]] = Field(default_factory=dict)
    """Content digests (with what their check adds to the key) and the items that hold them, each as its
    location's compact JSON. One entry per item of the dataset: as a ``Location`` each (800 bytes) an image
    folder of a million files held 0.8 GB here; parsed back only for the digests met more than once."""
    numbered: dict[str, NumberedKeys] = Field(default_factory=dict)
    """The numbered keys of text-recognition LMDBs (``image-N``, ``label-N``) by data file, as runs."""
    info: dict[str, str] = Field(default_factory=dict)

    def add(self, code: str, location: Location, values: int = 1) -> None:
        tally = self.findings.get(code)
        if tally is None:
            tally = self.findings[code] = FindingTally()
        tally.add(location, values, self.cap)

    def add_many(self, code: str, places: int, values: int, locations: Iterable[Location]) -> None:
        """Add ``places`` occurrences at once; ``locations`` are the first of them, in order."""
        tally = self.findings.get(code)
        if tally is None:
            tally = self.findings[code] = FindingTally()
        sample = FindingTally(count=places, values=values, locations=list(locations)[: self.cap])
        self.findings[code] = tally.merged(sample, self.cap)

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def group(self, family: str, key: str, location: Location) -> None:
        """Remember ``location`` under ``key`` of ``family`` (a few per key: samples of a kind)."""
        self.groups.setdefault(family, {}).setdefault(key, []).append(location)

    def remember(self, key: str, location: Location) -> None:
        """Remember ``location`` under a content digest ``key`` (one per item: see ``digests``)."""
        self.digests.setdefault(key, []).append(location.model_dump_json(exclude_none=True))


def merge(partials: Iterable[Partial]) -> Partial:
    """Merge any number of partials; the result does not depend on their order or grouping.

    One pass over all of them: location groups are gathered and sorted once, and the result is assembled
    from parts that are already valid (no revalidation of every location per merge step).
    """
    parts = list(partials)
    if not parts:
        return Partial()
    if len(parts) == 1:
        return parts[0]
    cap = max(p.cap for p in parts)
    findings: dict[str, FindingTally] = {}
    stats: dict[str, list[DatasetStats]] = {}
    labels: dict[str, LabelTally] = {}
    counters: dict[str, int] = {}
    groups: dict[str, dict[str, list[Location]]] = {}
    digests: dict[str, list[str]] = {}
    numbered: dict[str, NumberedKeys] = {}
    info: dict[str, str] = {}
    for p in parts:
        for code, tally in p.findings.items():
            findings[code] = findings[code].merged(tally, cap) if code in findings else tally
        for key, st in p.stats.items():
            stats.setdefault(key, []).append(st)
        for key, lt in p.labels.items():
            labels[key] = labels[key].merged(lt, cap) if key in labels else lt
        for key, n in p.counters.items():
            counters[key] = counters.get(key, 0) + n
        for family, entries in p.groups.items():
            target = groups.setdefault(family, {})
            for key, locs in entries.items():
                target.setdefault(key, []).extend(locs)
        for key, held in p.digests.items():
            known = digests.get(key)
            if known is None:
                digests[key] = list(held)
            else:
                known.extend(held)
        for key, nk in p.numbered.items():
            numbered[key] = numbered[key].merged(nk) if key in numbered else nk
        info.update(p.info)
    for entries in groups.values():
        for locs in entries.values():
            if len(locs) > 1:  # most keys (content digests) hold one location: nothing to sort, no key to compute
                locs.sort(key=Location.sort_key)
    return Partial.model_construct(
        cap=cap,
        shards=sum(p.shards for p in parts),
        items=sum(p.items for p in parts),
        bytes=sum(p.bytes for p in parts),
        findings=findings,
        stats={key: DatasetStats.combined(parts) for key, parts in stats.items()},
        labels=labels,
        counters=counters,
        groups=groups,
        digests=digests,
        numbered=numbered,
        info=info,
    )
