"""msgpack records: ``msgpack.packb({"img": jpeg_bytes, "label": 3})`` (or a list ``[jpeg_bytes, 3]``).

Unlike a pickle, a msgpack value is data only: decoding it runs no code, so dscan decodes it and judges the
encoded image inside with the image checks, and takes the class label beside it. The image is the first
bytes value under ``image``, ``img``, ``data``, ``jpg`` ... (judged whatever it starts with), else the first
bytes value that starts like an image; the label the integer under ``label``, ``target``, ``y``, ``class`` or
``cls`` (in a list, the last integer: ``[index, image, label]``).
"""

from __future__ import annotations

from typing import Any

from .image import image_format

IMAGE_KEYS = ("image", "img", "data", "jpg", "jpeg", "png", "webp", "bytes", "buffer")
LABEL_KEYS = ("label", "labels", "target", "y", "class", "cls", "class_id", "category")
MAP_OR_ARRAY = frozenset({*range(0x81, 0x90), *range(0x91, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF})
"""First bytes of a non-empty msgpack map or array (fixmap, fixarray, array 16/32, map 16/32)."""


class MsgpackError(ValueError):
    """A value that is no msgpack record."""


def unpack(value: bytes | memoryview) -> Any:
    """The object a msgpack value holds; MsgpackError when the value is no (single, whole) msgpack object."""
    import msgpack

    if not len(value) or value[0] not in MAP_OR_ARRAY:
        raise MsgpackError("not a msgpack map or array")
    try:  # raw: strings stay bytes, as the legacy format (use_bin_type=False) stores images as strings too
        return msgpack.unpackb(bytes(value), raw=True, strict_map_key=False)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise MsgpackError(f"not a msgpack record ({type(exc).__name__})") from exc


def looks_like_msgpack(value: bytes | memoryview) -> bool:
    """A msgpack map or array that holds an encoded image (what the ``msgpack`` decoder reads)."""
    try:
        return image_and_label(unpack(value))[0] is not None
    except MsgpackError:
        return False


def image_and_label(obj: Any) -> tuple[bytes | None, int | None]:
    """The encoded image and the class label a record holds (None where it holds none)."""
    if isinstance(obj, dict):
        keyed = {_name(k): v for k, v in obj.items()}
        named = next((keyed[k] for k in IMAGE_KEYS if isinstance(keyed.get(k), bytes)), None)
        # the value under an image's name is the image, judged whatever it starts with (a damaged one must not
        # hide behind a thumbnail); else the first value that starts like an image
        image = named if named is not None else _first_image(obj.values())
        label = next((keyed[k] for k in LABEL_KEYS if k in keyed and _is_int(keyed[k])), None)
        return image, label
    if isinstance(obj, list | tuple):
        ints = [v for v in obj if _is_int(v)]
        return _first_image(obj), ints[-1] if ints else None  # [index, image, label]: the label comes last
    return None, None


def _first_image(values: Any) -> bytes | None:
    return next((v for v in values if isinstance(v, bytes) and image_format(v) is not None), None)


def _name(key: Any) -> str:
    return key.decode("utf-8", "replace").lower() if isinstance(key, bytes) else str(key).lower()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
