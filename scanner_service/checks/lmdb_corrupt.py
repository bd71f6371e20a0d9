"""R004 lmdb-corrupt: an LMDB environment that cannot be opened, or pages of it that cannot be read."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="R004",
    name="lmdb-corrupt",
    severity=Severity.ERROR,
    summary=(
        "Finds LMDB environments that cannot be opened (not LMDB, truncated, wrong version) and damaged pages "
        "(MDB_CORRUPTED, MDB_PAGE_NOTFOUND, a reader killed by SIGSEGV, SIGABRT or SIGBUS), saying how far "
        "reading got: the last good key, and the records that cannot be reached. Every other part is scanned."
    ),
    why=(
        "LMDB keeps no checksums: a damaged B-tree page either raises when a reader crosses it or kills the "
        "process outright (an LMDB assertion, a segfault; SIGBUS past the end of a truncated data.mdb). "
        "Training then dies at the same batch every epoch, or a DataLoader worker vanishes without a trace."
    ),
    fix=(
        "Restore the database from a copy, or rebuild it from its source. `mdb_copy` of a damaged environment "
        "copies the damage; records before the last good key can be salvaged by reading them one by one into "
        "a new environment."
    ),
    message="{count} damaged part{s} of an LMDB environment",
)
