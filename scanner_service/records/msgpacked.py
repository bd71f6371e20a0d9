"""msgpack records: ``msgpack.packb({"img": jpeg_bytes, "label": 3})`` (or a list ``[jpeg_bytes, 3]``).

Unlike a pickle, a msgpack value is data only: decoding it runs no code, so dscan decodes it and judges the
encoded image inside with the image checks, and takes the class label beside it. The image is the first
bytes value under ``image``, ``img``, ``data``, ``jpg`` ... (judged whatever it starts with), else the first
bytes value that starts like an image; the label the integer under ``label``, ``target``, ``y``, ``class`` or
``cls`` (in a list, its only integer).
"""

from __future__ import annotations

from typing import Any

from .image import image_format

IMAGE_KEYS = ("image", "img", "jpg", "jpeg", "png", "webp")
"""Names whose value is the image, judged whatever it starts with."""
GENERIC_KEYS = ("data", "bytes", "buffer")
"""Names whose value is the image only when it starts like one (a feature vector may sit under ``data``); also
where a nested dict keeps the bytes (msgpack-numpy's ``data``, Hugging Face's ``{"bytes": ..., "path": ...}``)."""
LABEL_KEYS = ("label", "labels", "target", "y", "class", "cls", "class_id", "category")
MAP_OR_ARRAY = frozenset({*range(0x81, 0x90), *range(0x91, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF})
"""First bytes of a non-empty msgpack map or array (fixmap, fixarray, array 16/32, map 16/32)."""


class MsgpackError(ValueError):
    """A value that is no msgpack record."""


def unpack(value: bytes | memoryview) -> tuple[Any, bool]:
    """The object a msgpack value holds (text as str, binary as bytes; in the legacy format, whose strings are
    not UTF-8, every string as bytes: then the flag is set); MsgpackError when the value is no (single, whole)
    msgpack object."""
    import msgpack

    if not len(value) or value[0] not in MAP_OR_ARRAY:
        raise MsgpackError("not a msgpack map or array")
    data = bytes(value)
    for raw in (False, True):  # text as str; the legacy format (use_bin_type=False) stores images as "strings"
        try:
            return msgpack.unpackb(data, raw=raw, strict_map_key=False), raw
        except UnicodeDecodeError:
            continue
        except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise MsgpackError(f"not a msgpack record ({type(exc).__name__})") from exc
    raise MsgpackError("not a msgpack record")


def looks_like_msgpack(value: bytes | memoryview) -> bool:
    """A msgpack map or array that holds an encoded image (what the ``msgpack`` decoder reads)."""
    try:
        return read_record(value)[0] is not None
    except MsgpackError:
        return False


def read_record(value: bytes | memoryview) -> tuple[bytes | None, Any]:
    """The encoded image and the label a msgpack value holds (None where it holds none; the label as stored,
    a number or not); MsgpackError when it is no msgpack record."""
    obj, legacy = unpack(value)
    return image_and_label(obj, legacy)


def image_and_label(obj: Any, legacy: bool = False) -> tuple[bytes | None, Any]:
    """The encoded image and the class label a record holds (None where it holds none). ``legacy``: strings
    came back as bytes, so a line of text under an image's name is a file name, not an image."""
    if isinstance(obj, dict):
        keyed = {_name(k): v for k, v in obj.items()}
        found = (_image_bytes(keyed.get(k), legacy) for k in IMAGE_KEYS)
        named = next((v for v in found if v is not None), None)
        if named is None:
            named = _first_image(keyed[k] for k in GENERIC_KEYS if k in keyed)
        # the value under an image's name is the image, judged whatever it starts with (a damaged one must not
        # hide behind a thumbnail); else the first value that starts like an image
        image = named if named is not None else _first_image(obj.values())
        # the first label that is a number ('class': 'cat' beside 'class_id': 0); else the first one stored, for
        # the caller to name as no number
        stored = [keyed[k] for k in LABEL_KEYS if keyed.get(k) is not None]
        label = next((v for v in stored if is_number(v)), stored[0] if stored else None)
        return image, label
    if isinstance(obj, list | tuple):
        ints = [v for v in obj if _is_int(v)]
        # (image, label): the one integer; with several ([index, image, label], [image, label, h, w]) no key says
        # which is the label, and none is taken
        return _first_image(obj), ints[0] if len(ints) == 1 else None
    return None, None


def _first_image(values: Any) -> bytes | None:
    """The first value that starts like an image: bytes, a legacy string, or the bytes inside a dict."""
    for value in values:
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
        if isinstance(raw, dict):
            raw = _image_bytes(raw, legacy=False)
        if isinstance(raw, bytes) and image_format(raw) is not None:
            return raw
    return None


def _image_bytes(value: Any, legacy: bool) -> bytes | None:
    """The bytes a value under an image's name holds as an image: binary, judged whatever it starts with (a
    damaged image must not hide behind a thumbnail), except, in the legacy format, a string that is a line of
    text (a file name); a str only when its bytes start like an image (a legacy string that happened to be
    UTF-8: a small BMP tile)."""
    from .detect import short_text

    if isinstance(value, dict):  # {"bytes": jpeg, "path": None}, msgpack-numpy's {"nd": True, "data": jpeg}
        inner = {_name(k): v for k, v in value.items()}
        return next((v for k in GENERIC_KEYS if isinstance(v := inner.get(k), bytes)), None)
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")
        return raw if image_format(raw) is not None else None
    if not isinstance(value, bytes):
        return None
    if legacy and image_format(value) is None and short_text(value):
        return None
    return value


def _name(key: Any) -> str:
    return key.decode("utf-8", "replace").lower() if isinstance(key, bytes) else str(key).lower()


def is_number(value: Any) -> bool:
    """An int or a float (a float label is judged by the label checks: 2.5 or NaN is no class id)."""
    return _is_int(value) or isinstance(value, float)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
