"""The check catalogue, the public API and the generated documents stay consistent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

import scanner_service
from scanner_service import checks
from scanner_service.cli import checks_markdown, main
from scanner_service.report import Report
from tests.conftest import run_scan, write_h5

ROOT = Path(__file__).resolve().parents[2]


def test_codes_and_slugs_are_unique_and_well_formed() -> None:
    codes = [c.code for c in checks.CHECKS]
    names = [c.name for c in checks.CHECKS]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    for c in checks.CHECKS:
        assert re.fullmatch(r"[A-Z][0-9]{3}", c.code), c.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c.name), c.name


@pytest.mark.parametrize("check", checks.CHECKS, ids=lambda c: c.code)
def test_every_check_explains_itself(check: checks.Check) -> None:
    for section in ("summary", "why", "fix", "message"):
        text = getattr(check, section)
        assert len(text) > 15, f"{check.code} has no {section}"
    assert "\n" not in check.format_message(2, 3)
    for option in check.options:
        assert option in scanner_service.ScanConfig.model_fields, option
    module = next(m for m in checks.MODULES if m.CHECK is check)
    assert module.__name__.rsplit(".", 1)[-1] == check.name.replace("-", "_")


def test_options_are_spelled_as_the_flags_spell_them() -> None:
    """``dscan explain L005`` listed ``sorted_run_batches``, the flag being ``--sorted-run-batches``."""
    text = checks.get_check("L005").explain()
    options = text.split("## Options", 1)[1]
    assert "- `sorted-run-batches`" in options and "_" not in options


def test_generated_checks_page_is_current() -> None:
    assert (ROOT / "docs" / "checks.md").read_text().rstrip() == checks_markdown().rstrip(), (
        "regenerate: dscan checks --format markdown > docs/checks.md"
    )


def test_schema_file_is_current_and_reports_validate(tmp_path: Path) -> None:
    stored = json.loads((ROOT / "scanner_service" / "schema" / "report.schema.json").read_text())
    assert stored == Report.model_json_schema(), "regenerate: dscan schema > scanner_service/schema/report.schema.json"
    import numpy as np

    data = np.zeros((10, 2), np.float32)
    data[1, 1] = np.nan
    report = run_scan(write_h5(tmp_path / "s.h5", {"x": data, "label": np.arange(10) % 3}), batch_size=4)
    jsonschema.validate(json.loads(report.model_dump_json()), stored)
    out = CliRunner().invoke(main, ["schema"]).output
    assert json.loads(out) == stored


def test_public_surface() -> None:
    assert sorted(scanner_service.__all__) == [
        "DscanError",
        "Partial",
        "Report",
        "ScanConfig",
        "SourceError",
        "UsageError",
        "__version__",
        "build_report",
        "load_config",
        "merge",
        "plan",
        "scan",
        "scan_shard",
    ]
    for name in scanner_service.__all__:
        assert hasattr(scanner_service, name)


def test_core_imports_no_service_framework() -> None:
    banned = re.compile(r"^\s*(from|import)\s+(fastapi|celery|redis|starlette|kombu|uvicorn)\b", re.M)
    offenders = [
        str(p.relative_to(ROOT)) for p in (ROOT / "scanner_service").rglob("*.py") if banned.search(p.read_text())
    ]
    assert offenders == []
