"""The members of a ``.npz`` archive (a zip of ``.npy`` files), read as streams in bounded memory.

A member's bytes are read at their offset in the archive (stored ones as they are, compressed ones, deflate,
bzip2 or LZMA as ``zipfile`` writes them, through one decompressor) and checked against the member's CRC-32 once
they are all read, so every value of a damaged member is scanned before the damage is reported. An archive whose
central directory cannot be read (a truncated copy loses it: it is the last thing in the file) is walked through
its members' local headers instead: the members before the cut are scanned, and the one it cuts up to the cut.
"""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import zipfile
import zlib
from dataclasses import asdict, dataclass
from typing import Any

LOCAL = struct.Struct("<4sHHHHHIIIHH")
LOCAL_SIGNATURE = b"PK\x03\x04"
ZIP64_EXTRA = 0x0001
STORED, DEFLATED, BZIP2, LZMA = 0, 8, 12, 14
METHODS = {STORED: "stored", DEFLATED: "deflated", BZIP2: "bzip2", LZMA: "lzma"}
OTHER_METHODS = {
    1: "shrunk",
    6: "imploded",
    9: "deflate64",
    10: "PKWARE imploding",
    18: "IBM TERSE",
    19: "IBM LZ77",
    93: "zstandard",
    94: "MP3",
    95: "xz",
    96: "JPEG",
    97: "WavPack",
    98: "PPMd",
    99: "AES encrypted",
}
"""Compression methods of the zip specification (APPNOTE.TXT 4.4.5) that Python's ``zipfile``, and so
``np.load``, cannot read."""
DAMAGED = (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError)
"""What the decompressors raise for damaged data (bz2: OSError; an LZMA member's header: ValueError)."""
RAW_READ = 1 << 20
"""Compressed bytes read at a time."""


