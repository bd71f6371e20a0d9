"""Markdown: for pull-request comments and CI job summaries."""

from __future__ import annotations

from .. import checks
from ..report import Report
from .text import human_bytes


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(report: Report) -> str:
    s = report.summary
    verdict = "✅ passed" if s.passed else "❌ failed"
    lines = [
        f"# dscan report: {verdict}",
        "",
        f"`{report.source.path}` ({report.source.kind}): {s.items_scanned:,} items, "
        f"{human_bytes(s.bytes_scanned)} in {s.duration_s:.1f} s. "
        f"**{s.errors} errors, {s.warnings} warnings** (fail on {s.fail_on.value}).",
        "",
    ]
    if report.findings:
        lines += ["| severity | code | check | count | message |", "|---|---|---|---|---|"]
        for f in report.findings:
            lines.append(f"| {f.severity.value} | {f.code} | {f.name} | {f.count} | {_cell(f.message)} |")
        lines.append("")
    for f in report.findings:
        check = checks.BY_CODE[f.code]
        lines += [f"## {f.code} {f.name} ({f.severity.value}): {f.message}", "", f"*Why:* {check.why}", ""]
        lines += [f"*Fix:* {check.fix}", ""]
        for loc in f.locations:
            lines.append(f"- `{_cell(loc.short())}`" + (f": {_cell(loc.detail)}" if loc.detail else ""))
        if f.truncated:
            lines.append(f"- … and {f.count - len(f.locations)} more")
        lines.append("")
    for lab in report.labels:
        lines += [f"## Labels `{lab.dataset or lab.path}` ({lab.kind})", ""]
        if lab.kind == "classes" and lab.histogram:
            head = "| class | count | fraction |" + (" P(absent) |" if lab.batch_size else "")
            lines += [head, "|---|---|---|" + ("---|" if lab.batch_size else "")]
            for row in lab.histogram:
                name = f"{row.label}" + (f" ({row.name})" if row.name else "") + (" **missing**" if row.missing else "")
                cell = f"| {_cell(name)} | {row.count} | {row.fraction:.4f} |"
                if lab.batch_size:
                    cell += f" {row.p_absent:.2%} |" if row.p_absent is not None else " |"
                lines.append(cell)
            lines.append("")
    if report.statistics:
        lines += ["## Statistics", "", "| file | dataset | dtype | count | NaN | Inf | min | max | mean | std |"]
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for st in report.statistics:
            lines.append(
                f"| {_cell(st.path)} | {_cell(st.dataset)} | {st.dtype} | {st.count} | {st.nan} | {st.inf} | "
                f"{st.min} | {st.max} | {st.mean} | {st.std} |"
            )
        lines.append("")
    return "\n".join(lines)
