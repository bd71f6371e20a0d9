"""Which decoder a dataset's values need, from a sample of them."""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass

from . import PICKLE, Decoder
from .datum import looks_like_datum
from .image import image_format
from .msgpacked import looks_like_msgpack
from .npy import is_npy
from .pickles import pickle_protocol

PREFERENCE: tuple[str | None, ...] = ("datum", "image", "npy", "msgpack", PICKLE, None)
"""Order among decoders with as many votes."""


def sniff(value: bytes | memoryview) -> str | None:
    """What one value looks like: ``pickle``, ``npy``, ``image``, ``datum``, ``msgpack``, or None."""
    if pickle_protocol(value) is not None:
        return PICKLE
    if is_npy(value):
        return "npy"
    if image_format(value) is not None:
        return "image"
    if looks_like_datum(value):
        return "datum"
    if looks_like_msgpack(value):
        return "msgpack"
    return None


@dataclass(frozen=True, slots=True)
class Detected:
    decoder: Decoder | None
    votes: dict[str, int]
    sampled: int

    def describe(self) -> str:
        if self.decoder is None:
            return f"no decoder recognised the {self.sampled} values sampled"
        return f"detected from {self.votes.get(self.decoder.name, 0)} of {self.sampled} values sampled"


TEXT_BYTES = 4096


def short_text(value: bytes | memoryview) -> bool:
    """A short line of UTF-8 text: what writers keep beside the samples (a count, a label, a transcription),
    never a sample dscan decodes."""
    if not 0 < len(value) <= TEXT_BYTES:
        return False
    try:
        text = bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text)  # ZWNJ is text


def detect(samples: list[bytes]) -> Detected:
    """The decoder most sampled values look like (None when most look like nothing known). Short text values
    (counts, labels beside images) have no vote, unless every value is one."""
    counted = [v for v in samples if not short_text(v)] or samples
    votes = Counter(sniff(v) for v in counted)
    ranked = sorted(votes.items(), key=lambda kv: (-kv[1], PREFERENCE.index(kv[0])))
    best = ranked[0][0] if ranked else None
    clean = {k: n for k, n in votes.items() if k is not None}
    return Detected(Decoder(best) if best is not None else None, clean, len(samples))
