"""Report renderers: text (terminal), json, junit, markdown. One module per format, imported when used."""

from __future__ import annotations

import importlib

from ..errors import UsageError
from ..report import Report

FORMATS = ("text", "json", "junit", "markdown")
MODULES = {"text": "text", "json": "json_format", "junit": "junit", "markdown": "markdown"}
MEDIA_TYPES = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
    "junit": "application/xml",
    "markdown": "text/markdown; charset=utf-8",
}


def render(report: Report, fmt: str) -> str:
    if fmt not in MODULES:
        raise UsageError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    module = importlib.import_module(f"{__name__}.{MODULES[fmt]}")
    text: str = module.render(report)
    return text


__all__ = ["FORMATS", "MEDIA_TYPES", "render"]
