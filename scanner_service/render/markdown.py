"""Markdown: for pull-request comments and CI job summaries."""

from __future__ import annotations

from .. import checks
from ..report import Report
from . import counted, human_bytes, label_title, notes

SPECIAL = frozenset("\\`*_<>[]#|~!&$")
"""Characters that would start markup in running text (CommonMark lets a backslash escape any of them; GitHub
reads text between two '$' as math)."""


def _text(text: str) -> str:
    """Data (a file name, a detail) as plain text: every character that could start markup escaped ('|' too,
    so the same text reads the same in a table cell and out of one)."""
    out = "".join(f"\\{c}" if c in SPECIAL else c for c in text)
    return out.replace("\r", " ").replace("\n", " ")


def _code(text: str, table: bool = False) -> str:
    """Data as an inline code span: fenced with more backticks than it holds in a row, padded when it starts
    or ends with one. In a table a '|' still ends the cell unless escaped (GFM), so there it is escaped."""
    text = text.replace("\r", " ").replace("\n", " ")
    run = longest = 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    body = text.replace("|", "\\|") if table else text
    return f"{fence}{pad}{body}{pad}{fence}"


def _number(x: float | None) -> str:
    """A statistic for a table cell: '–' when there is none (no finite value, or a sum that overflowed), never
    Python's 'None'."""
    return "–" if x is None else str(x)


def render(report: Report) -> str:
    s = report.summary
    verdict = "✅ passed" if s.passed else "❌ failed"
    lines = [
        f"# dscan report: {verdict}",
        "",
        f"{_code(report.source.path)} ({report.source.kind}): {counted(s.items_scanned, 'item')}, "
        f"{human_bytes(s.bytes_scanned)} in {s.duration_s:.1f} s. "
        f"**{counted(s.errors, 'error')}, {counted(s.warnings, 'warning')}** (fail on {s.fail_on.value}).",
        "",
    ]
    if report.findings:
        lines += ["| severity | code | check | count | message |", "|---|---|---|---|---|"]
        for f in report.findings:
            lines.append(f"| {f.severity.value} | {f.code} | {f.name} | {f.count} | {_text(f.message)} |")
        lines.append("")
    for f in report.findings:
        check = checks.BY_CODE[f.code]
        lines += [f"## {f.code} {f.name} ({f.severity.value}): {_text(f.message)}", "", f"*Why:* {check.why}", ""]
        lines += [f"*Fix:* {check.fix}", ""]
        for loc in f.locations:
            lines.append(f"- {_code(loc.short())}" + (f": {_text(loc.detail)}" if loc.detail else ""))
        if f.truncated:
            lines.append(f"- … and {f.count - len(f.locations)} more")
        lines.append("")
    shown = notes(report)
    if shown:
        lines += ["## Notes", ""] + [f"- {_text(note)}" for note in shown] + [""]
    for lab in report.labels:
        lines += [f"## Labels {_code(label_title(lab.stream, lab.path, lab.dataset))} ({lab.kind})", ""]
        if lab.kind == "classes" and lab.histogram:
            head = "| class | count | fraction |" + (" P(absent) |" if lab.batch_size else "")
            lines += [head, "|---|---|---|" + ("---|" if lab.batch_size else "")]
            for row in lab.histogram:
                name = f"{row.label}" + (f" ({_text(row.name)})" if row.name else "")
                name += " **missing**" if row.missing else ""
                cell = f"| {name} | {row.count} | {row.fraction:.4f} |"
                if lab.batch_size:
                    cell += f" {row.p_absent:.2%} |" if row.p_absent is not None else " |"
                lines.append(cell)
            lines.append("")
    if report.statistics:
        lines += ["## Statistics", "", "| file | dataset | dtype | count | NaN | Inf | min | max | mean | std |"]
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for st in report.statistics:
            lines.append(
                f"| {_code(st.path, table=True)} | {_code(st.dataset, table=True)} | {st.dtype} | {st.count} | "
                f"{st.nan} | {st.inf} | " + " | ".join(_number(x) for x in (st.min, st.max, st.mean, st.std)) + " |"
            )
        lines.append("")
    return "\n".join(lines)
