"""`dscan scan photo.jpg`: one image file is a dataset of one image. A file named as an image is scanned
whatever it holds (an empty or HTML '.jpg' is a finding, exit 1); a file of no image format stays exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from imagetools import jpeg, png

from scanner_service.cli import main


def invoke(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, [*args, "--format", "json", "-j", "1"])
    return result.exit_code, json.loads(result.output) if result.exit_code in (0, 1) else {"error": result.output}


def codes(report: dict) -> dict[str, list[str]]:
    return {f["code"]: [loc["path"] for loc in f["locations"]] for f in report["findings"]}


def test_a_valid_image_passes_as_a_dataset_of_one(tmp_path: Path, rng: np.random.Generator) -> None:
    for name, data in (("photo.jpg", jpeg(rng)), ("mask.png", png(rng))):
        (tmp_path / name).write_bytes(data)
        status, report = invoke("scan", str(tmp_path / name))
        assert status == 0, report
        assert report["source"]["kind"] == "image-file" and report["summary"]["items_scanned"] == 1
        assert report["findings"] == [] and report["info"]["images.layout"] == "one image file (no labels)"


@pytest.mark.parametrize(
    ("name", "content", "code"),
    [
        ("cut.jpg", "half", "I003"),
        ("empty.jpg", b"", "I001"),
        ("page.png", b"<!DOCTYPE html><html><body>Forbidden</body></html>", "I002"),
    ],
    ids=["truncated", "empty", "html"],
)
def test_a_bad_image_file_is_a_finding_not_no_dataset(
    tmp_path: Path, rng: np.random.Generator, name: str, content: bytes | str, code: str
) -> None:
    whole = jpeg(rng)
    (tmp_path / name).write_bytes(whole[: len(whole) // 2] if content == "half" else content)
    status, report = invoke("scan", str(tmp_path / name))
    assert status == 1, report
    assert codes(report)[code] == [name]


def test_content_decides_without_an_image_extension_and_links_are_followed(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    whole = png(rng)
    (tmp_path / "scan0001").write_bytes(whole[:-20])  # no extension: its signature names it
    status, report = invoke("scan", str(tmp_path / "scan0001"))
    assert status == 1 and codes(report)["I003"] == ["scan0001"], report
    (tmp_path / "real.jpg").write_bytes(jpeg(rng))
    os.symlink(tmp_path / "real.jpg", tmp_path / "link.jpg")
    status, report = invoke("scan", str(tmp_path / "link.jpg"))
    assert status == 0 and report["summary"]["items_scanned"] == 1, report


def test_other_files_are_still_no_dataset(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# not an image\n")
    status, report = invoke("scan", str(tmp_path / "notes.md"))
    assert status == 2 and "is not a dataset dscan can read" in report["error"]
    os.mkfifo(tmp_path / "pipe.jpg")  # a named pipe named as an image: never opened (the open would block)
    status, report = invoke("scan", str(tmp_path / "pipe.jpg"))
    assert status == 2 and "is not a dataset dscan can read" in report["error"]


def test_junit_of_one_image_runs_the_image_checks(tmp_path: Path, rng: np.random.Generator) -> None:
    (tmp_path / "photo.jpg").write_bytes(jpeg(rng))
    result = CliRunner().invoke(main, ["scan", str(tmp_path / "photo.jpg"), "--format", "junit"])
    assert result.exit_code == 0
    assert 'classname="dscan.I003" name="corrupt-image"' in result.output
    assert 'classname="dscan.R001"' not in result.output  # no LMDB record check for an image file
