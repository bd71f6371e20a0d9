"""Record values (LMDB values): the decoders, and detecting which one a dataset needs.

Decoders, chosen by ``--decoder`` or detected from a sample of values:

- ``datum``: Caffe's ``Datum`` protobuf (``datum.py``);
- ``image``: an encoded image (JPEG, PNG ...), judged by the image checks (``image.py`` only sniffs);
- ``npy``: a ``np.save`` blob (``npy.py``);
- ``raw:DTYPE:SHAPE``: bare numbers of a declared type and shape (``raw.py``);
- ``msgpack``: a msgpack map or list holding an encoded image and its label (``msgpacked.py``).

Pickled values are recognised (``pickles.py``) and reported, never unpickled. ``detect.py`` picks the
decoder from a sample of values. (This module stays light: no protobuf import until a decoder needs it.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..errors import ConfigError
from ..location import Location
from .raw import RawSpec, parse_raw

DECODERS = ("datum", "image", "npy", "msgpack", "raw:DTYPE:SHAPE")
PICKLE = "pickle"


@dataclass(frozen=True, slots=True)
class Decoder:
    """A value decoder: ``datum``, ``image``, ``npy``, ``raw`` (with its spec), or ``pickle`` (not decoded)."""

    name: str
    raw: RawSpec | None = None

    def __str__(self) -> str:
        return str(self.raw) if self.raw is not None else self.name


def parse_decoder(spec: str) -> Decoder:
    """The decoder a ``--decoder`` value names; ConfigError when it names none."""
    text = spec.strip()
    if text.lower() in ("datum", "image", "npy", "msgpack"):
        return Decoder(text.lower())
    if text.lower().startswith("raw:"):
        return Decoder("raw", parse_raw(text))
    raise ConfigError(f"unknown decoder {spec!r} (decoders: {', '.join(DECODERS)})")


@dataclass(slots=True)
class RecordTally:
    """Records a reader went through since its last tally: how many, and their shapes.

    ``shapes`` counts records per shape (``3x32x32``); ``samples`` holds the first locations of each shape
    (at most the location cap per shard). ``items`` counts the records for progress and the report.
    """

    kind: ClassVar[str] = "records"
    path: str
    shapes: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[Location]] = field(default_factory=dict)
    items: int = 0
    nbytes: int = 0


__all__ = ["DECODERS", "PICKLE", "Decoder", "RecordTally", "parse_decoder"]
