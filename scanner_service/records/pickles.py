"""Pickled values, recognised without unpickling them (loading a pickle runs arbitrary code).

Protocols 2 to 5 start with the PROTO opcode (0x80, then the protocol number). Protocols 0 and 1 have no
signature: a value is taken for one when ``pickletools.dis`` (which only reads opcodes and simulates the
stack, never executing anything) accepts it up to a STOP opcode at its very end.
"""

from __future__ import annotations

import io
import pickletools

MAX_PARSE = 1 << 20
"""Values larger than this are not parsed opcode by opcode (only the PROTO signature counts)."""


def pickle_protocol(value: bytes | memoryview) -> int | None:
    """The pickle protocol of ``value`` when it is a pickle (0 for protocols 0 and 1), else None."""
    if len(value) >= 3 and value[0] == 0x80 and 2 <= value[1] <= 5:
        return int(value[1])
    if len(value) < 2 or len(value) > MAX_PARSE or value[-1] != ord("."):
        return None
    data = bytes(value)
    try:
        pickletools.dis(data, out=io.StringIO())
        stop = max(pos or 0 for _op, _arg, pos in pickletools.genops(data))
    except Exception:
        return None
    return 0 if stop == len(data) - 1 else None


def describe(protocol: int) -> str:
    return f"pickle protocol {protocol}" if protocol >= 2 else "pickle protocol 0/1"
