"""The check catalogue: every check module, listed once, here.

Add a check by writing its module (a ``CHECK`` declaration plus hooks) and naming it in ``MODULES``.
Codes are stable and never reused: V values, L labels, S structure (files, chunks, lists), I images,
R records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from ..errors import UnknownCheck
from . import (
    channel_mismatch,
    constant_feature,
    constant_image,
    constant_sample,
    corrupt_chunk,
    corrupt_image,
    corrupt_image_data,
    decompression_bomb,
    duplicate_image,
    empty_class_folder,
    empty_dataset,
    empty_file,
    exif_rotation,
    extension_mismatch,
    float16_overflow,
    inf_value,
    label_batch_absence,
    label_invalid,
    label_length_mismatch,
    label_missing_class,
    label_sorted_storage,
    link_cycle,
    list_syntax,
    lmdb_corrupt,
    missing_file,
    missing_filter,
    missing_member,
    missing_value,
    nan_value,
    no_samples,
    not_an_image,
    pickled_records,
    record_invalid,
    record_shape_mismatch,
    record_size_mismatch,
    sample_count_mismatch,
    tiny_image,
    trailing_data,
    unpaired_record,
    unreadable_file,
    unusual_mode,
)
from .base import Check

MODULES: tuple[ModuleType, ...] = (
    nan_value,
    inf_value,
    float16_overflow,
    constant_feature,
    constant_sample,
    missing_value,
    label_length_mismatch,
    label_invalid,
    label_missing_class,
    label_batch_absence,
    label_sorted_storage,
    unreadable_file,
    corrupt_chunk,
    missing_filter,
    missing_file,
    list_syntax,
    empty_dataset,
    no_samples,
    missing_member,
    link_cycle,
    empty_file,
    not_an_image,
    corrupt_image,
    corrupt_image_data,
    extension_mismatch,
    trailing_data,
    decompression_bomb,
    constant_image,
    tiny_image,
    unusual_mode,
    channel_mismatch,
    exif_rotation,
    duplicate_image,
    empty_class_folder,
    record_invalid,
    record_size_mismatch,
    record_shape_mismatch,
    lmdb_corrupt,
    pickled_records,
    unpaired_record,
    sample_count_mismatch,
)

CHECKS: tuple[Check, ...] = tuple(m.CHECK for m in MODULES)
BY_CODE: dict[str, Check] = {c.code: c for c in CHECKS}
BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}

Hook = Callable[..., None]


def get_check(code_or_name: str) -> Check:
    """A check by its code (``V001``, any case) or slug (``nan-value``)."""
    key = code_or_name.strip()
    check = BY_CODE.get(key.upper()) or BY_NAME.get(key.lower())
    if check is None:
        raise UnknownCheck(code_or_name, BY_NAME)
    return check


def _expand(selectors: Iterable[str]) -> set[str]:
    codes: set[str] = set()
    for sel in selectors:
        key = sel.strip()
        if key.lower() in BY_NAME:
            codes.add(BY_NAME[key.lower()].code)
            continue
        matched = {code for code in BY_CODE if code.startswith(key.upper())}
        if not key or not matched:
            raise UnknownCheck(sel, BY_NAME)
        codes |= matched
    return codes


def enabled_codes(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> frozenset[str]:
    """Codes left on by ``select`` (codes, prefixes or slugs; empty means all) minus ``ignore``."""
    chosen = _expand(select) if tuple(select) else set(BY_CODE)
    return frozenset(chosen - _expand(ignore))


def hooks(kind: str, enabled: frozenset[str]) -> list[Hook]:
    """The ``on_<kind>`` hooks of the enabled checks, in catalogue order."""
    name = f"on_{kind}"
    return [getattr(m, name) for m in MODULES if m.CHECK.code in enabled and hasattr(m, name)]


def finalizers(enabled: frozenset[str]) -> list[Hook]:
    return [m.finalize for m in MODULES if m.CHECK.code in enabled and hasattr(m, "finalize")]


def catalogue() -> list[dict[str, Any]]:
    """Every check as plain data (for `dscan checks --format json`, the docs and the status page)."""
    return [
        {
            "code": c.code,
            "name": c.name,
            "severity": c.severity.value,
            "summary": c.summary,
            "why": c.why,
            "fix": c.fix,
            "options": list(c.options),
        }
        for c in CHECKS
    ]


__all__ = ["BY_CODE", "BY_NAME", "CHECKS", "MODULES", "Check", "enabled_codes", "finalizers", "get_check", "hooks"]
