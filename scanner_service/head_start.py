"""A head start on an image folder: its last images inspected while ``dscan scan`` is still starting.

Before the command reads a file it imports numpy, pydantic, click and its own modules: 0.2-0.5 s in which
the machine's other cores idle. ``start`` (called by ``entry.run`` before those imports) forks a process that
imports the image judges alone (ISA-L; numpy and simplejpeg at the first JPEG, or another file that needs numpy),
walks the folder from its end and inspects its image files one by one, appending each verdict to an anonymous
in-memory file. Once the scan has made its plan, ``collect`` kills that process (a file it was inspecting is
simply not counted) and reads what it wrote; the shards that hold those files carry their verdicts
(``ImageFilesSource.adopt``).

A verdict is taken only for the same bytes judged as the scan would judge them: the reader still reads the
file, and takes the verdict when the file's digest (xxh3-64, which duplicate-image needs anyway) is the one
the head start judged, in the folder the scan plans, under the scan's pixel limit; otherwise it inspects the
file itself. So the head start changes no report; it moves the decoding of some files to a core that would
idle. It starts on Linux with two or more cores, for ``dscan scan FOLDER`` only; its process ends when it has
walked the folder or noticed that the command has ended, and reads no file outside the folder (no links are
followed; hidden files and folders are left out).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time

from .cpus import usable_cpus

TYPE_CHECKING = False  # (this module runs before the command's imports: ``typing`` and what it imports cost 8 ms)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

    Inspected = tuple[str, tuple[Any, ...]]
    """What the head start found for one file: the xxh3-64 digest of its bytes (hex), and its verdict's field
    values (``Verdict.values``)."""

SCAN_VALUE_OPTIONS = frozenset(
    {
        "--format", "--output", "-o", "--fail-on", "--num-classes", "--batch-size", "--labels", "--select",
        "--ignore", "--max-locations", "--decoder", "--root", "--min-size", "--max-pixels",
        "--batch-absence-threshold", "--sorted-run-batches", "--config", "--workers", "-j",
    }
)  # fmt: skip
"""The options of ``dscan scan``, each of which takes a value (a test keeps this in step with the command)."""

MAX_FILE_BYTES = 16 << 20
"""Larger files are left to the scan's readers (their inspection would rarely end before the plan)."""
MAX_RECORDS = 8_192
"""Verdicts kept at most (about 300 bytes each as written, 1-2 KB as the parent's objects): bounded memory
whatever the folder, where the start-up leaves time for a few hundred to a few thousand."""
MAX_ENTRIES = 65_536
"""A folder holding more entries is left to the readers: sorting it would take the head start's time and
memory (about 200 bytes an entry) for little."""
LENGTH = 4
"""Bytes of the length before each record."""


def scan_folder(argv: Sequence[str]) -> str | None:
    """The folder a command line (``sys.argv[1:]``) will scan: ``scan FOLDER`` with any options; None for any
    other command, for a PATH that is no folder, and for a command line this cannot read for sure."""
    if len(argv) < 2 or argv[0] != "scan":
        return None
    paths: list[str] = []
    args = iter(argv[1:])
    for arg in args:
        if arg == "--":
            paths.extend(args)
        elif arg.startswith("--") and "=" in arg:
            continue
        elif arg in SCAN_VALUE_OPTIONS:
            if next(args, None) is None:
                return None
        elif arg.startswith("-") and len(arg) > 2 and arg[:2] in SCAN_VALUE_OPTIONS:
            continue  # a short option with its value attached: -j2
        elif arg.startswith("-") and arg != "-":
            return None  # --help, or an option this does not know
        else:
            paths.append(arg)
    if len(paths) != 1 or not paths[0].strip():
        return None
    return paths[0] if os.path.isdir(paths[0]) else None


