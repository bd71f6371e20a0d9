"""V005 constant-sample: samples of two or more dimensions whose every value is the same.

Dimensions of size 1 do not count: a Caffe Datum of K×1×1 (a label or feature vector) is a vector.

Only samples that are arrays of their own (N×H×W, N×C×H×W, N×T×F ...): a row of a feature table may well be all
zeros. Targets are left alone: a segmentation mask or a label map that is all background is ordinary, so datasets
named like them (``mask``, ``seg``, ``label``, ``target``, ``gt``, ``annotation`` in the name, ``unlabeled`` aside)
are not tested.
An HDF5 dataset that is one sample of a role (one group per sample: ``/sample_000001/image``) is judged whole: one
finding at the dataset when all of it holds one value.
The test is exact and nearly free: a few values spread over each sample are compared first, and only the samples
where those agree are compared in full.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..context import ScanContext
from ..items import NumericBlock
from ..severity import Severity
from ..statistics import BlockSummary
from .base import Check

CHECK = Check(
    code="V005",
    name="constant-sample",
    severity=Severity.WARNING,
    summary=(
        "Finds samples of two or more dimensions (images, clips, sequences) whose every value is the same: blank "
        "images, silent clips, and rows a writer never wrote, which HDF5 reads as the fill value. An HDF5 dataset "
        "that is one sample (one group per sample: /sample_*/image) is judged whole."
    ),
    why=(
        "Per-sample standardisation ((x - mean) / std, per-image normalisation) divides by a standard deviation "
        "of 0: NaN in every value of the sample, then NaN loss. Otherwise the sample carries no information under "
        "a real label. A run of constant samples at the end of a dataset usually means the writer stopped early: "
        "the rows were allocated but never written, and every loader reads them without an error."
    ),
    fix=(
        "Remove the samples and their labels, or rewrite them from the source. When they are the last rows of "
        "the dataset, the file was not finished: write it again. Or make the normaliser use max(std, eps)."
    ),
    message="{count} constant sample{s}",
)

PROBES = 8
"""Values compared first in every sample."""

TARGETS = re.compile(r"mask|seg|(?<!un)label|target|annot|(^|[^a-z])gt([^a-z]|$)", re.IGNORECASE)
"""Names of datasets that hold targets, which may be constant by design (``unlabeled`` images are samples)."""


def on_numeric(block: NumericBlock, summary: BlockSummary, ctx: ScanContext) -> None:
    if block.meta.sample_shape is not None:  # a dataset that is one sample (one group per sample): judged whole
        _whole(block, ctx)
        return
    data = block.data
    if sum(n > 1 for n in data.shape[1:]) < 2 or data.shape[0] == 0 or not ctx.wants(CHECK.code):
        return  # a sample of fewer than two real dimensions: a vector (a Caffe K×1×1 Datum too), not an array
    if tuple(data.shape[1:]) != tuple(block.meta.shape[1:]):  # part of each sample (a chunk of some channels)
        return
    if TARGETS.search(block.meta.dataset.rsplit("/", 1)[-1]):
        return
    flat = data.reshape(data.shape[0], -1)
    width = flat.shape[1]
    if width < 2:
        return
    probes = np.unique(np.linspace(0, width - 1, PROBES).astype(np.intp))
    first = flat[:, :1]
    candidates = np.flatnonzero((flat[:, probes] == first).all(axis=1))
    if candidates.size == 0:
        return
    rows = candidates[(flat[candidates] == flat[candidates, :1]).all(axis=1)]
    if rows.size == 0:
        return
    shape = "×".join(str(n) for n in data.shape[1:])
    locations = [
        block.locate(int(r)).model_copy(
            update={"chunk": block.chunk, "detail": f"every value is {_value(flat[r, 0])} ({shape})"}
        )
        for r in rows[: ctx.partial.cap]
    ]
    ctx.emit_many(CHECK.code, int(rows.size), int(rows.size) * width, locations)


def _whole(block: NumericBlock, ctx: ScanContext) -> None:
    """One finding at a dataset that is one sample (``/sample_000017/image``) when all of it holds one value."""
    data = block.data
    if sum(n > 1 for n in data.shape) < 2 or not ctx.wants(CHECK.code):
        return
    if any(block.offset) or tuple(data.shape) != tuple(block.meta.shape[1:]):  # part of it (a damaged chunk)
        return
    if TARGETS.search(block.meta.dataset.rsplit("/", 1)[-1]):
        return
    flat = data.reshape(-1)
    probes = np.unique(np.linspace(0, flat.size - 1, PROBES).astype(np.intp))
    if not (flat[probes] == flat[0]).all() or not (flat == flat[0]).all():
        return
    shape = "×".join(str(n) for n in data.shape)
    where = block.locate(0).model_copy(
        update={"index": None, "chunk": block.chunk, "detail": f"every value is {_value(flat[0])} ({shape})"}
    )
    ctx.emit_many(CHECK.code, 1, int(flat.size), [where])


def _value(x: Any) -> str:
    value = x.item()
    return f"{value:g}" if isinstance(value, float) else str(value)
