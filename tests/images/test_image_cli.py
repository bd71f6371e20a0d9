"""`dscan scan` on image folders and lists as a user runs it: exit status, report, decoder versions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from imagetools import jpeg, png

from scanner_service.cli import main


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture
def folder(tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator) -> Path:
    for i in range(3):
        write(f"data/cat/{i}.jpg", jpeg(rng))
        write(f"data/dog/{i}.png", png(rng))
    whole = jpeg(rng)
    write("data/dog/cut.jpg", whole[: len(whole) // 2])
    return tmp_path / "data"


def test_scan_folder_json_report_names_file_reason_and_decoders(folder: Path) -> None:
    status, out = invoke("scan", str(folder), "--format", "json", "-j", "0")
    assert status == 1
    report = json.loads(out)
    assert report["source"]["kind"] == "images"
    corrupt = next(f for f in report["findings"] if f["code"] == "I003")
    assert corrupt["locations"][0]["path"] == "dog/cut.jpg"
    assert "no end-of-image marker" in corrupt["locations"][0]["detail"]
    assert "libjpeg-turbo" in report["info"]["decoder.jpeg"] and "simplejpeg" in report["info"]["decoder.jpeg"]
    assert "ISA-L" in report["info"]["decoder.png"]


def test_scan_list_text_report_gives_file_and_line(folder: Path) -> None:
    (folder / "train.txt").write_text("cat/0.jpg 0\ndog/cut.jpg 1\ncat/gone.jpg 0\n")
    status, out = invoke("scan", str(folder / "train.txt"), "-j", "0")
    assert status == 1
    flat = " ".join(out.split())  # the terminal report wraps long lines
    assert "dog/cut.jpg:2: truncated: no end-of-image marker" in flat
    assert "train.txt:3: cat/gone.jpg does not exist" in flat


@pytest.mark.slow
def test_scan_with_worker_processes(folder: Path) -> None:
    status, out = invoke("scan", str(folder), "--format", "json", "-j", "2")
    assert status == 1
    report = json.loads(out)
    assert report["summary"]["items_scanned"] == 7
    assert {f["code"] for f in report["findings"]} >= {"I003"}


def test_clean_folder_passes(tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator) -> None:
    for i in range(4):
        write(f"ok/{i}.jpg", jpeg(rng))
    status, out = invoke("scan", str(tmp_path / "ok"), "-j", "0")
    assert status == 0 and "PASSED" in out


def test_checks_and_explain_list_the_image_checks() -> None:
    status, out = invoke("checks")
    assert status == 0
    for code in (f"I{n:03d}" for n in range(1, 14)):
        assert code in out
    status, out = invoke("explain", "corrupt-image-data")
    assert status == 0 and out.startswith("# I004 corrupt-image-data (warning)")


def test_markdown_keeps_odd_file_names_as_text(tmp_path: Path, rng: np.random.Generator) -> None:
    """File and class names with markup characters render as the names, never as markup or HTML."""
    from imagetools import scan_dir
    from markdown_it import MarkdownIt

    from scanner_service.render import render

    names = ["<b>bold.jpg", "back`tick`.jpg", "*star* _u_ [l](x).jpg", "pipe|name.jpg"]
    for name in names:
        (tmp_path / "a|b").mkdir(exist_ok=True)
        (tmp_path / "a|b" / name).write_bytes(b"")
    (tmp_path / "<i>c").mkdir()
    (tmp_path / "<i>c" / "ok.jpg").write_bytes(jpeg(rng))
    report = scan_dir(tmp_path)
    html = MarkdownIt("commonmark").enable("table").render(render(report, "markdown"))
    assert "<b>bold" not in html and "<i>c" not in html  # no HTML from a name
    assert "<em>star</em>" not in html and "<em>u</em>" not in html and 'href="x"' not in html  # no markup
    for name in names:
        shown = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert f"<code>a|b/{shown}</code>" in html, name
    assert "(&lt;i&gt;c)" in html  # the class name in the label table
    rows = [line for line in html.splitlines() if line.startswith("<tr>")]
    assert all(line.count("<td>") in (0, 3, 5) for line in rows)  # no cell split by a '|' in a name
