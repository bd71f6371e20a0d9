"""The terminal report: verdict first, then each finding with where it is, why it matters and the fix."""

from __future__ import annotations

import io
import textwrap

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import checks
from ..report import Report
from ..severity import Severity
from . import counted, human_bytes, label_title, notes

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


class _Text(io.StringIO):
    """The report's text, for a stream of ``encoding``: rich draws tables with ASCII lines for one that is no
    UTF (a Latin-1 locale has no box-drawing characters)."""

    def __init__(self, encoding: str) -> None:
        super().__init__()
        self.text_encoding = encoding

    @property  # (StringIO's is None)
    def encoding(self) -> str:  # type: ignore[override]
        return self.text_encoding


def render(report: Report, color: bool = False, width: int = 100, encoding: str = "utf-8") -> str:
    out = _Text(encoding)
    console = Console(file=out, force_terminal=color, no_color=not color, width=width, highlight=False)
    s = report.summary
    console.print(
        Text.assemble(
            ("dscan ", "bold"),
            f"{report.source.path} ({report.source.kind}): {counted(s.items_scanned, 'item')}, "
            f"{human_bytes(s.bytes_scanned)}, {s.duration_s:.2f} s",
        ),
        soft_wrap=True,  # one line however long the path, like the locations: a CI log is searched by line
    )
    for f in report.findings:
        check = checks.BY_CODE[f.code]
        console.print()
        console.print(
            Text.assemble(
                (f"{f.severity.value.upper()} ", STYLE[f.severity]),
                (f"{f.code} {f.name}", "bold"),
                f": {f.message}",
            )
        )
        for loc in f.locations:  # one line each, never wrapped: a path cut in two cannot be searched for
            console.print(Text(f"  {loc.short()}" + (f": {loc.detail}" if loc.detail else "")), soft_wrap=True)
        if f.truncated:
            console.print(Text(f"  ... and {f.count - len(f.locations)} more (raise --max-locations to list them)"))
        for label, text in (("why", check.why), ("fix", check.fix)):
            console.print(Text(_hanging(f"  {label}: ", text, width), style="dim"), soft_wrap=True)
    for lab in report.labels:
        if lab.kind != "classes" or not lab.histogram:
            continue
        console.print()
        counts = f"{counted(lab.total, 'label')}, {counted(lab.distinct, 'class', 'classes')}"
        if lab.missing_count:  # (the table lists the missing ones too: "2 classes" above 3 rows read wrong)
            counts += f" with samples, {lab.missing_count:,} missing"
        title = f"labels {label_title(lab.stream, lab.path, lab.dataset)}: {counts}"
        if lab.imbalance_ratio:
            title += f", imbalance {lab.imbalance_ratio:.1f}x"
        console.print(Text(title, style="bold"), soft_wrap=True)  # above the table, not its title: a table wraps it
        table = Table(show_edge=False)
        table.add_column("class", justify="right")
        table.add_column("count", justify="right")
        table.add_column("fraction", justify="right")
        if lab.batch_size:
            table.add_column(f"P(absent from {lab.batch_size})", justify="right")
        for row in lab.histogram[:50]:
            name = f"{row.label}" + (f" {row.name}" if row.name else "")
            cells = [name + (" MISSING" if row.missing else ""), f"{row.count:,}", f"{row.fraction:.2%}"]
            if lab.batch_size:
                cells.append(f"{row.p_absent:.2%}" if row.p_absent is not None else "")
            # as Text, not str: a class folder named like rich markup ('[misc]', 'a[b]') is shown as it is
            table.add_row(*map(Text, cells), style="red" if row.missing else None)
        console.print(table)
        if len(lab.histogram) > 50:
            console.print(Text(f"  ... {len(lab.histogram) - 50} more classes (see --format json)"))
    shown = notes(report)
    if shown:
        console.print()
        for note in shown:
            console.print(Text(_hanging("note: ", note, width), style="dim"), soft_wrap=True)
    console.print()
    verdict = "PASSED" if s.passed else "FAILED"
    console.print(
        Text.assemble(
            (verdict, "bold green" if s.passed else "bold red"),
            f": {counted(s.errors, 'error')}, {counted(s.warnings, 'warning')} (fail on {s.fail_on.value})",
        )
    )
    return out.getvalue()


def _hanging(label: str, text: str, width: int) -> str:
    """``text`` wrapped to ``width`` after ``label``, its next lines indented under the text's start."""
    return textwrap.fill(
        text, width=width, initial_indent=label, subsequent_indent=" " * len(label), break_on_hyphens=False
    )