@dataclass(frozen=True, slots=True)
class Member:
    """Where a member's data lies in the archive, and what it must decode to."""

    name: str
    method: int
    compressed: int
    size: int
    crc: int
    data_offset: int
    encrypted: bool = False

    def spec(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Member:
        return cls(**spec)


class DamagedArchive(Exception):
    """The archive, or a member's local header, cannot be read."""


def _local_header(fd: int, offset: int) -> tuple[int, bytes, bytes, tuple[Any, ...]]:
    """(offset of the data, name, extra field, header fields) of the local header at ``offset``."""
    raw = os.pread(fd, LOCAL.size, offset)
    if len(raw) < LOCAL.size:
        raise DamagedArchive(f"the archive ends inside a member's header (at byte {offset:,})")
    fields = LOCAL.unpack(raw)
    if fields[0] != LOCAL_SIGNATURE:
        raise DamagedArchive(f"no member header at byte {offset:,} (found {fields[0].hex(' ')})")
    name_len, extra_len = fields[9], fields[10]
    rest = os.pread(fd, name_len + extra_len, offset + LOCAL.size)
    if len(rest) < name_len + extra_len:
        raise DamagedArchive(f"the archive ends inside a member's header (at byte {offset:,})")
    return offset + LOCAL.size + name_len + extra_len, rest[:name_len], rest[name_len:], fields


def _zip64_sizes(extra: bytes, size: int, compressed: int) -> tuple[int, int]:
    """The sizes a local header's zip64 extra field holds where its 32-bit fields say 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + length]
        if tag == ZIP64_EXTRA:
            values = list(struct.unpack_from(f"<{len(body) // 8}Q", body))
            if size == 0xFFFFFFFF and values:
                size = values.pop(0)
            if compressed == 0xFFFFFFFF and values:
                compressed = values.pop(0)
            break
        pos += 4 + length
    return size, compressed


def listed_members(path: str, fd: int) -> list[Member | tuple[str, str]]:
    """The archive's members from its central directory, each a ``Member`` or (name, why it cannot be read);
    raises ``zipfile.BadZipFile`` (or OSError) when the central directory cannot be read."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    found: list[Member | tuple[str, str]] = []
    for info in infos:
        if info.is_dir():
            continue
        try:
            data_offset, raw_name, _extra, fields = _local_header(fd, info.header_offset)
        except DamagedArchive as exc:
            found.append((info.filename, str(exc)))
            continue
        refused = _refused(info, raw_name, fields[2])
        if refused is not None:
            found.append((info.filename, refused))
            continue
        found.append(
            Member(
                name=info.filename,
                method=info.compress_type,
                compressed=info.compress_size,
                size=info.file_size,
                crc=info.CRC,
                data_offset=data_offset,
                encrypted=bool(info.flag_bits & 0x1),
            )
        )
    return found


def _refused(info: zipfile.ZipInfo, raw_name: bytes, local_flags: int) -> str | None:
    """Why ``zipfile`` (and so ``np.load``) refuses to open a member whose directory entry reads, as it checks on
    opening: flag bits it does not implement, or a local header naming another file (a damaged name)."""
    if info.flag_bits & 0x20:
        return "compressed patched data (flag bit 5): np.load cannot read it (a damaged flag?)"
    if info.flag_bits & 0x40:
        return "strong encryption (flag bit 6): np.load cannot read it (a damaged flag?)"
    local = raw_name.decode("utf-8" if local_flags & 0x800 else "cp437", "replace")
    if local != info.orig_filename:
        return (
            f"its local header names it {local!r}, the archive's directory {info.orig_filename!r}: np.load refuses "
            "it (a damaged name)"
        )
    return None


def recovered_members(fd: int, size: int) -> tuple[list[Member], str]:
    """The members found by walking the local headers from the start (an archive without a readable central
    directory), and where the walk stopped."""
    found: list[Member] = []
    offset = 0
    while offset + LOCAL.size <= size:
        try:
            data_offset, raw_name, extra, fields = _local_header(fd, offset)
        except DamagedArchive as exc:
            if os.pread(fd, 4, offset) in (b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06"):
                return found, "the central directory starts there but cannot be read"
            return found, str(exc)
        flags, method, crc = fields[2], fields[3], fields[6]
        if flags & 0x8:  # sizes follow the data (a streamed archive): the next header cannot be found
            return found, f"member {raw_name.decode('utf-8', 'replace')} gives its sizes after its data"
        file_size, compressed = _zip64_sizes(extra, fields[8], fields[7])
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", "replace")
        found.append(Member(name, method, compressed, file_size, crc, data_offset, bool(flags & 0x1)))
        offset = data_offset + compressed
    return found, "the archive ends there"


class _Unpacker:
    """A bzip2 or LZMA decompressor as ``zlib``'s: ``decompress(data, n)`` gives up to ``n`` bytes; the input
    it has not used is kept inside, so ``unconsumed_tail`` is always empty."""

    unconsumed_tail = b""

    def __init__(self, method: int) -> None:
        self.method = method
        self.unpack: bz2.BZ2Decompressor | lzma.LZMADecompressor | None = (
            bz2.BZ2Decompressor() if method == BZIP2 else None
        )
        self.head = b""
        """An LZMA member's own header (version, size of the properties, properties), until it is whole."""

    @property
    def eof(self) -> bool:
        return self.unpack is not None and self.unpack.eof

    def needs_input(self) -> bool:
        return self.unpack is None or self.unpack.needs_input

    def decompress(self, data: bytes, n: int) -> bytes:
        if self.unpack is None:  # LZMA: 2 bytes of version, 2 of the properties' size, the properties
            self.head += data
            if len(self.head) < 4:
                return b""
            size = int.from_bytes(self.head[2:4], "little")
            if len(self.head) < 4 + size:
                return b""
            filters = [lzma._decode_filter_properties(lzma.FILTER_LZMA1, self.head[4 : 4 + size])]  # type: ignore[attr-defined]
            self.unpack = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters)
            data, self.head = self.head[4 + size :], b""
        return self.unpack.decompress(data, n)


class MemberStream:
    """A member's uncompressed bytes, read in order: ``read(n)`` gives up to ``n`` bytes (fewer only at the
    end of the member, or where the archive ends); raises ``zlib.error`` for damaged compressed data."""

    def __init__(self, fd: int, member: Member, archive_size: int) -> None:
        self.fd = fd
        self.member = member
        self.pos = member.data_offset
        self.left = max(0, min(member.compressed, archive_size - member.data_offset))
        self.cut = self.left < member.compressed
        """The archive ends before the member's last byte."""
        self.inflate = (
            None
            if member.method == STORED
            else zlib.decompressobj(-zlib.MAX_WBITS)
            if member.method == DEFLATED
            else _Unpacker(member.method)
        )
        self.tail = b""
        self.crc = 0
        self.done = 0
        """Uncompressed bytes handed out."""

    def _raw(self, n: int) -> bytes:
        data = os.pread(self.fd, min(n, self.left), self.pos) if self.left else b""
        self.pos += len(data)
        self.left = self.left - len(data) if data else 0
        return data

    def read(self, n: int) -> bytes:
        try:
            return self._read(n)
        except DAMAGED as exc:
            if isinstance(exc, zlib.error):
                raise
            raise zlib.error(f"{METHODS.get(self.member.method, self.member.method)}: {exc}") from exc

    def _read(self, n: int) -> bytes:
        if self.inflate is None:
            data = self._raw(min(n, self.member.size - self.done))
        else:
            parts: list[bytes] = []
            got = 0
            while got < n and not self.inflate.eof:
                if not self.tail and (not isinstance(self.inflate, _Unpacker) or self.inflate.needs_input()):
                    self.tail = self._raw(RAW_READ)
                    if not self.tail:
                        break
                chunk = self.inflate.decompress(self.tail, n - got)
                self.tail = self.inflate.unconsumed_tail
                parts.append(chunk)
                got += len(chunk)
            data = b"".join(parts)
        self.crc = zlib.crc32(data, self.crc)
        self.done += len(data)
        return data

    def finish(self, block: int) -> str | None:
        """Read what is left and say what is wrong with the member, if anything: cut short, or bytes that do
        not match its CRC-32. None for a sound member."""
        while self.read(block):
            pass
        if self.cut:
            return f"the archive ends inside it: {self.done:,} of its {self.member.size:,} bytes are there"
        if self.done != self.member.size:
            return f"it decodes to {self.done:,} bytes, but the archive says {self.member.size:,}"
        if self.crc != self.member.crc:
            return (
                f"its bytes do not match its CRC-32 (stored {self.member.crc:08x}, read {self.crc:08x}): some value "
                "in it is damaged, which one the archive cannot tell"
            )
        return None
