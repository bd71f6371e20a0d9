"""Reports as CI reads them: JSON that a strict parser and the schema accept, text and notes that show what the
data holds and what the scan left out."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import h5py
import jsonschema
import lmdb
import numpy as np
from click.testing import CliRunner
from PIL import Image

from scanner_service import checks
from scanner_service.cli import checks_markdown, main
from scanner_service.report import Report


def _strict_json(text: str) -> object:
    """JSON as RFC 8259 defines it: NaN and Infinity are no numbers there (Python's json takes them)."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_statistics_that_overflow_stay_valid_json_beside_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    # finite values whose sum overflows: the mean and std become NaN/Inf inside the scan; a --root that is not
    # UTF-8 sends the report through the fallback encoder, which wrote them as the bare word NaN
    folder = os.fsencode(tmp_path) + b"/r\xe9"
    os.mkdir(folder)
    with h5py.File(folder + b"/a.h5", "w") as fh:
        fh["x"] = np.array([[1e308, 1.7e308]] * 10)
    (tmp_path / "list.txt").write_text("a.h5\n")
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", b"list.txt", "--root", folder, "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = _strict_json(proc.stdout)
    jsonschema.validate(report, Report.model_json_schema())
    assert isinstance(report, dict)
    assert report["config"]["root"].endswith("r\\xe9")
    [stats] = report["statistics"]
    assert (stats["min"], stats["max"], stats["mean"]) == (1e308, 1.7e308, None)


def _image(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)


def test_class_names_that_look_like_markup_are_shown_as_they_are(tmp_path: Path) -> None:
    for seed, name in enumerate(["[misc]", "a[b]", "[bold]c"]):
        _image(tmp_path / "data" / name / "0.png", seed)
    result = CliRunner().invoke(main, ["scan", str(tmp_path / "data"), "-j1"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "33.33%" in line]
    for name in ("[misc]", "a[b]", "[bold]c"):
        assert any(f" {name} " in row for row in rows), rows


def _npy(array: np.ndarray[Any, Any]) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def test_fields_of_npy_records_left_unscanned_are_named_in_every_readable_format(tmp_path: Path) -> None:
    kind = np.dtype([("x", "<f4", (4,)), ("name", "S8")])
    env = lmdb.open(str(tmp_path / "db"), map_size=1 << 22)
    with env.begin(write=True) as txn:
        for i in range(20):
            value = np.zeros(3, kind)
            value["x"] = np.random.default_rng(i).normal(size=(3, 4))
            txn.put(f"{i:08d}".encode(), _npy(value))
    env.close()
    note = "fields of structured .npy values that hold no numbers: name"
    outputs = {}
    for fmt in ("text", "markdown", "junit", "json"):
        result = CliRunner().invoke(main, ["scan", str(tmp_path / "db"), "-j1", "--format", fmt])
        assert result.exit_code == 0, result.output
        outputs[fmt] = result.output
    assert note in json.loads(outputs["json"])["info"]["lmdb.not_scanned"]
    assert f"note: {note}" in outputs["text"]
    assert f"- {note}" in outputs["markdown"]
    suite = ET.fromstring(outputs["junit"].encode()).find("testsuite")
    assert suite is not None
    assert note in (suite.findtext("system-out") or "")


def test_an_error_naming_a_path_that_is_not_utf8_spells_it_as_reports_do(tmp_path: Path) -> None:
    missing = os.fsencode(tmp_path) + b"/caf\xe9\x1b[31m.h5"
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", missing],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode("utf-8").endswith("/caf\\xe9\\x1b[31m.h5 does not exist\n")
    assert b"\x1b" not in proc.stderr and b"Traceback" not in proc.stderr


def test_an_output_naming_an_image_of_the_scanned_list_is_refused(tmp_path: Path) -> None:
    for i in range(2):
        _image(tmp_path / "img" / f"{i}.png", i)
    (tmp_path / "train.txt").write_text("img/0.png 0\nimg/1.png 1\n")
    image = (tmp_path / "img" / "0.png").read_bytes()
    args = ["scan", str(tmp_path / "train.txt"), "--format", "json", "-j1", "--output"]
    result = CliRunner().invoke(main, [*args, str(tmp_path / "img" / "0.png")])
    assert result.exit_code == 2 and "it exists and is no dscan report" in result.output, result.output
    assert (tmp_path / "img" / "0.png").read_bytes() == image
    result = CliRunner().invoke(main, [*args, str(tmp_path / "report.json")])  # a report beside the list is fine
    assert result.exit_code == 0, result.output


def test_an_output_never_overwrites_a_file_that_is_no_dscan_report(tmp_path: Path) -> None:
    # Where a file lies says nothing: a list names images under --root, or by absolute path, and other lists
    # sit beside it (.txt, a report suffix); a report name can be a link to data. Each was overwritten.
    data, lists = tmp_path / "data", tmp_path / "lists"
    for i in range(2):
        _image(data / "cat" / f"{i}.png", i)
    lists.mkdir()
    (lists / "train.txt").write_text("cat/0.png 0\ncat/1.png 1\n")
    (lists / "val.txt").write_text("cat/1.png 1\n")
    (tmp_path / "elsewhere.json").write_text('{"mine": 1}')
    (tmp_path / "link.json").symlink_to(data / "cat" / "1.png")
    kept = {p: p.read_bytes() for p in (data / "cat" / "0.png", lists / "val.txt", tmp_path / "elsewhere.json")}
    kept[tmp_path / "link.json"] = (data / "cat" / "1.png").read_bytes()
    scan = ["scan", str(lists / "train.txt"), "--root", str(data), "-j1", "--output"]
    for target in kept:
        result = CliRunner().invoke(main, [*scan, str(target)])
        assert result.exit_code == 2, (target, result.output)
        assert "it exists and is no dscan report" in result.output, result.output
    assert {p: p.read_bytes() for p in kept} == kept
    for fmt, name in (("text", "r.txt"), ("json", "r.json"), ("junit", "r.xml"), ("markdown", "r.md")):
        (tmp_path / name).write_bytes(b"")  # an empty file, then the report written before: both replaced
        for _ in range(2):
            result = CliRunner().invoke(main, [*scan, str(tmp_path / name), "--format", fmt])
            assert result.exit_code == 0, (fmt, result.output)
        assert (tmp_path / name).stat().st_size > 0


def test_a_scan_that_makes_no_report_removes_the_one_an_earlier_scan_left(tmp_path: Path) -> None:
    """A CI job publishes dscan.xml after every run: when a run failed before its report (the dataset's path
    gone: exit status 2), the earlier run's passing report was published as this run's verdict."""
    _image(tmp_path / "data" / "cat" / "0.png", 0)
    report = tmp_path / "dscan.xml"
    first = CliRunner().invoke(main, ["scan", str(tmp_path / "data"), "-j1", "--output", str(report)])
    assert first.exit_code == 0 and report.stat().st_size > 0, first.output
    gone = CliRunner().invoke(main, ["scan", str(tmp_path / "moved"), "-j1", "--output", str(report)])
    assert gone.exit_code == 2 and not report.exists(), gone.output
    assert f"removed {report}, the report of an earlier scan (this one made none)" in gone.output
    mine = tmp_path / "notes.xml"
    mine.write_text("<notes/>")
    refused = CliRunner().invoke(main, ["scan", str(tmp_path / "moved"), "-j1", "--output", str(mine)])
    assert refused.exit_code == 2 and mine.read_text() == "<notes/>"  # no report of dscan's: never touched


def _github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_the_checks_page_reaches_its_section() -> None:
    page = checks_markdown()
    anchors = {_github_anchor(line.lstrip("#")) for line in page.splitlines() if line.startswith("#")}
    links = re.findall(r"\]\(#([^)]+)\)", page)
    assert len(links) == len(checks.CHECKS)
    assert [link for link in links if link not in anchors] == []


def test_markdown_statistics_of_an_all_nan_dataset_show_no_python_none(tmp_path: Path) -> None:
    path = tmp_path / "nan.h5"
    with h5py.File(path, "w") as fh:
        fh["x"] = np.full((8, 2), np.nan, np.float32)
    result = CliRunner().invoke(main, ["scan", str(path), "--format", "markdown", "-j1"])
    assert result.exit_code == 1, result.output
    [row] = [line for line in result.output.splitlines() if line.startswith("| `nan.h5`")]
    assert row.endswith("| float32 | 0 | 16 | 0 | – | – | – | – |"), row
