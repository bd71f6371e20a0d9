"""Caffe's ``Datum`` message, and a reader of its wire format for the records that all look alike.

The message class is built at run time from a descriptor (``descriptor_pb2`` + ``message_factory``): no
generated code and no ``protoc`` at install time. The fields are Caffe's (``caffe.proto``)::

    message Datum {
      optional int32 channels = 1;  optional int32 height = 2;  optional int32 width = 3;
      optional bytes data = 4;      optional int32 label = 5;   repeated float float_data = 6;
      optional bool encoded = 7 [default = false];
    }

Parsing every record with the (upb) message class costs about a microsecond plus the copies of the value.
Records of one dataset are byte-for-byte alike except for their pixels and label, so a ``Layout`` learnt
from one record parsed in full recognises the next ones by comparing a few bytes: the header before the
payload and the short tail after it (label, encoded flag). A record that does not match exactly goes
through the full parse, so the verdict never depends on the shortcut.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from .wire import WireError, read_varint, walk_fields

CHANNELS, HEIGHT, WIDTH, DATA, LABEL, FLOAT_DATA, ENCODED = 1, 2, 3, 4, 5, 6, 7

_F = descriptor_pb2.FieldDescriptorProto
_FIELDS = (
    ("channels", CHANNELS, _F.TYPE_INT32, _F.LABEL_OPTIONAL),
    ("height", HEIGHT, _F.TYPE_INT32, _F.LABEL_OPTIONAL),
    ("width", WIDTH, _F.TYPE_INT32, _F.LABEL_OPTIONAL),
    ("data", DATA, _F.TYPE_BYTES, _F.LABEL_OPTIONAL),
    ("label", LABEL, _F.TYPE_INT32, _F.LABEL_OPTIONAL),
    ("float_data", FLOAT_DATA, _F.TYPE_FLOAT, _F.LABEL_REPEATED),
    ("encoded", ENCODED, _F.TYPE_BOOL, _F.LABEL_OPTIONAL),
)

TAG_FLOAT = 0x35
"""Field 6, wire type 5 (fixed32): one unpacked float, as Caffe (proto2) writes them."""


@functools.cache
def datum_class() -> Any:
    """The ``caffe.Datum`` message class (upb-backed when protobuf's C extension is installed)."""
    proto = descriptor_pb2.FileDescriptorProto(name="dscan_caffe_datum.proto", package="caffe", syntax="proto2")
    message = proto.message_type.add(name="Datum")
    for name, number, kind, label in _FIELDS:
        message.field.add(name=name, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe.Datum"))


def protobuf_backend() -> str:
    """``protobuf 7.36.2 (upb)``: which implementation parses the records."""
    from google.protobuf import __version__
    from google.protobuf.internal import api_implementation

    return f"protobuf {__version__} ({api_implementation.Type()})"


class DatumError(ValueError):
    """The value is no Caffe Datum (the message says why)."""


@dataclass(slots=True)
class Datum:
    """The fields of one parsed Datum that the checks use."""

    channels: int
    height: int
    width: int
    label: int | None
    encoded: bool
    data: bytes
    floats: int
    """How many values ``float_data`` holds."""
    message: Any = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.channels, self.height, self.width)

    @property
    def expected(self) -> int:
        return self.channels * self.height * self.width


def _unknown_fields(message: Any) -> int:
    try:
        from google.protobuf import unknown_fields

        return len(unknown_fields.UnknownFieldSet(message))
    except (ImportError, NotImplementedError):  # pragma: no cover - older protobuf
        return len(message.UnknownFields())


def _what_it_is(value: bytes | memoryview) -> str | None:
    """What a value that does not parse as a Datum holds, when that is plain: a bare encoded image, a web page,
    text ... (None: unknown bytes, a damaged Datum perhaps)."""
    from ..imaging.sniff import content
    from .image import image_format

    found = image_format(value)
    if found is not None:
        return f"an encoded {found.upper()} image, not wrapped in a Datum"
    kind, certain = content(bytes(value[:512]))
    return f"content is {kind}" if certain or kind == "text" else None


def parse(value: bytes | memoryview, foreign_fields: bool = True) -> Datum:
    """Parse one value as a Datum, or raise ``DatumError`` saying why it is none.

    ``foreign_fields``: accept fields a Datum does not have, as Caffe's parser does (proto2 keeps them
    aside): a fork's extra field does not make a record unreadable. Detection passes False, since almost any
    bytes parse as some protobuf once unknown fields are allowed."""
    if len(value) == 0:
        raise DatumError("empty value")
    try:
        message = datum_class().FromString(value)
    except DecodeError as exc:
        plain = _what_it_is(value)
        raise DatumError(f"not a Datum protobuf: {plain}" if plain else f"not a Datum protobuf ({exc})") from None
    if not foreign_fields and _unknown_fields(message):
        raise DatumError("not a Datum protobuf (it has fields a Datum does not have)")
    data = message.data
    floats = len(message.float_data)
    if not data and not floats:
        raise DatumError("Datum holds neither data nor float_data")
    return Datum(
        channels=message.channels,
        height=message.height,
        width=message.width,
        label=message.label if message.HasField("label") else None,
        encoded=message.encoded,
        data=data,
        floats=floats,
        message=message,
    )


def looks_like_datum(value: bytes | memoryview) -> bool:
    """Whether a value parses as a sane Datum (detection from a sample of records)."""
    try:
        d = parse(value, foreign_fields=False)
    except DatumError:
        return False
    if d.encoded:
        return bool(d.data)
    return min(d.shape) > 0 or (d.channels == d.height == d.width == 0 and bool(d.data))


# -- layouts: recognising records that look like one already parsed ------------------------------------------

RAW, FLOATS = "raw", "floats"
MAX_LABELS = 1 << 14
"""Labels below this (varints of one or two bytes) are remembered by a layout; larger ones take the full parse."""
MAX_KEYS = 1 << 16
"""Distinct label encodings remembered per layout."""
ENCODED_FALSE = bytes([ENCODED << 3, 0])


@dataclass(slots=True)
class Layout:
    """How the records of one shape are laid out on the wire, learnt from a record parsed in full.

    ``raw``: ``head`` (channels, height, width, the data tag and length), ``size`` bytes of pixels, then a tail
    holding the label and maybe ``encoded: false``; ``tails`` maps each tail seen to its label.

    ``floats``: ``head`` (channels, height, width), the label, ``count`` unpacked floats of 5 bytes each (tag
    0x35 and the value: what Caffe writes), then ``tail`` (empty or ``encoded: false``). ``starts`` maps the
    record's first ``key_len`` bytes (the head, the label's tag and one or two label bytes) to the label and
    the offset of the floats.
    """

    kind: str
    shape: tuple[int, int, int]
    head: bytes
    size: int
    count: int = 0
    tail: bytes = b""
    tails: dict[bytes, int] = field(default_factory=dict)
    starts: dict[bytes, tuple[int, int]] = field(default_factory=dict)

    @property
    def shape_text(self) -> str:
        return "x".join(map(str, self.shape))

    @property
    def key_len(self) -> int:
        return len(self.head) + 3

    def learn(self, value: bytes | memoryview) -> bool:
        """Remember how ``value`` (a record of this layout, already parsed in full) encodes its label."""
        if value[: len(self.head)] != self.head:
            return False
        if self.kind == RAW:
            start = len(self.head) + self.size
            label = _parse_tail(value[start:])
            if label is None or len(self.tails) >= MAX_KEYS:
                return False
            self.tails[bytes(value[start:])] = label
            return True
        got = _label_at(value, len(self.head))
        if got is None or len(self.starts) >= MAX_KEYS:
            return False
        label, offset = got
        if label >= MAX_LABELS or offset >= len(value) or value[offset] != TAG_FLOAT:
            return False
        if len(value) != offset + self.size + len(self.tail) or value[offset + self.size :] != self.tail:
            return False
        self.starts[bytes(value[: self.key_len])] = (label, offset)
        return True


def _label_at(value: bytes | memoryview, at: int) -> tuple[int, int] | None:
    """(label, offset after it) when a label field starts at ``at``."""
    if at >= len(value) or value[at] != (LABEL << 3):
        return None
    try:
        label, pos = read_varint(value, at + 1)
    except WireError:
        return None
    return (label, pos) if label < 1 << 31 else None


def _parse_tail(tail: bytes | memoryview) -> int | None:
    """The label of a raw record's tail: the label field, then optionally ``encoded: false``, nothing else."""
    got = _label_at(tail, 0)
    if got is None:
        return None
    label, pos = got
    rest = tail[pos:]
    return label if len(rest) == 0 or rest == ENCODED_FALSE else None


def layout_of(value: bytes | memoryview, datum: Datum) -> Layout | None:
    """The layout of a record parsed in full, when it is one the fast path knows (else None)."""
    if datum.encoded or datum.label is None or datum.label < 0 or min(datum.shape) <= 0:
        return None
    try:
        fields = walk_fields(value)
    except WireError:
        return None
    numbers = [f[0] for f in fields]
    if numbers[:3] != [CHANNELS, HEIGHT, WIDTH]:
        return None
    rest = numbers[3:]
    if datum.data and not datum.floats:
        if rest not in ([DATA, LABEL], [DATA, LABEL, ENCODED]) or len(datum.data) != datum.expected:
            return None
        start, end = fields[3][2], fields[3][3]
        layout = Layout(RAW, datum.shape, head=bytes(value[:start]), size=end - start)
        return layout if layout.learn(value) else None
    if datum.floats and not datum.data and datum.floats == datum.expected:
        n = datum.floats
        if rest[:1] != [LABEL] or rest[1 : 1 + n] != [FLOAT_DATA] * n or rest[1 + n :] not in ([], [ENCODED]):
            return None
        if any(f[1] != 5 for f in fields[4 : 4 + n]):
            return None  # packed floats: the full parse handles them
        layout = Layout(FLOATS, datum.shape, head=bytes(value[: fields[2][3]]), size=5 * n, count=n)
        layout.tail = bytes(value[fields[3 + n][3] :])
        if layout.tail not in (b"", ENCODED_FALSE):
            return None
        return layout if layout.learn(value) else None
    return None
