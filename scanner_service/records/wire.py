"""The protobuf wire format, just enough to see how a record is laid out (field order and offsets).

Parsing proper is the protobuf library's job; this only locates fields so that records laid out alike can
be recognised by their bytes (``datum.Layout``).
"""

from __future__ import annotations


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def varint(value: int) -> bytes:
    """The varint encoding of a non-negative integer."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def walk_fields(buf: bytes | memoryview) -> list[tuple[int, int, int, int]]:
    """Every field of a message as (number, wire type, payload start, payload end), in storage order."""
    fields: list[tuple[int, int, int, int]] = []
    pos = 0
    while pos < len(buf):
        tag, pos = read_varint(buf, pos)
        number, kind = tag >> 3, tag & 7
        if number == 0:
            raise WireError("field number 0")
        if kind == 0:
            _, end = read_varint(buf, pos)
        elif kind == 1:
            end = pos + 8
        elif kind == 2:
            length, pos = read_varint(buf, pos)
            end = pos + length
        elif kind == 5:
            end = pos + 4
        else:
            raise WireError(f"wire type {kind}")
        if end > len(buf):
            raise WireError("field runs past the end")
        fields.append((number, kind, pos, end))
        pos = end
    return fields
