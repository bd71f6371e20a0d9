"""The dscan command as CI uses it: exit statuses, formats, options, config files."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from scanner_service.cli import main
from tests.conftest import write_h5


@pytest.fixture
def dirty(tmp_path: Path, rng: np.random.Generator) -> Path:
    data = rng.normal(size=(200, 4)).astype(np.float32)
    data[13, 2] = np.nan
    big = rng.normal(size=(200, 4)).astype(np.float32)
    big[50, 0] = 1e6
    return write_h5(tmp_path / "dirty.h5", {"x": data, "big": big})


@pytest.fixture
def clean(tmp_path: Path, rng: np.random.Generator) -> Path:
    return write_h5(tmp_path / "clean.h5", {"x": rng.normal(size=(200, 4)).astype(np.float32)})


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("fixture", "extra", "status"),
    [
        ("clean", [], 0),
        ("dirty", [], 1),
        ("dirty", ["--fail-on", "never"], 0),
        ("dirty", ["--ignore", "V001"], 0),
        ("dirty", ["--ignore", "nan-value", "--fail-on", "warning"], 1),
        ("dirty", ["--select", "V003"], 0),
    ],
    ids=["clean", "nan-fails", "never", "ignore-code", "warning-threshold", "select-warning-only"],
)
def test_exit_status(request: pytest.FixtureRequest, fixture: str, extra: list[str], status: int) -> None:
    path = request.getfixturevalue(fixture)
    code, out = invoke("scan", str(path), "-j", "0", *extra)
    assert code == status, out


def test_usage_errors_exit_2(tmp_path: Path, dirty: Path) -> None:
    assert invoke("scan", str(tmp_path / "nope.h5"))[0] == 2
    (tmp_path / "notes.md").write_text("hello")
    code, out = invoke("scan", str(tmp_path / "notes.md"))
    assert code == 2 and "not a dataset dscan can read" in out
    code, out = invoke("scan", str(dirty), "--select", "X999")
    assert code == 2 and "unknown check 'X999'" in out
    code, out = invoke("scan", str(dirty), "--num-classes", "0")
    assert code == 2 and "num_classes" in out
    assert invoke("scan", str(dirty), "--format", "yaml")[0] == 2


def test_text_report_says_what_where_why_and_fix(dirty: Path) -> None:
    code, out = invoke("scan", str(dirty), "-j", "0")
    assert code == 1
    assert "ERROR V001 nan-value: NaN in 1 sample (1 values)" in out
    assert "dirty.h5:/x[13]: 1 NaN value" in out
    assert "why: NaN propagates" in out and "fix: Go to the listed samples" in out
    assert "WARNING V003 float16-overflow" in out and "dirty.h5:/big[50]" in out
    assert out.rstrip().endswith("FAILED: 1 error, 1 warning (fail on error)")
    assert "\x1b[" not in out  # no colour codes when not a terminal


def test_json_report_shape_and_max_locations(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.normal(size=(100, 2)).astype(np.float32)
    data[::5, 0] = np.nan
    path = write_h5(tmp_path / "many.h5", {"x": data})
    code, out = invoke("scan", str(path), "--format", "json", "--max-locations", "3", "-j", "0")
    report = json.loads(out)
    assert code == 1
    assert report["schema_version"] == "1.0"
    assert report["source"]["kind"] == "hdf5" and report["summary"]["passed"] is False
    nan = report["findings"][0]
    assert (nan["code"], nan["name"], nan["severity"], nan["count"], nan["truncated"]) == (
        "V001",
        "nan-value",
        "error",
        20,
        True,
    )
    assert [loc["index"] for loc in nan["locations"]] == [0, 5, 10]
    assert {"errors", "warnings", "items_scanned", "bytes_scanned", "duration_s", "passed"} <= set(report["summary"])


def test_output_file_and_junit_and_markdown(tmp_path: Path, dirty: Path) -> None:
    target = tmp_path / "report.xml"
    code, out = invoke("scan", str(dirty), "--format", "junit", "--output", str(target), "-j", "0")
    assert code == 1 and "FAILED" in out
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["nan-value"]
    code, out = invoke("scan", str(dirty), "--format", "markdown", "-j", "0")
    assert "# dscan report: ❌ failed" in out and "| error | V001 | nan-value | 1 |" in out


def test_config_file_and_pyproject(tmp_path: Path, dirty: Path) -> None:
    cfg = tmp_path / "dscan.toml"
    cfg.write_text('ignore = ["nan-value"]\nfail-on = "warning"\n')
    assert invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")[0] == 1
    cfg.write_text('[tool.dscan]\nignore = ["V001", "V003"]\n')
    assert invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")[0] == 0
    cfg.write_text("colour = 3\n")
    code, out = invoke("scan", str(dirty), "--config", str(cfg))
    assert code == 2 and "unknown option 'colour'" in out


def test_checks_and_explain() -> None:
    code, out = invoke("checks")
    assert code == 0 and "V001  nan-value" in out
    code, out = invoke("explain", "nan-value")
    assert code == 0 and out.startswith("# V001 nan-value (error)") and "## How to fix it" in out
    assert invoke("explain", "v002")[1].startswith("# V002 inf-value")
    assert invoke("explain", "nope")[0] == 2
    assert json.loads(invoke("checks", "--format", "json")[1])[0]["code"] == "V001"


def test_demo_finds_every_seeded_defect() -> None:
    from scanner_service.demo import SEEDED

    result = CliRunner().invoke(main, ["scan", "--format", "json", "-j", "2"])
    assert result.exit_code == 1
    assert "seeded defects" in result.stderr
    report = json.loads(result.stdout)
    found = {f["code"]: f for f in report["findings"]}
    for seeded, (path, dataset, index) in SEEDED.items():
        assert seeded in found, seeded
        locs = found[seeded]["locations"]
        assert any(
            loc["path"] == path
            and (dataset is None or loc["dataset"] == dataset)
            and (index is None or loc["index"] == index)
            for loc in locs
        ), (seeded, locs)


@pytest.mark.slow
def test_console_script_in_a_real_process(dirty: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(dirty), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["findings"][0]["locations"][0]["index"] == 13


@pytest.mark.slow
def test_console_script_exits_at_once_with_everything_written(tmp_path: Path, dirty: Path) -> None:
    """The console command ends the process without tearing down the interpreter: the exit status, a large
    report piped to stdout, the file written with --output and the error message on stderr must all be there."""
    out = tmp_path / "r.md"
    cases = [
        (["scan", str(dirty), "--format", "json", "--max-locations", "5000"], 1),
        (["scan", str(dirty), "--format", "markdown", "--output", str(out)], 1),
        (["scan", str(tmp_path / "missing.h5")], 2),
        (["explain", "nan-value"], 0),
    ]
    for args, status in cases:
        proc = subprocess.run([sys.executable, "-m", "scanner_service.cli", *args], capture_output=True, text=True)
        assert proc.returncode == status, (args, proc.stderr)
        if args[-1] == "5000":
            assert json.loads(proc.stdout)["summary"]["passed"] is False
        if "--output" in args:
            assert out.read_text().startswith("#") and "V001" in out.read_text()
        if status == 2:
            assert "does not exist" in proc.stderr
        if args[0] == "explain":
            assert proc.stdout.startswith("# V001 nan-value")
