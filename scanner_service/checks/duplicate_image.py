"""I013 duplicate-image: byte-identical images; across classes, a label conflict.

Each image's location goes to ``Partial.groups["duplicate-image"]`` under the xxh3 digest of its bytes,
suffixed with its label (``digest:label``) when it has one; merging partials joins equal keys, and the
finalizer joins the keys of one digest: more than one file is a group, more than one label a conflict.
"""

from __future__ import annotations

import xxhash

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..location import Location
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="I013",
    name="duplicate-image",
    severity=Severity.WARNING,
    summary=(
        "Finds groups of byte-identical images (same xxh3 digest of the bytes), and says when the copies "
        "carry "
        "different labels (a label conflict)."
    ),
    why=(
        "Copies weigh an image more than the others, and copies that cross a train/validation split inflate "
        "the validation score. Copies with different labels teach the model two answers for one input: the "
        "loss cannot reach zero on them, and they usually mean a labelling or merging error."
    ),
    fix=(
        "Keep one copy of each group; for a label conflict, decide the right label first. The detail names "
        "the "
        "other copies."
    ),
    message="{count} group{s} of byte-identical images ({values} redundant)",
)

FAMILY = "duplicate-image"
SHOWN = 5


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.format is None or verdict.empty:
        return
    digest = xxhash.xxh3_64_hexdigest(item.data)
    key = digest if item.label is None else f"{digest}:{item.label}"  # no per-file copy of the location
    ctx.partial.group(FAMILY, key, item.location)


def _class_names(ctx: ScanContext) -> list[str]:
    """Class names by id when the scan has a single label stream that names its classes."""
    tallies = list(ctx.partial.labels.values())
    return list(tallies[0].classes) if len(tallies) == 1 else []


def _label_text(label: str, names: list[str]) -> str:
    try:
        i = int(label)
    except ValueError:
        return label
    return f"{i} ({names[i]})" if 0 <= i < len(names) and names[i] != label else label


def finalize(ctx: ScanContext) -> None:
    by_digest: dict[str, tuple[list[Location], set[str]]] = {}
    for key, locs in ctx.partial.groups.get(FAMILY, {}).items():
        digest, _, label = key.partition(":")
        members, labels = by_digest.setdefault(digest, ([], set()))
        members.extend(locs)
        if label:
            labels.add(label)
    groups = [(sorted(m, key=Location.sort_key), lab) for m, lab in by_digest.values() if len(m) > 1]
    if not groups:
        return
    groups.sort(key=lambda g: g[0][0].sort_key())
    names_by_id = _class_names(ctx)
    locs = []
    for members, label_set in groups[: ctx.partial.cap]:
        first, others = members[0], members[1:]
        names = ", ".join(m.short() for m in others[:SHOWN])
        if len(others) > SHOWN:
            names += f" and {len(others) - SHOWN} more"
        text = f"{len(members)} identical copies: also {names}"
        distinct = sorted(label_set, key=lambda x: (len(x), x))
        if len(distinct) > 1:
            text += f"; label conflict: labels {', '.join(_label_text(x, names_by_id) for x in distinct)}"
        locs.append(first.model_copy(update={"detail": text}))
    ctx.emit_many(CHECK.code, len(groups), sum(len(m) - 1 for m, _ in groups), locs)
