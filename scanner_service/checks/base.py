"""The declaration every check makes: code, slug, severity and its explanation.

A check module holds one ``CHECK = Check(...)`` and the hooks it needs:

- ``on_<kind>(item, ctx)`` for the items it consumes inside a shard (``on_numeric`` also gets the block's
  summary: ``on_numeric(block, summary, ctx)``);
- ``finalize(ctx)`` for what it can only judge on the merged result (missing classes, constant features).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..severity import Severity

SECTIONS = ("summary", "why", "fix")


@dataclass(frozen=True, slots=True)
class Check:
    code: str
    name: str
    severity: Severity
    summary: str
    """What it finds, one sentence."""
    why: str
    """Why this breaks training (NaN, crash, silent harm)."""
    fix: str
    """What to do about it."""
    message: str
    """One-line report message; may use {count}, {values}, {s} and {es} (plural of count), {vs} (of values)."""
    example: str = ""
    options: tuple[str, ...] = ()
    """ScanConfig fields that tune it."""
    since: str = "0.1.0"

    def format_message(self, count: int, values: int) -> str:
        s, es = ("s", "es") if count != 1 else ("", "")
        return self.message.format(count=count, values=values, s=s, es=es, vs="s" if values != 1 else "")

    def explain(self) -> str:
        """The full explanation, as ``dscan explain`` prints it (Markdown)."""
        parts = [
            f"# {self.code} {self.name} ({self.severity.value})",
            "",
            self.summary,
            "",
            "## Why it breaks training",
            self.why,
            "",
            "## How to fix it",
            self.fix,
        ]
        if self.example:
            parts += ["", "## Example", self.example]
        if self.options:
            # spelled as the flags and the config files spell them (``--sorted-run-batches``, ``sorted-run-batches``)
            parts += ["", "## Options", *(f"- `{opt.replace('_', '-')}`" for opt in self.options)]
        return "\n".join(parts) + "\n"
