"""R006 unpaired-record: an ``image-N`` without its ``label-N``, or a ``label-N`` without its ``image-N``.

Readers gather the numbered keys of each shard as runs (``numbered.py``); the merge joins them, and the finalizer
subtracts the numbers one kind covers from the other's: each key left over is reported where it is stored.
"""

from __future__ import annotations

from ..context import ScanContext
from ..location import Location
from ..numbered import IMAGE, LABEL, UNREAD, NumberedKeys, key_of, layout, spans, unpaired
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R006",
    name="unpaired-record",
    severity=Severity.ERROR,
    summary=(
        "Finds, in a text-recognition LMDB (clovaai's deep-text-recognition-benchmark, CRNN, PaddleOCR: "
        "`image-000000001` holding the image, `label-000000001` its text), image records without the label "
        "record of the same number and label records without their image, each at the key that exists."
    ),
    why=(
        "The loaders read sample n as `txn.get(b'label-%09d' % n).decode()` and `txn.get(b'image-%09d' % n)` "
        "for every n from 1 to num-samples: a missing label is `None.decode()`, an AttributeError, and a missing "
        "image `buf.write(None)`, a TypeError, raised when the dataset is built (clovaai's length filter reads "
        "every label) or in a DataLoader worker in the middle of an epoch, at the same sample every epoch. A half "
        "beyond num-samples is never read: a sample silently lost."
    ),
    fix=(
        "Rewrite the pair from the source data (the image and its transcription), or delete the half that is "
        "left and renumber the records so that 1..num-samples are all complete pairs. The detail names the "
        "missing key."
    ),
    message="{count} image or label record{s} whose other half is missing",
)

HALF = {IMAGE: LABEL, LABEL: IMAGE}
WHAT = {IMAGE: "image", LABEL: "text"}


def _unpaired(keys: NumberedKeys, kind: str, cap: int, damaged: bool) -> tuple[int, list[Location]]:
    other = HALF[kind]
    total, first = unpaired(keys.runs.get(kind, []), spans(keys.runs.get(other, [])), cap)
    locations = [
        Location(
            path=keys.path,
            key=key_of(kind, number, digits),
            index=pos,
            detail=(
                f"no {key_of(other, number, digits)} beside this {WHAT[kind]}: sample {number} has no "
                f"{WHAT[other]}" + (UNREAD if damaged else "")
            ),
        )
        for number, pos, digits in first
    ]
    return total, locations


def finalize(ctx: ScanContext) -> None:
    for _path, keys in sorted(ctx.partial.numbered.items()):
        if not layout(keys):
            continue
        count = 0
        locations: list[Location] = []
        for kind in (IMAGE, LABEL):
            n, found = _unpaired(keys, kind, ctx.partial.cap, "R004" in ctx.partial.findings)
            count += n
            locations += found
        locations.sort(key=Location.sort_key)
        ctx.emit_many(CHECK.code, count, count, locations[: ctx.partial.cap])
