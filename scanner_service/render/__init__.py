"""Report renderers: text (terminal), json, junit, markdown. One module per format."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UsageError
from ..report import Report
from . import json_format, junit, markdown, text

RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": text.render,
    "json": json_format.render,
    "junit": junit.render,
    "markdown": markdown.render,
}
FORMATS = tuple(RENDERERS)
MEDIA_TYPES = {
    "text": "text/plain; charset=utf-8",
    "json": "application/json",
    "junit": "application/xml",
    "markdown": "text/markdown; charset=utf-8",
}


def render(report: Report, fmt: str) -> str:
    try:
        return RENDERERS[fmt](report)
    except KeyError:
        raise UsageError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})") from None


__all__ = ["FORMATS", "MEDIA_TYPES", "RENDERERS", "render"]
