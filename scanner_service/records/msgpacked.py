"""msgpack records: ``msgpack.packb({"img": jpeg_bytes, "label": 3})`` (or a list ``[jpeg_bytes, 3]``), and
arrays in msgpack-numpy's encoding (tensorpack, ``msgpack_numpy.patch()``).

Unlike a pickle, a msgpack value is data only: decoding it runs no code, so dscan decodes it and judges the
encoded image inside with the image checks, and takes the class label beside it. The image is the first
bytes value under ``image``, ``img``, ``data``, ``jpg`` ... (judged whatever it starts with), else the first
bytes value that starts like an image; the label the number under ``label``, ``target``, ``y``, ``class`` or
``cls`` (in a list, its only integer, else its only float).

A record may hold pixels or features as an array instead: msgpack-numpy's ``{nd, type, kind, shape, data}``
map (a numpy scalar is the same map with ``nd`` false: a label), or bare pixel bytes under an image's name
with a ``shape`` beside them whose size they have (uint8). Those arrays go to the numeric checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

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


@dataclass(slots=True)
class MsgpackRecord:
    """What a msgpack record holds: an encoded image, else an array (pixels or features), and its label (as
    stored, a number or not; None when it has none)."""

    image: bytes | None = None
    array: np.ndarray[Any, Any] | None = None
    label: Any = None


def looks_like_msgpack(value: bytes | memoryview) -> bool:
    """A msgpack map or array that holds an encoded image or an array (what the ``msgpack`` decoder reads)."""
    try:
        record = read_record(value)
    except MsgpackError:
        return False
    return record.image is not None or record.array is not None


def read_record(value: bytes | memoryview) -> MsgpackRecord:
    """The encoded image or array and the label a msgpack value holds; MsgpackError when it is no msgpack
    record."""
    obj, legacy = unpack(value)
    return record_of(obj, legacy)


def record_of(obj: Any, legacy: bool = False) -> MsgpackRecord:
    """The encoded image or the array, and the class label, a record holds. ``legacy``: strings came back as
    bytes, so a line of text under an image's name is a file name, not an image."""
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
        stored = [_scalar(keyed[k]) for k in LABEL_KEYS if keyed.get(k) is not None]
        label = next((v for v in stored if is_number(v)), stored[0] if stored else None)
        array = None
        if image is None or _is_pixels(image, keyed):
            image = None
            array = _first_array([*(keyed.get(k) for k in (*IMAGE_KEYS, *GENERIC_KEYS)), *obj.values()], keyed)
        return MsgpackRecord(image, array, label)
    if isinstance(obj, list | tuple):
        numbers = [v for v in (_scalar(v) for v in obj) if is_number(v)]
        ints = [v for v in numbers if _is_int(v)]
        # (image, label): the one integer, else the one float (``float(y)``, ``np.float32(y)``: 3.0 is class 3,
        # NaN no class); with several ([index, image, label], [image, label, h, w]) no key says which is the
        # label, and none is taken
        label = ints[0] if len(ints) == 1 else numbers[0] if len(numbers) == 1 else None
        image = _first_image(obj)
        return MsgpackRecord(image, None if image is not None else _first_array(obj, {}), label)
    return MsgpackRecord()


def numpy_value(value: Any) -> np.ndarray[Any, Any] | None:
    """The array (or 0-d scalar) of msgpack-numpy's encoding ``{nd, type, kind, shape, data}`` (a scalar: ``nd``
    false, no shape); None for anything else, and for what it does not decode without running code (object
    arrays) or whose bytes do not fill the declared shape. Structured dtypes (``kind`` V) are not decoded."""
    if not isinstance(value, dict) or len(value) > 5:
        return None
    inner = {_name(k): v for k, v in value.items()}
    data, kind, declared = inner.get("data"), inner.get("kind", b""), inner.get("type")
    if "nd" not in inner or not isinstance(data, bytes) or kind not in (b"", ""):
        return None
    try:
        dtype = np.dtype(declared.decode() if isinstance(declared, bytes) else declared)
    except (TypeError, ValueError, UnicodeDecodeError):
        return None
    shape = inner.get("shape") if inner["nd"] else ()
    if dtype.hasobject or not dtype.itemsize or not isinstance(shape, list | tuple):
        return None
    if not all(_is_int(n) and n >= 0 for n in shape) or len(data) != math.prod(shape) * dtype.itemsize:
        return None
    return np.frombuffer(data, dtype).reshape(tuple(shape))


def _scalar(value: Any) -> Any:
    """A numpy scalar in msgpack-numpy's encoding as the Python number it holds (labels); else ``value``."""
    array = numpy_value(value)
    if array is not None and array.ndim == 0 and array.dtype.kind in "biuf":
        return array.item()
    return value


def _is_pixels(image: bytes, keyed: dict[str, Any]) -> bool:
    """Bytes under an image's name that are bare pixels: they start like no image and have the size of the
    ``shape`` stored beside them (``{"image": arr.tobytes(), "shape": [h, w, 3]}``)."""
    shape = keyed.get("shape")
    return (
        image_format(image) is None
        and isinstance(shape, list | tuple)
        and bool(shape)
        and all(_is_int(n) and n > 0 for n in shape)
        and math.prod(shape) == len(image)
    )


def _first_array(values: Any, keyed: dict[str, Any]) -> np.ndarray[Any, Any] | None:
    """The first array among ``values`` with at least one element (msgpack-numpy's, or bare pixels with a
    ``shape`` in ``keyed``) that is no encoded image."""
    for value in values:
        array = numpy_value(value)
        if array is None and isinstance(value, bytes) and _is_pixels(value, keyed):
            array = np.frombuffer(value, np.uint8).reshape(tuple(keyed["shape"]))
        if array is not None and array.ndim and array.size and not _encoded(array):
            return array
    return None


def _encoded(array: np.ndarray[Any, Any]) -> bool:
    """A 1-D uint8 array holding an encoded image (tensorpack stores JPEG bytes as ``np.frombuffer(jpeg)``)."""
    return array.ndim == 1 and array.dtype == np.uint8 and image_format(array.tobytes()[:64]) is not None


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
        array = numpy_value(value)
        if array is not None:  # an array: an image only when it holds an encoded one's bytes
            return array.tobytes() if _encoded(array) else None
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
