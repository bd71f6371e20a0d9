"""L005 label-sorted-storage: long runs of one label in storage order."""

from __future__ import annotations

from ..context import ScanContext
from ..labels import is_classification, onehot_mode
from ..location import Location
from ..partial import coalesce_runs
from ..severity import Severity
from .base import Check

CHECK = Check(
    code="L005",
    name="label-sorted-storage",
    severity=Severity.WARNING,
    summary=(
        "Finds runs of one label longer than --sorted-run-batches batches (default 4) of --batch-size samples "
        "(default-batch-size, 32, when it is not given) in the order samples are stored (one-hot rows by their "
        "class; multi-hot labels are not judged)."
    ),
    why=(
        "Readers that stream in storage order without shuffling (Caffe's Data and HDF5Data layers, "
        "sequential LMDB or WebDataset readers, a DataLoader with shuffle=False) then feed batches of a "
        "single class. The model swings towards that class, batch statistics collapse, and per-batch "
        "normalised losses see the other classes absent: NaN or divergence."
    ),
    fix=(
        "Shuffle the samples once when writing the dataset (and shuffle the file list), or turn on "
        "shuffling in the reader (HDF5Data's `shuffle: true`, a shuffle buffer for streams)."
    ),
    message="{count} run{s} of a single label longer than the threshold",
    options=("sorted_run_batches", "batch_size", "default_batch_size"),
)


def finalize(ctx: ScanContext) -> None:
    for _stream, tally in sorted(ctx.partial.labels.items()):
        if not is_classification(tally, ctx.config.num_classes) or len(tally.histogram) < 2:
            continue
        if tally.onehot is not None and onehot_mode(tally.onehot) != "onehot":
            continue  # multi-hot rows have no single label to run
        threshold = ctx.config.run_threshold
        runs = [r for r in coalesce_runs(tally.runs, threshold) if r.length > threshold]
        runs.sort(key=lambda r: (-r.length, r.start))
        locs = [
            Location(
                path=r.path,
                dataset=r.dataset,
                index=r.index,
                key=r.key,
                line=r.line,
                detail=f"{r.length} consecutive samples of label {r.label} (threshold {threshold})",
            )
            for r in runs[: ctx.partial.cap]
        ]
        ctx.emit_many(CHECK.code, len(runs), sum(r.length for r in runs), locs)
