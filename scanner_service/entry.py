"""The ``dscan`` console script's entry point: the command of :mod:`scanner_service.cli`, started with the
cyclic garbage collector out of the way of its imports.

Importing the command (numpy, pydantic, click and the report models) allocates a few hundred thousand
objects that live as long as the process. Python's collector runs dozens of times meanwhile and frees
none of them: 30-35 ms of a 0.35 s start-up, measured. So it is off while they are imported, and afterwards
``gc.freeze()`` moves them out of its sight, for the rest of the run and for the scan's forked workers
(whose collections then neither walk nor copy those pages). The collector is on again for the scan
itself, collecting the youngest objects every ``GC_THRESHOLD`` allocations (Python's 700 made a scan of 20,000
small HDF5 datasets walk its per-dataset plan and statistics, which live to the end and are never cyclic
garbage, a dozen times: 1.3 s of 9.4, measured). ``import scanner_service.cli`` as a library leaves the
collector alone.
"""

from __future__ import annotations

import gc

GC_THRESHOLD = 10_000
"""Allocations between collections of the youngest generation (Python's default: 700)."""


def run() -> None:
    gc.disable()
    try:
        from .cli import run as command
    except KeyboardInterrupt:  # Ctrl-C while starting: the same end as during a scan, without a traceback
        import sys

        print("dscan: interrupted; no report", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        gc.enable()
    command()
