"""R007 sample-count-mismatch: a text-recognition LMDB's ``num-samples`` that is missing, no count, or that
disagrees with the numbers its ``image-N`` and ``label-N`` records cover (1..num-samples, exactly).

Judged after the merge from the runs of numbered keys (``numbered.py``), once per database. A number with only
one half is unpaired-record's; this check reports the numbers in 1..num-samples with neither half, and the
records outside 1..num-samples.
"""

from __future__ import annotations

from ..context import ScanContext
from ..numbered import (
    IMAGE,
    LABEL,
    UNREAD,
    NumberedKeys,
    Span,
    count_location,
    difference,
    layout,
    sample_count,
    size,
    spans,
    spans_text,
    union,
)
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R007",
    name="sample-count-mismatch",
    severity=Severity.ERROR,
    summary=(
        "Finds, in a text-recognition LMDB (`image-000000001`, `label-000000001` and `num-samples`, as clovaai's "
        "deep-text-recognition-benchmark, CRNN and PaddleOCR write them), a `num-samples` record that is missing, "
        "holds no count, or disagrees with the numbers the image and label records cover: the loaders read "
        "numbers 1 to num-samples, so they must be exactly the numbers present."
    ),
    why=(
        "The loaders take the dataset's length from `int(txn.get(b'num-samples'))`: without the record that is "
        "a TypeError, with text in it a ValueError, before the first batch. A count larger than the samples "
        "present (or samples numbered from 0, or a gap) makes `__getitem__` fetch records that do not exist: "
        "`None.decode()`, an AttributeError in the middle of an epoch. A smaller count leaves the samples after "
        "it unused, silently."
    ),
    fix=(
        "Write the number of samples to `num-samples` (as ASCII digits) and number the samples 1 to that count "
        "without gaps; when records were lost, rebuild the database from the source list. The detail gives the "
        "count and the numbers present."
    ),
    message="num-samples disagrees with the samples present in {count} database{s}",
)


def _present(keys: NumberedKeys) -> tuple[list[Span], int]:
    """The numbers with an image or a label, and how many of them have both."""
    images, labels = spans(keys.runs.get(IMAGE, [])), spans(keys.runs.get(LABEL, []))
    both = size(images) - size(difference(images, labels))
    return union([*images, *labels]), both


def _numbers(found: list[Span], verb: str) -> str:
    """``number 20 has`` or ``5 numbers (21-25) have``: ``verb`` given in the plural (have, lie)."""
    n = size(found)
    if n == 1:
        return f"number {found[0][0]:,} {'has' if verb == 'have' else verb + 's'}"
    return f"{n:,} numbers ({spans_text(found)}) {verb}"


def problem(keys: NumberedKeys) -> str | None:
    """What is wrong with the database's ``num-samples``, None when it matches the numbers present."""
    present, pairs = _present(keys)
    return _problem(keys, present, pairs)


def _problem(keys: NumberedKeys, present: list[Span], pairs: int) -> str | None:
    numbered = f"the image and label records are numbered {spans_text(present)}, with {pairs:,} complete pairs"
    if not present:
        numbered = "there are no image-N or label-N records"
    if keys.count_at is None:
        return (
            f"no num-samples record: the loaders' int(txn.get(b'num-samples')) fails with TypeError before the "
            f"first sample; {numbered}"
        )
    n = sample_count(keys.count)
    if n is None:
        negative = keys.count is not None and keys.count.strip().startswith("-")
        fails = (
            "the loaders' __len__ returns it and len() raises ValueError"
            if negative
            else "the loaders' int(txn.get(b'num-samples')) fails with ValueError"
        )
        return f"num-samples holds {keys.count!r}, not a number of samples: {fails} before the first sample; {numbered}"
    read = [(1, n + 1)] if n else []
    holes, unread = difference(read, present), difference(present, read)
    if not holes and not unread:
        return None
    text = f"num-samples is {n:,}, but {numbered}"
    if holes:
        text += (
            f"; {_numbers(holes, 'have')} neither an image nor a label: the loaders read every number from 1 to "
            "num-samples and fail there (AttributeError: 'NoneType' object has no attribute 'decode')"
        )
    if unread:
        text += f"; {_numbers(unread, 'lie')} outside 1-{n:,}: never read"
        if unread[0][0] <= 0:
            text += " (the samples are numbered from 1)"
    return text


def finalize(ctx: ScanContext) -> None:
    for path, keys in sorted(ctx.partial.numbered.items()):
        if not layout(keys):
            continue
        present, pairs = _present(keys)
        text = _problem(keys, present, pairs)
        if text is not None:
            ctx.emit(CHECK.code, count_location(keys, text + (UNREAD if "R004" in ctx.partial.findings else "")))
            continue
        note = f"{pairs:,} image/label pairs numbered {spans_text(present)}, as num-samples says"
        ctx.partial.info = {**ctx.partial.info, f"lmdb.text_pairs {path}": note}  # (a copy: the merged one is shared)
