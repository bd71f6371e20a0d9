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

Ctrl-C while the command is imported ends the process as during a scan: one line, status 130. The signal can
land inside a callback Python runs for the import machinery (a module lock's weak reference), where the
interpreter does not raise it but prints it as "Exception ignored" with a traceback and goes on with the
import; such an interrupt is noted by a ``sys.unraisablehook`` instead and honoured once the imports end.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

GC_THRESHOLD = 10_000
"""Allocations between collections of the youngest generation (Python's default: 700)."""


def _interrupted() -> SystemExit:
    print("dscan: interrupted; no report", file=sys.stderr)
    return SystemExit(130)


def run() -> None:
    swallowed: list[BaseException] = []
    default_hook = sys.unraisablehook

    def note_interrupt(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            swallowed.append(unraisable.exc_value)
        else:
            default_hook(unraisable)

    gc.disable()
    sys.unraisablehook = note_interrupt
    try:
        from .cli import run as command
    except KeyboardInterrupt:  # Ctrl-C while starting: the same end as during a scan, without a traceback
        raise _interrupted() from None
    finally:
        sys.unraisablehook = default_hook
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        gc.enable()
    if swallowed:
        raise _interrupted()
    command()
