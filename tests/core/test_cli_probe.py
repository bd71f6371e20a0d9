"""The dscan command as CI meets it, found by probing: config keys, option combinations, formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from scanner_service.cli import main
from tests.conftest import write_h5


@pytest.fixture
def dirty(tmp_path: Path) -> Path:
    data = np.zeros((50, 3), np.float32) + np.arange(50, dtype=np.float32)[:, None]
    data[7, 1] = np.nan
    return write_h5(tmp_path / "dirty.h5", {"x": data})


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("key", "suggested"),
    [("num-clases", "num-classes"), ("num_clases", "num-classes"), ("failon", "fail-on"), ("Ignore", "ignore")],
)
def test_a_misspelt_config_key_is_named_with_the_key_it_was_meant_for(
    tmp_path: Path, dirty: Path, key: str, suggested: str
) -> None:
    """An unknown key listed every known one in Python's spelling (``num_classes``), which the README and the
    flags never use, and suggested none."""
    cfg = tmp_path / "dscan.toml"
    cfg.write_text(f"{key} = 1\n")
    code, out = invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")
    assert code == 2 and f"unknown option {key!r}: did you mean {suggested!r}?" in out, out
    assert "num-classes" in out and "num_classes" not in out
    cfg.write_text("colour = 1\n")  # nothing close: no guess
    code, out = invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")
    assert code == 2 and "unknown option 'colour' (known: " in out and "did you mean" not in out, out


def test_a_config_key_set_in_both_spellings_is_an_error(tmp_path: Path, dirty: Path) -> None:
    """``max-locations`` and ``max_locations`` in one table: the last one silently won."""
    cfg = tmp_path / "dscan.toml"
    cfg.write_text('[tool.dscan]\nfail-on = "never"\nfail_on = "error"\n')
    code, out = invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")
    assert code == 2 and "option 'fail_on' is set twice, also as 'fail-on'" in out, out


def test_a_select_of_checks_that_do_not_apply_to_the_dataset_is_no_pass(dirty: Path) -> None:
    """``--select I`` (the image checks) on an HDF5 file ran no check at all and passed the NaN in it: exit
    status 0, a JUnit suite of 0 tests. It is a bad option, as a --select that --ignore empties is."""
    code, out = invoke("scan", str(dirty), "--select", "I", "--format", "junit", "-j", "0")
    assert code == 2 and "leave no check that applies to this hdf5 dataset (its checks: V, L, S)" in out, out
    assert "<testsuite" not in out
    code, out = invoke("scan", str(dirty), "--select", "I,nan-value", "-j", "0")
    assert code == 1 and "V001 nan-value" in out  # one check that applies is enough


def test_a_select_of_label_checks_on_data_without_labels_is_no_pass(tmp_path: Path) -> None:
    """``--select L`` on an HDF5 file that holds no label dataset ran no label check and passed: a CI gate
    that meant to check the labels passed data it never looked at."""
    data = write_h5(tmp_path / "features.h5", {"x": np.arange(40, dtype=np.float32).reshape(10, 4)})
    code, out = invoke("scan", str(data), "--select", "L", "-j", "0")
    assert code == 2 and "nothing to check in this hdf5 dataset: no labels were read from it (L)" in out, out
    labelled = write_h5(tmp_path / "train.h5", {"x": np.ones((10, 4), np.float32), "label": np.arange(10) % 2})
    code, out = invoke("scan", str(labelled), "--select", "L", "-j", "0")
    assert code == 0 and "PASSED" in out, out


@pytest.mark.parametrize("code", ["V003", "V004", "V006", "S002", "S007", "L001"])
def test_a_value_or_storage_check_no_image_scan_runs_is_no_pass_on_images(tmp_path: Path, code: str) -> None:
    """``--select V003`` on an image folder passed: the value family applies to images (float pixels get
    nan-value and inf-value), but float16-overflow never runs on them, so nothing was checked."""
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.fromarray((np.random.default_rng(0).random((40, 40)) * 1e6).astype(np.float32), "F").save(folder / "f.tif")
    code_, out = invoke("scan", str(folder), "--select", code, "-j", "0")
    assert code_ == 2 and "leave no check that applies to this images dataset" in out, out
    code_, out = invoke("scan", str(folder), "--select", f"{code},V001", "-j", "0")
    assert code_ == 0 and "PASSED" in out, out


def test_checks_that_never_apply_name_real_checks_and_kinds() -> None:
    from scanner_service.checks import BY_CODE
    from scanner_service.report import CHECK_FAMILIES, NEVER_APPLY

    for kind, codes_ in NEVER_APPLY.items():
        assert kind in CHECK_FAMILIES and codes_ <= set(BY_CODE), kind
        assert all(c[0] in CHECK_FAMILIES[kind] for c in codes_), kind  # (others are out by their family)


def test_what_a_numpy_scan_left_out_is_said_in_every_human_readable_format(tmp_path: Path) -> None:
    """An object array (never unpickled) and an HDF5 file beside the arrays are not scanned: the JSON report
    said so, the text, Markdown and JUnit reports passed without a word."""
    import json
    import xml.etree.ElementTree as ET

    np.save(tmp_path / "X.npy", np.arange(20, dtype=np.float32).reshape(10, 2))
    np.save(tmp_path / "meta.npy", np.array([{"id": i} for i in range(10)], dtype=object), allow_pickle=True)
    write_h5(tmp_path / "extra.h5", {"x": np.zeros(3)})
    outputs = {}
    for fmt in ("json", "text", "markdown", "junit"):
        code, outputs[fmt] = invoke("scan", str(tmp_path), "--format", fmt, "-j", "0")
        assert code == 0, outputs[fmt]
    info = json.loads(outputs["json"])["info"]
    notes = [info["numpy.not_scanned"], info["numpy.other_files"]]
    assert "meta.npy" in notes[0] and "HDF5" in notes[1]
    suite = ET.fromstring(outputs["junit"].encode()).find("testsuite")
    assert suite is not None
    for note in notes:
        assert f"note: {note[:60]}" in outputs["text"]
        assert f"- {note}" in outputs["markdown"]
        assert f"note: {note}" in (suite.findtext("system-out") or "")
