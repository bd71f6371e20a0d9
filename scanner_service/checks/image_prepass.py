"""The work every image check shares, done once per encoded image (``engine.PREPASS["image"]``).

It inspects the bytes (``scanner_service.imaging.inspect_image``), records which decoder judged them in the
partial's ``info``, and reports NaN/Inf pixels of float images as ``nan-value``/``inf-value`` at the file
(naming the pages of a multi-page file that hold them).
The image checks' hooks read the returned ``Verdict``; none of them decodes anything again.
"""

from __future__ import annotations

from ..context import ScanContext
from ..imaging import Verdict, decoder_entry, inspect_image
from ..imaging.verdict import on_pages
from ..items import EncodedImage
from ..location import Location


def detail(item: EncodedImage, text: str) -> Location:
    """The item's location with ``text`` as its detail."""
    return item.location.model_copy(update={"detail": text})


def own_length(item: EncodedImage, verdict: Verdict) -> int:
    """The item's bytes that are the image's own: all of them, but for the zero bytes that pad a fixed-size slot
    after the image's end (``EncodedImage.padded``)."""
    size = len(item.data)
    if not item.padded or not verdict.trailing:
        return size
    tail = bytes(item.data[size - verdict.trailing :])
    return size - len(tail) + len(tail.rstrip(b"\0"))


def inspect_item(item: EncodedImage, ctx: ScanContext) -> Verdict:
    verdict = item.verdict or inspect_image(item.data, item.name, ctx.config.max_pixels)
    entry = decoder_entry(verdict)
    if entry is not None and entry[0] not in ctx.partial.info:
        ctx.partial.info[entry[0]] = entry[1]
    if verdict.nan:
        ctx.emit(
            "V001",
            detail(item, on_pages(verdict.nan, verdict.nan_pages, "NaN")),
            verdict.nan,
        )
    if verdict.inf:
        ctx.emit(
            "V002",
            detail(item, on_pages(verdict.inf, verdict.inf_pages, "infinite")),
            verdict.inf,
        )
    return verdict
