"""Pickled values: recognised without unpickling them, and read only when they hold plain data.

Loading a pickle runs arbitrary code, so dscan never loads one as ``pickle.loads`` does. A pickle of plain data
(ImageFolderLMDB's ``(jpeg_bytes, label)`` tuples, lists, dicts) is read by an unpickler that refuses every
global, as the ``pickle`` docs prescribe ("Restricting Globals"): nothing is imported, nothing is called, and a
pickle that needs a global (a numpy array, an instance of a class, any other REDUCE) is refused, not read.

Protocols 2 to 5 start with the PROTO opcode (0x80, then the protocol number). Protocols 0 and 1 have no
signature: a value is taken for one when ``pickletools.dis`` (which only reads opcodes and simulates the
stack, never executing anything) accepts it up to a STOP opcode at its very end.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

from .msgpacked import MsgpackRecord, record_of

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


MAX_LOAD = 256 << 20
"""Pickles larger than this are not read (a value is one record)."""
MAX_OPS = 1 << 16
"""Pickles of more opcodes than this are not read: each opcode of plain data can build an object many times its
own size (``}`` is one byte and an empty dict), so the count of opcodes bounds the memory a value can take."""
REFUSED_OPS = frozenset({"PERSID", "BINPERSID", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "BUILD", "EXT1", "EXT2", "EXT4"})
"""Opcodes that build objects of classes or call code: a pickle with one is refused before it is loaded."""


class PickleRefused(ValueError):
    """A pickle that is not read: it needs a global (a class or a function), or is too large."""


class PickleDamaged(ValueError):
    """A value that is no whole pickle (cut short, damaged): what ``pickle.loads`` fails on."""


def _latin1_bytes(text: object, encoding: object = "latin1") -> bytes:
    """How protocols 0 to 2 store ``bytes``: ``_codecs.encode(text, "latin1")``; this function stands in for
    that global and accepts nothing else."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise PickleRefused("needs the global _codecs.encode for something other than bytes")
    return text.encode("latin-1")


def _bytearray(data: object = b"", encoding: object = "latin-1") -> bytearray:
    """How protocols 0 to 4 store ``bytearray``: ``bytearray(bytes)``, or ``bytearray(text, "latin-1")``
    (nothing else is accepted)."""
    return bytearray(data if isinstance(data, bytes) else _latin1_bytes(data, encoding))


PLAIN_GLOBALS = {
    ("_codecs", "encode"): _latin1_bytes,
    ("builtins", "bytearray"): _bytearray,
    ("__builtin__", "bytearray"): _bytearray,
}
"""The only globals answered, each by a stand-in that builds bytes from a str and refuses anything else: how
protocols 0 to 2 store bytes (no module is imported, nothing else is called)."""


class _PlainUnpickler(pickle.Unpickler):
    """Restricting globals, as the ``pickle`` docs prescribe: every global is refused (but the stand-ins for
    bytes), and there is no ``persistent_load``, so only plain data comes out: tuples, lists, dicts, sets,
    bytes, bytearray, str, int, float, bool, None."""

    def find_class(self, module: str, name: str) -> Any:
        stand_in = PLAIN_GLOBALS.get((module, name))
        if stand_in is None:
            raise PickleRefused(f"needs the global {module}.{name}")
        return stand_in


def plain_loads(value: bytes | memoryview) -> Any:
    """The plain data a pickle holds, loaded with every global refused; PickleRefused when it needs one (a
    numpy array, an instance of a class, a call), is larger than ``MAX_LOAD`` or of more than ``MAX_OPS``
    opcodes; PickleDamaged when it is no whole pickle."""
    if len(value) > MAX_LOAD:
        raise PickleRefused(f"larger than {MAX_LOAD >> 20} MB")
    data = bytes(value)
    try:
        for count, (op, _arg, _pos) in enumerate(pickletools.genops(data)):
            if count >= MAX_OPS:
                raise PickleRefused(f"more than {MAX_OPS:,} opcodes")
            if op.name in REFUSED_OPS:
                raise PickleRefused(f"builds objects ({op.name})")
    except PickleRefused:
        raise
    except Exception as exc:  # whatever the opcode reader makes of damaged bytes
        raise PickleDamaged(f"no whole pickle ({exc})") from exc
    reader = _PlainUnpickler(io.BytesIO(data), encoding="bytes")  # Python 2 strings as bytes
    try:
        obj = reader.load()
    except PickleRefused:
        raise
    except Exception as exc:  # UnpicklingError, EOFError, ValueError ... from damaged bytes
        raise PickleDamaged(f"no whole pickle ({type(exc).__name__}: {exc})") from exc
    return _bytes_of(obj)


def _bytes_of(obj: Any) -> Any:
    """``obj`` with the bytearrays it holds (itself, its items, their items) as bytes, as a record's image is."""
    if isinstance(obj, bytearray):
        return bytes(obj)
    if isinstance(obj, dict):
        return {k: bytes(v) if isinstance(v, bytearray) else v for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(bytes(v) if isinstance(v, bytearray) else v for v in obj)
    return obj


def read_record(value: bytes | memoryview) -> MsgpackRecord:
    """The encoded image or array and the label a pickle of plain data holds (read as a msgpack record's decoded
    object is); PickleRefused when it is not read, PickleDamaged when it is no whole pickle."""
    return record_of(plain_loads(value))
