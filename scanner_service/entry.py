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

Ctrl-C while the command is imported ends the process as during a scan: one line, status 130. Python raises
the interrupt wherever the import is, and not always as KeyboardInterrupt: inside a callback of the import
machinery (a module lock's weak reference) it is printed as "Exception ignored" with a traceback and the
import goes on; numpy's extensions print it (``PyErr_Print``: a traceback) and raise "ImportError:
_multiarray_umath failed to import" instead. So while the imports run, SIGINT is noted by a handler of this
module, interrupts printed through ``sys.unraisablehook`` or ``sys.excepthook`` are kept quiet, and whatever the
imports end with after a SIGINT is taken for the interrupt.

An image folder's scan gets a head start (``head_start``): a process forked before these imports inspects the
folder's last images on a core that would idle meanwhile.

numpy is imported first, on its own: imported where the command's modules first need it (after pydantic and
click), the same imports take 25-40 ms longer, measured as the median of 40 starts of each order.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

from .head_start import start as start_head_start

TYPE_CHECKING = False  # (``typing`` is imported after the head start's fork: see ``head_start``)
if TYPE_CHECKING:
    from typing import Any

GC_THRESHOLD = 10_000
"""Allocations between collections of the youngest generation (Python's default: 700)."""

ENVIRONMENT = {
    # dscan's own models use no pydantic plugin, and looking for plugins reads the metadata of every installed
    # package (about 20 ms of every start; see also pydantic_plugins). A plugin can still be enabled by setting
    # the variable explicitly.
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
    # dscan runs in processes and calls no BLAS routine; numpy's OpenBLAS would start a thread per core at
    # import that spins for a while (about 0.1 s of CPU on a second core, taken from the scan's workers).
    "OPENBLAS_NUM_THREADS": "1",
}
"""Defaults of the command's process, set before numpy and pydantic are imported (a value set by the user
stands)."""


def set_defaults() -> None:
    """The ``ENVIRONMENT`` defaults, where the user set none."""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def set_environment() -> None:
    """The defaults, and pydantic's plugin search left out when they turn every plugin off."""
    set_defaults()
    from .pydantic_plugins import skip_search_when_disabled

    skip_search_when_disabled()


def _interrupted() -> SystemExit:
    print("dscan: interrupted; no report", file=sys.stderr)
    return SystemExit(130)


def run() -> None:
    interrupted = False
    default_hook, default_excepthook = sys.unraisablehook, sys.excepthook

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    def quiet_interrupt(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            default_hook(unraisable)

    def quiet_print(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            default_excepthook(kind, value, tb)

    gc.disable()
    previous = signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook, sys.excepthook = quiet_interrupt, quiet_print
    try:
        set_defaults()  # (the head start imports numpy: OPENBLAS_NUM_THREADS first)
        head_start = start_head_start(sys.argv[1:])  # (forks: before any thread starts, and before typing)
        set_environment()
        import numpy  # noqa: F401  (first: see above)

        from .cli import run as command
    except BaseException:
        if interrupted:  # Ctrl-C while starting: the same end as during a scan, without a traceback
            raise _interrupted() from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook, sys.excepthook = default_hook, default_excepthook
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        gc.enable()
    if interrupted:  # (raised where nobody saw it)
        raise _interrupted()
    command(head_start=head_start)
