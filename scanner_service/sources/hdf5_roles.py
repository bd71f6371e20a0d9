"""Datasets that each hold ONE sample: one group per sample (``/sample_000001/image``, ``/sample_000001/mask``,
``/sample_000001/label``, thousands of groups) and flat folders of samples (``/images/000001`` ...).

Such a dataset's first axis is no axis of samples: an image's rows are not samples, nor its columns features.
Its datasets are gathered into roles (``/sample_*/image``): one role, one set of statistics, channels on the
last axis of H×W×C images (C of 1, 3 or 4), per element of fixed-shape vectors; each dataset of a role is one
sample of it (V005 judges it whole, V004 a channel across every sample of the role).

Detection is conservative (planning only, no data read):

- grouped: at least ``MIN_GROUPS`` sibling groups (under one parent) holding a dataset of the same name with
  the same type and number of dimensions; shapes equal, or images of varying size (H×W×C, one C of 1, 3 or 4).
  Once groups are known to be samples, the other datasets they hold that way join as roles too, whatever their
  shapes (masks of varying size). A group where a 1-D label dataset is as long as the first axis of a dataset
  beside it is the usual N×… layout (folds, splits): it is no sample;
- flat: datasets of one group whose names differ only in their numbers (``000001``, ``img_17``), of one type
  and number of dimensions (shapes as above), more of them than ``FLAT_MIN`` and than the first axis of any
  (ten ``batch_NN`` datasets of 1,000 rows each are batches of samples, not samples).

A file of a few unrelated datasets, or a group of N×… datasets beside their labels, keeps its usual reading.

A sample group that lacks a member its siblings hold (``/sample_000007`` without ``label``: a loader's
``f['sample_000007']['label']`` raises KeyError mid-epoch) is a gap (``member_gaps``): a member of a grouped role is
missing from a sample group of its parent (a group holding a dataset of any grouped role there) when at least
``MEMBER_PERCENT`` % of those groups hold it. An optional member (``/sample_*/notes`` in a few groups) is missing
from none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..items import DatasetMeta
from ..statistics import IMAGE_CHANNELS, MAX_CHANNELS
from .naming import is_label_name

MIN_GROUPS = 8
"""Sibling groups (or numbered datasets of one group) that make a per-sample layout, at least."""
FLAT_MIN = 8
"""Numbered datasets of one group that make a flat per-sample layout, at least (and more than the first axis
of any of them)."""
ROLE_MAX_BYTES = 64 << 20
"""A dataset larger than this is no sample: a role of such datasets is not made (its datasets are read as usual)."""
SHOWN = 5
MEMBER_PERCENT = 90
"""A member of grouped roles held by at least this percentage of the sample groups of its parent is missing from
the others (below it, it is optional: notes, extra views of some samples)."""

_DIGITS = re.compile(r"\d+")


class Described(Protocol):
    """What planning knows of a dataset (``hdf5._Dataset``)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    is_label: bool
    field: tuple[str, ...] | None

    @property
    def rows(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Role:
    """Datasets that are one sample each: their name pattern, sample shape (-1 along an axis whose length
    varies), channel axis and channels (counted in the (1, *shape) view of one sample), and count."""

    name: str
    shape: tuple[int, ...]
    channel_axis: int | None
    channels: int
    members: int
    labels: bool
    grouped: bool = False
    """One dataset of each of sibling groups (``/sample_*/image``), not numbered datasets of one group."""

    def spec(self) -> dict[str, Any]:
        """As a segment carries it to the workers."""
        return {"name": self.name, "shape": list(self.shape), "axis": self.channel_axis, "channels": self.channels}


def sample_channels(shape: tuple[int, ...]) -> tuple[int | None, int]:
    """The channel axis of one sample of ``shape`` in its (1, *shape) view, and the channels: the last axis of
    H×W×C images (C of 1, 3 or 4), the first of C×H×W ones, every element of a vector; else one channel."""
    if len(shape) == 3 and shape[2] in IMAGE_CHANNELS:
        return 3, shape[2]
    if len(shape) == 3 and shape[0] in IMAGE_CHANNELS and shape[2] not in IMAGE_CHANNELS and shape[0] > 0:
        return 1, shape[0]
    if len(shape) == 1 and 0 < shape[0] <= MAX_CHANNELS:
        return 1, shape[0]
    return None, 1


def _parent(name: str) -> tuple[str, str]:
    parent, _, leaf = name.rpartition("/")
    return parent, leaf


def _usual_groups(datasets: Sequence[Described]) -> set[str]:
    """Groups of the usual N×… layout: a 1-D label dataset as long as the first axis of a dataset beside it."""
    by_group: dict[str, list[Described]] = {}
    for d in datasets:
        by_group.setdefault(_parent(d.name)[0], []).append(d)
    usual: set[str] = set()
    for group, members in by_group.items():
        lengths = {d.rows for d in members if d.is_label and len(d.shape) >= 1 and d.rows > 1}
        if lengths and any(not d.is_label and d.shape and d.rows in lengths for d in members):
            usual.add(group)
    return usual


def _shared_shape(members: list[Described]) -> tuple[int, ...] | None:
    """The members' sample shape (-1 along axes that vary); None when they differ in type or dimensions."""
    first = members[0]
    if any(m.dtype != first.dtype or len(m.shape) != len(first.shape) for m in members):
        return None
    return tuple(n if all(m.shape[a] == n for m in members) else -1 for a, n in enumerate(first.shape))


def _image_sizes(shape: tuple[int, ...]) -> bool:
    """Images of varying size: H×W×C with one C of 1, 3 or 4."""
    return len(shape) == 3 and shape[2] in IMAGE_CHANNELS


def _role(
    name: str, shape: tuple[int, ...], members: list[Described], labels_option: str | None, grouped: bool
) -> Role:
    labels = all(m.shape in ((), (1,)) and m.dtype.kind in "fiub" for m in members) and all(
        is_label_name(m.name, labels_option) for m in members
    )
    axis, channels = sample_channels(shape)  # (an axis that varies holds no channels: -1 is none of theirs)
    return Role(name, shape, axis, channels, len(members), labels, grouped)


def _pattern(names: list[str]) -> str:
    """One name for many: their numbers as ``*`` when that makes them one, else ``*``."""
    patterns = {_DIGITS.sub("*", n) for n in names}
    return patterns.pop() if len(patterns) == 1 else "*"


def find_roles(datasets: Sequence[Described], labels_option: str | None) -> dict[str, Role]:
    """The datasets of ``datasets`` that are one sample each, by name, with their role."""
    usual = _usual_groups(datasets)
    candidates = [
        d
        for d in datasets
        if d.field is None and d.dtype.kind in "fiub" and math.prod(d.shape) * d.dtype.itemsize <= ROLE_MAX_BYTES
    ]
    found: dict[str, Role] = {}
    # grouped: /parent/<group>/<leaf>, by (parent, leaf)
    by_leaf: dict[tuple[str, str], list[Described]] = {}
    for d in candidates:
        group, leaf = _parent(d.name)
        if not group or group in usual:
            continue
        by_leaf.setdefault((_parent(group)[0], leaf), []).append(d)
    samples: set[str] = set()
    weak: list[tuple[str, list[Described]]] = []
    for (parent, leaf), members in by_leaf.items():
        if len(members) < MIN_GROUPS:
            continue
        shape = _shared_shape(members)
        if shape is None:
            continue
        if -1 in shape and not _image_sizes(shape):
            weak.append((leaf, members))
            continue
        groups = [_parent(m.name)[0] for m in members]
        samples.update(groups)
        name = f"{parent}/{_pattern([_parent(g)[1] for g in groups])}/{leaf}"
        role = _role(name, shape, members, labels_option, grouped=True)
        found.update((m.name, role) for m in members)
    for leaf, members in weak:  # masks of varying size beside images: known samples only
        groups = [_parent(m.name)[0] for m in members]
        if not all(g in samples for g in groups):
            continue
        shape = _shared_shape(members) or ()
        name = f"{_parent(groups[0])[0]}/{_pattern([_parent(g)[1] for g in groups])}/{leaf}"
        role = _role(name, shape, members, labels_option, grouped=True)
        found.update((m.name, role) for m in members)
    # flat: /group/<numbered leaf>
    numbered: dict[tuple[str, str], list[Described]] = {}
    for d in candidates:
        group, leaf = _parent(d.name)
        if d.name in found or group in usual or d.is_label or not d.shape or not _DIGITS.search(leaf):
            continue
        numbered.setdefault((group, _DIGITS.sub("*", leaf)), []).append(d)
    for (group, pattern), members in numbered.items():
        shape = _shared_shape(members)
        if shape is None or len(members) < max(FLAT_MIN, max(m.rows for m in members) + 1):
            continue
        if -1 in shape and not _image_sizes(shape):
            continue
        role = _role(f"{group}/{pattern}", shape, members, labels_option, grouped=False)
        found.update((m.name, role) for m in members)
    return found


@dataclass(frozen=True, slots=True)
class Gap:
    """A sample group without a member most sample groups of its parent hold."""

    group: str
    """The group's path (``/sample_000007``)."""
    member: str
    """The member it lacks (``label``)."""
    role: Role
    """The role of that member in the groups that hold it."""
    holding: int
    """Sample groups of the parent that hold the member."""
    groups: int
    """Sample groups of the parent."""

    @property
    def parent(self) -> str:
        return _parent(self.group)[0] or "/"


def member_gaps(datasets: Sequence[Described], roles: dict[str, Role]) -> list[Gap]:
    """The sample groups that lack a member of a grouped role held by at least ``MEMBER_PERCENT`` % of the sample
    groups of its parent (the groups there holding a dataset of any grouped role), in path order. A group holding
    a dataset of the member's name that is of no role (another type, a string) does not lack it; nor may one
    whose dataset of that name the walk did not list (the caller looks in the file)."""
    sample_groups: dict[str, set[str]] = {}
    members: dict[tuple[str, str], Role] = {}
    for name, role in roles.items():
        if not role.grouped:
            continue
        group, leaf = _parent(name)
        parent = _parent(group)[0]
        sample_groups.setdefault(parent, set()).add(group)
        members[(parent, leaf)] = role
    held: dict[str, set[str]] = {}
    for d in datasets:
        group, leaf = _parent(d.name)
        held.setdefault(group, set()).add(leaf)
    gaps: list[Gap] = []
    for (parent, leaf), role in members.items():
        groups = sample_groups[parent]
        lacking = [g for g in groups if leaf not in held.get(g, set())]
        holding = len(groups) - len(lacking)
        if lacking and holding * 100 >= MEMBER_PERCENT * len(groups):
            gaps.extend(Gap(g, leaf, role, holding, len(groups)) for g in lacking)
    return sorted(gaps, key=lambda gap: (gap.group, gap.member))


def role_meta(
    rel: str, role: dict[str, Any], dtype: str, shape: tuple[int, ...], missing: tuple[float, ...] = ()
) -> DatasetMeta:
    """The statistics' view of one dataset of ``role`` (``Role.spec``) of file ``rel``: one sample."""
    return DatasetMeta(
        stats_key=f"{rel}::{role['name']}",
        path=rel,
        dataset=role["name"],
        dtype=dtype,
        shape=(1, *shape),
        channel_axis=role["axis"],
        channels=role["channels"],
        missing=missing,
        sample_shape=tuple(role["shape"]),
    )


def roles_text(rel: str, roles: dict[str, Role]) -> list[str]:
    """``file.h5:/sample_*/image (20,000 of 64×64×3)`` for each role of one file."""
    unique = {role.name: role for role in roles.values()}
    out = []
    for role in unique.values():
        shape = "×".join("?" if n < 0 else str(n) for n in role.shape) or "one value"
        what = "labels" if role.labels else f"of {shape}"
        out.append(f"{rel}:{role.name} ({role.members:,} {what})")
    return out
