"""R003 record-shape-mismatch: records whose shape differs from the shape most records have."""

from __future__ import annotations

from ..context import ScanContext
from ..records import RecordTally
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R003",
    name="record-shape-mismatch",
    severity=Severity.WARNING,
    summary=(
        "Finds records whose shape (a Datum's channels×height×width, an .npy array's shape) differs from the "
        "shape most records of the database have (records already reported as malformed do not count). When "
        "no shape covers half of the records, or two shapes are as common, shapes are taken to vary by design "
        "and nothing is reported."
    ),
    why=(
        "Caffe's Data layer sizes its blobs from the first record and aborts when a later one differs; a "
        "PyTorch default collate fails to stack tensors of different shapes. Either way the run dies when a "
        "batch first meets the odd record, which with shuffling can be late."
    ),
    fix=(
        "Resize or regenerate the listed records to the majority shape, or remove them. If the database mixes "
        "shapes on purpose, resize in the data layer (Caffe's transform_param, a Resize transform)."
    ),
    message="{count} record{s} whose shape differs from the majority",
)

COUNTER = "R003"
"""Counter names are ``R003<TAB>path<TAB>shape``; groups ``R003`` hold sample locations by ``path<TAB>shape``."""


def on_records(item: RecordTally, summary: object, ctx: ScanContext) -> None:
    for shape, n in item.shapes.items():
        ctx.partial.count(f"{COUNTER}\t{item.path}\t{shape}", n)
    for shape, locations in item.samples.items():
        for location in locations:
            ctx.partial.group(COUNTER, f"{item.path}\t{shape}", location)


def finalize(ctx: ScanContext) -> None:
    by_path: dict[str, dict[str, int]] = {}
    for name, n in ctx.partial.counters.items():
        code, sep, rest = name.partition("\t")
        if code == COUNTER and sep:
            path, _, shape = rest.partition("\t")
            by_path.setdefault(path, {})[shape] = n
    samples = ctx.partial.groups.get(COUNTER, {})
    for path, shapes in sorted(by_path.items()):
        total = sum(shapes.values())
        majority, most = min(shapes.items(), key=lambda kv: (-kv[1], kv[0]))
        tied = sum(n == most for n in shapes.values()) > 1
        if most * 2 < total or len(shapes) < 2 or tied:  # no shape most records have
            continue
        odd = {shape: n for shape, n in shapes.items() if shape != majority}
        locations = [
            loc.model_copy(update={"detail": f"shape {shape} ({_records(n)}); most records are {majority} ({most:,})"})
            for shape, n in odd.items()
            for loc in samples.get(f"{path}\t{shape}", [])
        ]
        locations.sort(key=lambda loc: loc.sort_key())
        places = sum(odd.values())
        ctx.emit_many(CHECK.code, places, places, locations[: ctx.partial.cap])


def _records(n: int) -> str:
    return f"{n:,} record{'s' if n != 1 else ''}"
