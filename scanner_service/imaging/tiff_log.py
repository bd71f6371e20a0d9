"""What libtiff writes to standard error while Pillow decodes a TIFF: kept off the terminal, and judged.

libtiff reports a damaged strip through its error handler ("Fax4Decode: Bad code word at line 12 of strip 0
(x 100)", "ZIPDecode: Decoding error at scanline 0, invalid block type", "LZWDecode: Not enough data at
scanline 0 ..."), and its default handler prints to the process's standard error, file descriptor 2: Pillow
installs none (it only silences libtiff's warnings), and often decodes on, handing over garbage pixels. So,
for the length of one TIFF's decode, descriptor 2 points into a temporary file of this process (``TiffLog``,
restored on the way out whatever happens), and the lines written there are sorted (``sort``): a codec's
decode errors are damage; notes on the directory (unknown tags ...) are no damage, and are dropped.

Workers decode one file at a time, so the redirection is brief and affects nothing else. In one process with
threads (``-j0`` with a progress bar), another thread's writes in that window land in the file too: lines
that are not shaped as libtiff's messages are written back to standard error.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from types import TracebackType

MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+", b"II\x00*", b"MM*\x00")
"""Classic and BigTIFF signatures, either byte order, and the two whose version bytes are swapped, which
Pillow's TIFF reader takes too (its ``PREFIXES``) and libtiff refuses with a message ("Not a TIFF file, bad
version number 10752"): only these files are decoded with descriptor 2 moved."""

KEPT = 3
"""libtiff messages kept in one finding (a damaged fax strip gives one per bad line); the rest are counted."""

READ_AT_MOST = 1 << 16
"""Bytes of libtiff's output read per page (a long run of bad lines can print megabytes)."""

SHAPE = re.compile(r"[\w.\-]*: \S")
"""libtiff's default handlers print 'module: message.' (the module empty or named after the file)."""

PILLOW_NAME = re.compile(r"^[^:\s]*\.tiff?: ")
"""The module libtiff names after the file: Pillow's 'tempfile.tif' for a TIFF in memory, meaningless here."""

DOUBLED = re.compile(r"^(\w+: )\1")
"""A module named twice ('LZWDecode: LZWDecode: Strip 0 not terminated with EOI code'): once is enough."""

NOTES = re.compile(
    r"Warning, |Unknown field with tag|unknown tag|ASCII value for tag|Incorrect count for field|"
    r"Nonstandard tile|tags are not sorted|Sum of Photometric type-related|\bignor",
    re.IGNORECASE,
)
"""Notes on the directory (metadata libtiff skips or repairs): the pixels are not concerned."""

DAMAGE = re.compile(
    r"^\w*Decode\w*: |^JPEGLib: |^OJPEG\w*: |Read error|Invalid Read|Not enough data|corrupt|premature|"
    r"unexpected end|not yet in table|Bad code word|Decoding error|not terminated with EOI|buffer overrun",
    re.IGNORECASE,
)
"""A codec's decode errors, and reads that ran out of data: the strip's pixels are damaged."""


def is_tiff(data: bytes | memoryview) -> bool:
    return bytes(data[:4]) in MAGIC


class _Sink:
    """The temporary file descriptor 2 points into, one per process (a forked worker makes its own: a file
    shared with the parent would share its offset)."""

    descriptor = -1
    pid = 0

    @classmethod
    def fd(cls) -> int:
        if cls.descriptor < 0 or cls.pid != os.getpid():
            cls.descriptor, path = tempfile.mkstemp(prefix="dscan-libtiff-")
            os.unlink(path)  # open until the process ends, gone from the file system now
            cls.pid = os.getpid()
        return cls.descriptor


class TiffLog:
    """Descriptor 2 moved into this process's temporary file while in the ``with`` block, put back when it
    ends (an exception included). ``take()`` gives libtiff's lines written since its last call."""

    def __init__(self) -> None:
        self.page = 0
        """The page being decoded (set by the caller), for messages read after a decoder's exception."""
        self.damaged_pages = 0
        self._sink = -1
        self._saved: int | None = None
        self._read = 0
        self._foreign: list[str] = []

    def __enter__(self) -> TiffLog:
        _flush()
        self._sink = _Sink.fd()
        try:
            self._saved = os.dup(2)
        except OSError:  # no descriptor 2 at all: closed again on the way out
            self._saved = None
        os.dup2(self._sink, 2)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        _flush()
        try:
            if self._saved is None:
                os.close(2)
            else:
                os.dup2(self._saved, 2)
        finally:
            if self._saved is not None:
                os.close(self._saved)
        self.take()  # the rest: only foreign lines still matter
        if self._read:
            os.ftruncate(self._sink, 0)
            os.lseek(self._sink, 0, os.SEEK_SET)
        if self._foreign and self._saved is not None:
            os.write(2, "".join(self._foreign).encode(errors="replace"))

    def take(self) -> list[str]:
        """libtiff's lines written since the last call, trimmed (the file's name as module dropped)."""
        end = os.lseek(self._sink, 0, os.SEEK_CUR)
        if end == self._read:
            return []
        text = os.pread(self._sink, min(end - self._read, READ_AT_MOST), self._read).decode(errors="replace")
        self._read = end
        lines = []
        for line in text.splitlines(keepends=True):
            if SHAPE.match(line) is None:
                self._foreign.append(line)
            elif line.strip(" \r\n."):
                lines.append(DOUBLED.sub(r"\1", PILLOW_NAME.sub("", line.strip().rstrip(".").strip())))
        return lines


def sort(lines: list[str]) -> tuple[list[str], list[str]]:
    """libtiff's ``lines`` as (damage, other messages), each once, in order; notes on the directory dropped."""
    damage: list[str] = []
    other: list[str] = []
    for line in dict.fromkeys(lines):
        if NOTES.search(line):
            continue
        (damage if DAMAGE.search(line) else other).append(line)
    return damage, other


def text(lines: list[str]) -> str:
    """'libtiff: <first message>; <second> ...', the first ``KEPT`` of them, the rest counted."""
    more = len(lines) - KEPT
    return f"libtiff: {'; '.join(lines[:KEPT])}" + (f" (and {more} more)" if more > 0 else "")


def _flush() -> None:
    """Python's own buffered text goes where it was written before descriptor 2 moves (or moves back)."""
    stream = sys.stderr
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
