"""Text that reaches JSON: names from the file system or from inside files, made printable.

A file or HDF5 object name that is not valid UTF-8 reaches Python with its bytes as surrogate escapes
(``os.fsdecode``), which JSON encoders and strict terminals refuse. Reports spell such bytes out as
``\\xff``; the sources keep the original names for opening the files.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel
from pydantic_core import PydanticSerializationError

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\xad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff\ufffe\uffff]")
"""Characters no report may carry raw: control characters (a terminal runs escape sequences, XML 1.0 forbids
them), the two non-characters XML forbids, and invisible format characters (a byte order mark left inside a
concatenated list, zero-width spaces, direction overrides): shown raw, 'img/2.jpg does not exist' would name
a file that does exist."""


def _spell(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot carry and control characters spelled out (``caf\\xe9.jpg``,
    ``a\\x1b[31m.jpg``); printable text comes back unchanged."""
    if text.isprintable():  # the common case: no control character, no undecodable byte
        return text
    if not text.isascii():
        try:  # valid text encodes and decodes back unchanged; escaped bytes come back as \xff
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that no byte escapes: spell it as \udxxx
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return CONTROL.sub(_spell, text)


Text = Annotated[str, AfterValidator(printable)]
"""A model field that holds a name: validated into printable text."""


def _printable_tree(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {_printable_tree(k): _printable_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable_tree(v) for v in value]
    return value


def dump_json(model: BaseModel, indent: int | None = None) -> str:
    """``model.model_dump_json``, and when a name that is not UTF-8 slipped into a field that is not ``Text``,
    the same JSON with that name made printable (never a failed report)."""
    try:
        return model.model_dump_json(indent=indent)
    except PydanticSerializationError:
        data = _printable_tree(model.model_dump(mode="json"))
        return json.dumps(data, indent=indent, ensure_ascii=False, separators=(",", ":") if indent is None else None)