class HeadStart:
    """The process inspecting a folder's last images, and what it has written so far."""

    def __init__(self, pid: int, records: int, folder: os.stat_result) -> None:
        self.pid = pid
        self.records = records
        """The anonymous file the process appends its records to (-1 once let go)."""
        self.folder = (folder.st_dev, folder.st_ino)
        self.ended = False

    def _end(self) -> None:
        """Kill the process: a record it was writing is not counted. (Its pid cannot be another process's:
        it is not reaped before this.)"""
        if self.ended:
            return
        self.ended = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to end on its own (its walk done): whether it did."""
        deadline = time.monotonic() + timeout
        while not self.ended:
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                self.ended = True
            elif time.monotonic() >= deadline:
                return False
            else:
                time.sleep(0.01)
        return True

    def stop(self) -> None:
        """End the process and let go of its records. Idempotent."""
        self._end()
        if self.records >= 0:
            os.close(self.records)
            self.records = -1

    def collect(self, folder: str, max_pixels: int) -> dict[str, Inspected]:
        """Stop, then the verdicts by path relative to the folder (POSIX form): none unless ``folder`` is the
        folder inspected and ``max_pixels`` the limit it judged with (the default)."""
        from .imaging import DEFAULT_MAX_PIXELS

        self._end()
        try:
            if self.records < 0 or max_pixels != DEFAULT_MAX_PIXELS:
                return {}
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) != self.folder:
                return {}
            with open(self.records, "rb", closefd=False) as fh:
                fh.seek(0)
                return dict(read_records(fh.read()))
        except OSError:
            return {}
        finally:
            self.stop()


def read_records(data: bytes) -> Iterator[tuple[str, Inspected]]:
    """The records in ``data``, up to the first that is incomplete (the process was killed writing it)."""
    import pickle

    at = 0
    while at + LENGTH <= len(data):
        size = int.from_bytes(data[at : at + LENGTH], "little")
        end = at + LENGTH + size
        if end > len(data):
            return
        rel, digest, fields = pickle.loads(data[at + LENGTH : end])
        yield rel, (digest, fields)
        at = end


def start(argv: Sequence[str]) -> HeadStart | None:
    """A head start for the command line ``argv`` (``sys.argv[1:]``) when it scans a folder, on Linux with two
    or more CPUs to use and the standard streams open (the anonymous file must not take the place of one)."""
    folder = scan_folder(argv)
    if folder is None or not hasattr(os, "memfd_create") or usable_cpus() < 2:
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return None
    return launch(folder)


def launch(folder: str) -> HeadStart | None:
    """Fork the process that inspects ``folder``'s last images (None when it cannot start). Linux only."""
    try:
        st = os.stat(folder)
        records = os.memfd_create("dscan-head-start", os.MFD_CLOEXEC)
    except OSError:
        return None
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the head start's process: it never returns
        try:
            from .forked import crashes_expected

            crashes_expected()  # (a decoder that kills it costs what it had not written yet)
            _quiet()
            inspect_tail(folder, records, parent)
        finally:
            os._exit(0)
    return HeadStart(pid, records, st)


def _quiet() -> None:
    """Standard streams to /dev/null: nothing a decoder prints mixes into the command's output, and a caller
    waiting for the command's output to end does not wait for this process."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def walk_back(folder: str, rel: str = "") -> Iterator[tuple[str, str]]:
    """(path, path relative to the top folder) of the image files below ``folder``, the last first in the
    scan's (sorted) order. Hidden files and folders, links, names without an image extension and folders of
    more than ``MAX_ENTRIES`` entries are left out."""
    from .imaging.sniff import IMAGE_EXTENSIONS

    entries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                entries.append(entry)
                if len(entries) > MAX_ENTRIES:
                    return
    except OSError:
        return
    entries.sort(key=lambda e: e.name, reverse=True)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from walk_back(entry.path, f"{rel}{entry.name}/")
            elif entry.is_file(follow_symlinks=False) and os.path.splitext(entry.name)[1].lower() in IMAGE_EXTENSIONS:
                yield entry.path, rel + entry.name
        except OSError:
            continue


def inspect_tail(folder: str, records: int, parent: int) -> None:
    """Inspect the image files below ``folder`` from the last, appending a record of each to the file
    ``records``, while the process ``parent`` (the command) is this one's parent."""
    import pickle

    import xxhash

    from .imaging import inspect_image

    written = 0
    for path, rel in walk_back(folder):
        if written >= MAX_RECORDS or os.getppid() != parent:  # (the command has ended)
            return
        data = _read(path)
        if data is None:
            continue
        verdict = inspect_image(data, os.path.basename(path))
        record = pickle.dumps((rel, xxhash.xxh3_64_hexdigest(data), verdict.values()))
        frame = len(record).to_bytes(LENGTH, "little") + record
        if os.write(records, frame) != len(frame):  # (no memory left for it): what is written stands
            return
        written += 1


def _read(path: str) -> bytes | None:
    """A regular file's bytes, if it is no larger than ``MAX_FILE_BYTES``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        with open(fd, "rb", buffering=0, closefd=False) as fh:
            return fh.read()
    except OSError:
        return None
    finally:
        os.close(fd)
