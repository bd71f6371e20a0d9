"""The dscan command as CI uses it: exit statuses, formats, options, config files."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from scanner_service.cli import main
from tests.conftest import NOBODY, become_nobody, write_h5


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
    assert code == 2 and "unknown check 'X999'" in out and "did you mean" not in out
    code, out = invoke("scan", str(dirty), "--ignore", "nan-valu")
    assert code == 2 and "unknown check 'nan-valu': did you mean 'nan-value'?" in out
    code, out = invoke("scan", str(dirty), "--num-classes", "0")
    assert code == 2 and "--num-classes" in out  # named as the user wrote it
    assert invoke("scan", str(dirty), "--format", "yaml")[0] == 2


def test_text_report_says_what_where_why_and_fix(dirty: Path) -> None:
    code, out = invoke("scan", str(dirty), "-j", "0")
    assert code == 1
    assert "ERROR V001 nan-value: NaN in 1 sample (1 value)" in out
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
    ran = {str(c.get("classname")).removeprefix("dscan.")[0] for c in suite.iter("testcase")}
    assert ran == {"V", "S"}  # an HDF5 scan runs no image or record check, nor label checks without labels
    assert suite.get("tests") == str(len(list(suite.iter("testcase"))))
    code, out = invoke("scan", str(dirty), "--format", "markdown", "-j", "0")
    assert "# dscan report: ❌ failed" in out and "| error | V001 | nan-value | 1 |" in out


def test_an_output_file_without_format_gets_the_format_its_suffix_names(tmp_path: Path, dirty: Path) -> None:
    """``-o report.json`` without --format wrote the text report into the .json file (the CI step reading it
    then failed on it). An explicit --format still wins; a suffix that names no format keeps text."""
    for name, check in (
        ("r.json", lambda t: json.loads(t)["summary"]["passed"] is False),
        ("r.xml", lambda t: ET.fromstring(t).find("testsuite") is not None),
        ("r.md", lambda t: t.startswith("# dscan report")),
        ("r.log", lambda t: "FAILED" in t and not t.startswith("{")),
    ):
        code, out = invoke("scan", str(dirty), "--output", str(tmp_path / name), "-j", "0")
        assert code == 1 and "FAILED" in out and check((tmp_path / name).read_text()), name
    invoke("scan", str(dirty), "--format", "text", "--output", str(tmp_path / "t.json"), "-j", "0")
    assert not (tmp_path / "t.json").read_text().startswith("{")


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    """One image, one error: the text and markdown reports said '1 items' and '**1 errors, ...**'."""
    image = tmp_path / "photo.jpg"
    image.write_bytes(b"\xff\xd8\xff\xe0" + bytes(60))  # a JPEG cut inside its header
    code, out = invoke("scan", str(image), "-j", "0")
    assert code == 1 and "(image-file): 1 item, " in out and "FAILED: 1 error, 0 warnings" in out, out
    code, out = invoke("scan", str(image), "--format", "markdown", "-j", "0")
    assert "(image-file): 1 item, " in out and "**1 error, 0 warnings**" in out, out


def test_the_text_report_names_a_long_path_on_one_line(tmp_path: Path) -> None:
    """The first line (path, kind, counts) wrapped at the report's width when the path was long, unlike the
    locations below it: ``grep 'photo.jpg (image-file)'`` on a CI log found nothing."""
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 6))
    deep.mkdir(parents=True)
    image = deep / "photo.jpg"
    image.write_bytes(b"\xff\xd8\xff\xe0" + bytes(60))
    code, out = invoke("scan", str(image), "-j", "0")
    first = out.splitlines()[0]
    assert code == 1 and len(first) > 100, out
    assert first.startswith("dscan ") and first.endswith(" s") and "photo.jpg (image-file): 1 item, " in first, out
    for name, colour in (("cats", "red"), ("dogs", "blue")):  # a label table is titled with its path
        (tmp_path / "set" / name).mkdir(parents=True)
        Image.new("RGB", (40, 40), colour).save(tmp_path / "set" / name / "a.png")
    listing = deep / "train.txt"  # (outside the root: the table names the list relative to it, a long path)
    listing.write_text("cats/a.png 0\ndogs/a.png 1\n")
    code, out = invoke("scan", str(listing), "--root", str(tmp_path / "set"), "-j", "0")
    titles = [line for line in out.splitlines() if line.startswith("labels ")]
    shown = f"../{listing.relative_to(tmp_path).as_posix()}"
    assert len(shown) > 150 and code == 0, out
    assert titles == [f"labels {shown}: 2 labels, 2 classes, imbalance 1.0x"], out


def test_config_file_and_pyproject(tmp_path: Path, dirty: Path) -> None:
    cfg = tmp_path / "dscan.toml"
    cfg.write_text('ignore = ["nan-value"]\nfail-on = "warning"\n')
    assert invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")[0] == 1
    cfg.write_text('[tool.dscan]\nignore = ["V001", "V003"]\n')
    assert invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")[0] == 0
    cfg.write_text("colour = 3\n")
    code, out = invoke("scan", str(dirty), "--config", str(cfg))
    assert code == 2 and "unknown option 'colour'" in out


def test_a_relative_root_in_a_config_file_is_taken_from_the_file_s_folder(tmp_path: Path) -> None:
    """``root = "imgs"`` in cfg/dscan.toml: the scan from cfg/ passed, the same scan from cfg/sub (which finds
    the file upwards) failed with "--root imgs: no such folder", blaming a flag nobody gave."""
    (tmp_path / "cfg/imgs").mkdir(parents=True)
    (tmp_path / "cfg/sub").mkdir()
    for i in range(2):
        Image.fromarray(np.full((40, 40, 3), 60 * i + 10, np.uint8)).save(tmp_path / f"cfg/imgs/{i}.png")
    (tmp_path / "cfg/r.txt").write_text("0.png 0\n1.png 1\n")
    (tmp_path / "cfg/dscan.toml").write_text('root = "imgs"\nignore = ["constant-image"]\n')
    for here, listing in ((tmp_path / "cfg", "r.txt"), (tmp_path / "cfg/sub", "../r.txt")):
        with contextlib.chdir(here):
            code, out = invoke("scan", listing, "-j", "0", "--format", "json")
        assert code == 0, (here, out)
        assert json.loads(out)["summary"]["items_scanned"] == 2
    (tmp_path / "cfg/dscan.toml").write_text('root = "nowhere"\n')
    with contextlib.chdir(tmp_path / "cfg/sub"):
        code, out = invoke("scan", "../r.txt", "-j", "0")
    assert code == 2 and f"root {tmp_path / 'cfg/nowhere'} (--root, or root in a config file): no such folder" in out


def test_the_report_names_the_config_file_it_read_and_what_it_set(
    tmp_path: Path, dirty: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyproject.toml further up can set ``fail-on = "never"``: the report passed the dataset and said only
    "(fail on never)", not where that came from."""
    project = tmp_path / "project"
    (project / "ci").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.dscan]\nfail-on = "never"\nmax-locations = 5\n')
    monkeypatch.chdir(project / "ci")
    code, out = invoke("scan", str(dirty), "-j", "0")
    shown = "".join(out.split())  # (the note is wrapped to the terminal's width, a long path too)
    assert code == 0 and f"note:optionsfrom{project / 'pyproject.toml'}:fail-on,max-locations" in shown
    code, out = invoke("scan", str(dirty), "-j", "0", "--fail-on", "error", "--format", "json")
    assert code == 1 and json.loads(out)["info"]["config.file"].endswith("pyproject.toml: max-locations")
    monkeypatch.chdir(tmp_path)
    assert "config.file" not in json.loads(invoke("scan", str(dirty), "-j", "0", "--format", "json")[1])["info"]


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


def test_the_demo_refuses_a_bad_option_before_building_and_reads_a_named_config(tmp_path: Path) -> None:
    """``dscan scan --select zzz`` built the demo dataset before refusing the option, and ``--config FILE``
    without a PATH was ignored without a word."""
    result = CliRunner().invoke(main, ["scan", "--select", "zzz"])
    assert result.exit_code == 2 and "unknown check 'zzz'" in result.stderr
    assert "built a dataset" not in result.stderr
    (tmp_path / "dscan.toml").write_text('fail-on = "never"\n')
    result = CliRunner().invoke(main, ["scan", "--config", str(tmp_path / "dscan.toml"), "-j", "0"])
    assert result.exit_code == 0 and "(fail on never)" in result.stdout, result.output


@pytest.mark.slow
def test_console_script_in_a_real_process(dirty: Path) -> None:
    script = Path(sys.executable).with_name("dscan")  # the installed console script (scanner_service.entry)
    proc = subprocess.run([str(script), "scan", str(dirty), "--format", "json"], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["findings"][0]["locations"][0]["index"] == 13


def test_the_entry_point_leaves_the_collector_on_and_the_imports_frozen() -> None:
    """The console script imports the command with the cyclic collector off; the scan runs with it on."""
    code = (
        "import gc, sys\n"
        "sys.argv = ['dscan', '--help']\n"
        "from scanner_service.entry import run\n"
        "try:\n    run()\nexcept SystemExit:\n    pass\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 10000, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.split() == ["True", "True"]


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


def test_an_empty_path_or_an_unwritable_output_is_refused_before_scanning(tmp_path: Path, clean: Path) -> None:
    code, out = invoke("scan", "")  # `dscan scan "$DATA"` with DATA unset: never the current folder
    assert code == 2 and "the path is empty" in out
    missing = tmp_path / "no" / "such" / "report.json"
    code, out = invoke("scan", str(clean), "--format", "json", "--output", str(missing))
    assert code == 2 and "cannot write the report" in out
    assert not missing.parent.exists()
    for command in (["scan", str(clean)], ["demo"]):  # `-o "$REPORT"` with REPORT unset: not "a folder"
        code, out = invoke(*command, "--output", "")
        assert code == 2 and "--output" in out and "the path is empty" in out, out


def test_config_errors_name_their_file(tmp_path: Path, clean: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "dscan.toml").write_text('num-classes = "ten"\n')
    code, out = invoke("scan", str(clean), "--config", str(folder / "dscan.toml"))
    assert code == 2 and f"num-classes in {folder / 'dscan.toml'}" in out
    (folder / "dscan.toml").write_text("block-bytes = 1000000000000\n")  # readers allocate a block up front
    code, out = invoke("scan", str(clean), "--config", str(folder / "dscan.toml"))
    assert code == 2 and "block-bytes" in out, out
    (folder / "dscan.toml").write_text("batch-size = true\n")  # a wrong type is refused, not converted to 1
    code, out = invoke("scan", str(clean), "--config", str(folder / "dscan.toml"))
    assert code == 2 and "batch-size in" in out and "must be an integer, not bool True" in out, out
    (folder / "dscan.toml").unlink()
    (folder / "pyproject.toml").write_text('[project]\nname = "x\n[tool.dscan]\nfail-on = "never"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(clean)], cwd=folder, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "cannot read config file" in proc.stderr and "pyproject.toml" in proc.stderr


def test_a_named_pyproject_without_a_dscan_table_is_an_error(tmp_path: Path, clean: Path) -> None:
    """``--config pyproject.toml`` naming a file without ``[tool.dscan]`` ran on the defaults without a word
    (a typo in the table name, a wrong checkout); found by discovery, such a file is passed over."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.dscna]\nfail-on = "never"\n')
    code, out = invoke("scan", str(clean), "--config", str(tmp_path / "pyproject.toml"))
    assert code == 2 and "has no [tool.dscan] table" in out, out
    proc = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(clean)], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "PASSED" in proc.stdout, proc.stderr


def _slow_dataset(tmp_path: Path) -> Path:
    """A folder of 8,000 noisy JPEGs, hard links to one file: made in a moment, no disk space, and decoded one
    by one for several seconds even with two workers, so a signal sent once the workers run reaches the scan
    while it reads, however slow the machine (a 384 MB HDF5 file could be read before a loaded test runner
    got to send it)."""
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (375, 500, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "one.jpg", quality=90)
    for i in range(8000):
        os.link(tmp_path / "one.jpg", folder / f"{i:05d}.jpg")
    return folder


def _children(pid: int, want: int = 2, timeout: float = 30.0) -> list[str]:
    """The process ids of ``pid``'s children, once there are ``want`` of them."""
    import time

    deadline = time.monotonic() + timeout
    found: list[str] = []
    while time.monotonic() < deadline and len(found) < want:
        time.sleep(0.05)
        found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return found


@pytest.mark.slow
def test_write_errors_and_closed_pipes_have_their_own_exit_status(clean: Path, dirty: Path) -> None:
    command = [sys.executable, "-m", "scanner_service.cli", "scan"]
    with open("/dev/full", "w") as full:  # a full disk: an output error, not a verdict
        proc = subprocess.run([*command, str(clean)], stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2 and "No space left on device" in proc.stderr
    for data, verdict in ((clean, 0), (dirty, 1)):  # a reader that stops early changes nothing
        with subprocess.Popen([*command, str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
            assert reader.stdout is not None and reader.stderr is not None
            reader.stdout.close()
            assert reader.wait(timeout=60) == verdict
            assert b"Traceback" not in reader.stderr.read()


@pytest.mark.slow
def test_ctrl_c_is_neither_a_verdict_nor_a_bad_request(tmp_path: Path) -> None:
    import os
    import signal

    data = _slow_dataset(tmp_path)
    command = [sys.executable, "-m", "scanner_service.cli", "scan", str(data), "-j", "2"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        assert len(_children(proc.pid)) >= 2, "the workers did not start"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
        assert proc.wait(timeout=60) == 130
        assert proc.stderr is not None and "interrupted" in proc.stderr.read()


@pytest.mark.slow
def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    """Killed alone (SIGTERM to its pid, a closed terminal), the command must not leave its workers waiting
    forever, holding the output pipe open."""
    import os
    import signal
    import time

    data = _slow_dataset(tmp_path)
    command = [sys.executable, "-m", "scanner_service.cli", "scan", str(data), "-j", "2"]
    with subprocess.Popen(command, stdout=subprocess.PIPE) as proc:
        children = _children(proc.pid)
        assert len(children) >= 2, "the workers did not start"
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stdout.read() == b""  # EOF: no worker holds the pipe open
    time.sleep(0.5)
    assert not [pid for pid in children if _running(pid)], "workers outlived their parent"


def _running(pid: str) -> bool:
    """Whether the process exists and is no zombie (a dead orphan waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_what_decoder_libraries_print_stays_out_of_a_json_report(tmp_path: Path) -> None:
    """hdf5plugin's LZ4 filter prints "cannot malloc" to standard output on a damaged chunk; the JSON report
    on standard output must still be one JSON object."""
    import h5py
    import hdf5plugin

    data = np.random.default_rng(16).normal(size=(20000, 16)).astype("f4")
    path = tmp_path / "lz4.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(5000, 16), **hdf5plugin.LZ4())
    with h5py.File(path, "r") as f:
        info = f["x"].id.get_chunk_info_by_coord((5000, 0))
    raw = bytearray(path.read_bytes())
    for at in (info.byte_offset + 2, info.byte_offset + 20, info.byte_offset + info.size // 2):
        raw[at] ^= 0x5A
    path.write_bytes(bytes(raw))
    for jobs in ("-j1", "-j2"):
        done = subprocess.run(
            [sys.executable, "-m", "scanner_service.cli", "scan", str(path), "--format", "json", jobs],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)
        bad = next(f for f in report["findings"] if f["code"] == "S002")
        assert bad["locations"][0]["index"] == 5000


def test_every_documented_threshold_is_a_flag_and_dash_is_standard_output(tmp_path: Path, dirty: Path) -> None:
    labels = np.repeat(np.arange(2), 100)  # runs of 100 samples of one label
    data = np.random.default_rng(0).normal(size=(200, 2)).astype(np.float32)
    path = write_h5(tmp_path / "runs.h5", {"x": data, "label": labels})
    code, out = invoke("scan", str(path), "--batch-size", "16", "--format", "json", "-j", "0")
    assert "L005" in out  # 100 > 4 batches of 16
    code, out = invoke("scan", str(path), "--batch-size", "16", "--sorted-run-batches", "4.0", "-o", "-", "-j", "0")
    assert "L005" in out
    code, out = invoke(
        "scan", str(path), "--batch-size", "16", "--sorted-run-batches", "8", "--format", "json", "-o", "-", "-j", "0"
    )
    assert code == 0 and json.loads(out)["findings"] == []  # 100 < 8 batches of 16: no run too long
    assert not (Path.cwd() / "-").exists()
    code, out = invoke("scan", str(path), "--batch-size", "2", "--batch-absence-threshold", "0.9", "-j", "0")
    assert "L004" not in out
    code, out = invoke("scan", str(dirty), "--format", "text", "--output", str(tmp_path / "r.txt"), "-j", "0")
    assert code == 1 and "FAILED" in out and "FAILED" in (tmp_path / "r.txt").read_text()  # file and terminal


@pytest.mark.parametrize(
    ("module", "given", "expected"),
    [
        ("scanner_service.cli", None, "1"),
        ("workers.app", None, "1"),
        ("scanner_service.cli", "2", "2"),
        ("scanner_service.entry", None, "1"),  # the console script, which imports numpy before the command
        ("scanner_service.entry", "2", "2"),
    ],
)
def test_numpy_starts_no_blas_threads_unless_asked(module: str, given: str | None, expected: str) -> None:
    """dscan calls no BLAS routine and works in processes: OpenBLAS's threads (one per core, spinning after
    numpy's import) would take CPU from the scan's workers. A setting the user made is kept."""
    start = f"import {module}"
    if module == "scanner_service.entry":  # the command's start, up to its end (``--help``)
        start = "import sys, contextlib\nsys.argv = ['dscan', '--help']\nwith contextlib.suppress(SystemExit):\n"
        start += "    __import__('scanner_service.entry').entry.run()"
    probe = f"{start}\nimport os, numpy\nprint(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env).stdout
    setting, threads = out.splitlines()[-1].split()
    assert setting == expected
    if given is None:
        assert threads == "1"  # the main thread only


DSCAN = [sys.executable, "-m", "scanner_service.cli"]


def _cli_as_another_user(args: list[str], cwd: Path, before: Any = None) -> tuple[int, str, str]:
    """``dscan ARGS`` as a user whom permissions apply to (nobody, when the tests run as root, who may write
    anywhere): in a forked child of this process, which runs the code imported here, so that the other user
    needs no access to the checkout. ``before()`` runs in the child, in ``cwd``, before it changes user.
    (exit status, standard output, standard error)."""
    import io
    import tempfile

    from scanner_service import cli

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            status = 1
            try:
                os.chdir(cwd)
                _warm_up(args)
                if before is not None:
                    before()
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
                sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
                if os.geteuid() == 0:
                    become_nobody()
                try:
                    cli.run(args)  # (ends the process itself, with the command's exit status)
                    status = 0
                except SystemExit as exc:
                    status = exc.code if isinstance(exc.code, int) else 1
            finally:
                os._exit(status)
        _, wait = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(wait), out.read().decode(), err.read().decode()


def _warm_up(args: list[str]) -> None:
    """Run the command once as this user, its output and any ``--output`` thrown away, so that the modules it
    imports on the way are imported: the other user may not be allowed to read Python's own library."""
    import contextlib

    from scanner_service import cli
    from scanner_service.render import text  # the terminal's report, written beside an --output (rich)

    del text
    quiet: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-o", "--output"):
            skip = True
        else:
            quiet.append(arg)
    with (
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
        contextlib.suppress(SystemExit),
    ):
        cli.main.main(args=quiet, prog_name="dscan")


def _give_to_the_other_user(*paths: Path) -> None:
    if os.geteuid() == 0:
        for path in paths:
            os.chown(path, NOBODY, NOBODY)


@pytest.fixture
def shared(rng: np.random.Generator) -> Any:
    """A folder every user can search (pytest's tmp_path is its owner's only), holding a clean ok.h5."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="dscan-test-"))
    folder.chmod(0o755)
    write_h5(folder / "ok.h5", {"x": rng.normal(size=(50, 4)).astype(np.float32)})
    yield folder
    for sub in folder.rglob("*"):
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o755)
    shutil.rmtree(folder)


def test_an_output_that_would_overwrite_the_scanned_data_is_refused_before_scanning(
    tmp_path: Path, clean: Path
) -> None:
    signature = clean.read_bytes()
    code, out = invoke("scan", str(clean), "--format", "json", "-o", str(clean))
    assert code == 2 and "it is the dataset being scanned" in out
    assert clean.read_bytes() == signature
    (tmp_path / "link.h5").symlink_to(clean)
    assert invoke("scan", str(tmp_path / "link.h5"), "-o", str(clean))[0] == 2
    code, out = invoke("scan", str(tmp_path), "--format", "json", "-o", str(clean))
    assert code == 2 and "it exists and is no dscan report" in out
    assert clean.read_bytes() == signature
    for report in ("report.json", "report.json", "dscan.xml"):  # a new file, then an existing report file
        code, out = invoke("scan", str(tmp_path), "--format", "json", "-o", str(tmp_path / report), "-j", "0")
        assert code == 0, out
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["passed"] is True


def test_an_existing_output_needs_only_its_own_permission(shared: Path) -> None:
    reports = shared / "reports"
    reports.mkdir()
    mine, theirs = reports / "dscan.xml", reports / "root.xml"
    mine.touch()
    theirs.touch()
    theirs.chmod(0o444)
    _give_to_the_other_user(reports, mine)
    reports.chmod(0o555)  # a read-only folder: the existing report file in it is still writable
    for output in (os.devnull, str(mine)):
        args = ["scan", str(shared / "ok.h5"), "-j0", "--format", "junit", "-o", output]
        status, _, stderr = _cli_as_another_user(args, cwd=shared)
        assert status == 0, (output, stderr)
    assert "<testsuite" in mine.read_text()
    status, _, stderr = _cli_as_another_user(["scan", str(shared / "ok.h5"), "-j0", "-o", str(theirs)], cwd=shared)
    assert status == 2 and "it is not writable" in stderr, stderr


def test_a_dscan_toml_reads_its_top_level_and_its_tool_table(tmp_path: Path, dirty: Path) -> None:
    cfg = tmp_path / "dscan.toml"
    cfg.write_text('ignore = ["nan-value"]\nfail-on = "warning"\n\n[tool.dscan]\nnum-classes = 10\n')
    code, out = invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")
    assert code == 1 and "fail on warning" in out  # the top-level options count too
    cfg.write_text('fail-on = "warning"\n\n[tool.dscan]\nfail-on = "never"\n')
    assert invoke("scan", str(dirty), "--config", str(cfg), "-j", "0")[0] == 0  # the table wins
    cfg.write_text('fail-on = "never"\n\n[tool.other]\nx = 1\n')
    code, out = invoke("scan", str(dirty), "--config", str(cfg))
    assert code == 2 and "unknown option 'tool.other'" in out


def test_config_discovery_is_skipped_where_the_current_folder_cannot_be_searched(shared: Path) -> None:
    private = shared / "private"
    (private / "work").mkdir(parents=True)
    status, stdout, stderr = _cli_as_another_user(  # entered, then made unsearchable to the user who scans
        ["scan", str(shared / "ok.h5"), "-j0"], cwd=private / "work", before=lambda: private.chmod(0)
    )
    assert status == 0 and "Traceback" not in stderr, stderr
    assert "PASSED" in stdout


def test_config_discovery_is_skipped_where_the_current_folder_is_gone(tmp_path: Path, clean: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = Path(sys.executable).with_name("dscan")  # python -m needs the current folder itself
    command = ["sh", "-c", 'cd "$1" && rmdir "$1" && exec "$0" scan "$2" -j1', str(script), str(gone), str(clean)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal, whatever the test runner ignores


def _demo_writing_its_report() -> tuple[subprocess.Popen[str], Path, int]:
    """``dscan demo`` held while it writes its report (standard output: a one-page pipe nobody reads), with its
    temporary folder and the read end of that pipe."""
    import fcntl

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the JSON report is about 20 kB
    command = [*DSCAN, "demo", "-j1", "--format", "json"]
    proc = subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    os.close(write_end)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "built a dataset with seeded defects in " in line, line
    folder = Path(line.rsplit(" in ", 1)[1].strip()).parent  # /tmp/dscan-demo-XXXX/dscan-demo
    assert os.read(read_end, 1) == b"{"  # the report has started; the rest waits for a reader
    return proc, folder, read_end


def _drain(fd: int) -> None:
    while os.read(fd, 65536):
        pass
    os.close(fd)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signal_name", "status", "said"), [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")]
)
def test_a_stopped_demo_exits_like_an_interrupted_scan_and_removes_its_folder(
    signal_name: str, status: int, said: str
) -> None:
    import signal

    proc, folder, read_end = _demo_writing_its_report()
    with proc:
        assert folder.is_dir()
        proc.send_signal(getattr(signal, signal_name))
        _drain(read_end)
        assert proc.wait(timeout=60) == status
        assert proc.stderr is not None
        err = proc.stderr.read()
    assert f"dscan: {said}; no report" in err and "Traceback" not in err and "Aborted" not in err, err
    assert not folder.exists()


@pytest.mark.parametrize("command", [["demo"], ["scan"]], ids=["demo", "scan-without-path"])
def test_dash_output_is_standard_output_for_the_demo_too(tmp_path: Path, command: list[str]) -> None:
    proc = subprocess.run(
        [*DSCAN, *command, "-j1", "--format", "json", "-o", "-"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["summary"]["passed"] is False
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("args", [["checks"], ["checks", "--format", "json"], ["schema"], ["explain", "V001"]])
def test_listings_exit_0_when_the_reader_stops_early(args: list[str]) -> None:
    with subprocess.Popen([*DSCAN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.close()  # `dscan checks | head -1`: gone before the listing is written
        assert reader.wait(timeout=60) == 0
        assert b"Traceback" not in reader.stderr.read()


def _on_a_terminal(command: list[str], env: dict[str, str]) -> str:
    """What ``command`` writes to standard output when that is a terminal."""
    import pty

    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(command, stdout=child_fd, stderr=subprocess.DEVNULL, env=env)
    os.close(child_fd)
    out = b""
    with contextlib.suppress(OSError):  # EIO once the other side is closed
        while chunk := os.read(main_fd, 65536):
            out += chunk
    os.close(main_fd)
    proc.wait(timeout=120)
    return out.decode()


def test_no_color_is_honoured_on_a_terminal(dirty: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    command = [*DSCAN, "scan", str(dirty), "-j1"]
    assert "\x1b[1;31m" in _on_a_terminal(command, env)  # a terminal: coloured
    plain = _on_a_terminal(command, {**env, "NO_COLOR": "1"})
    assert "FAILED" in plain and "\x1b[" not in plain


def _closing(fd: int) -> Any:
    return lambda: os.close(fd)


def test_closed_standard_streams(tmp_path: Path, clean: Path) -> None:
    report = tmp_path / "r.json"
    command = [*DSCAN, "scan", str(clean), "-j1"]
    to_file = [*command, "--format", "json", "-o", str(report)]
    proc = subprocess.run(to_file, capture_output=True, text=True, preexec_fn=_closing(1), timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # `>&-` with the report in a file
    assert json.loads(report.read_text())["summary"]["passed"] is True
    proc = subprocess.run(command, capture_output=True, text=True, preexec_fn=_closing(1), timeout=120)
    assert proc.returncode == 2 and "standard output is closed" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(command, capture_output=True, text=True, preexec_fn=_closing(2), timeout=120)
    assert proc.returncode == 0 and "PASSED" in proc.stdout  # `2>&-`


def test_select_and_ignore_that_leave_no_check_are_a_bad_option(dirty: Path) -> None:
    """``--select V001 --ignore V001`` would run nothing and pass any dataset: exit 2 saying so (it passed)."""
    code, out = invoke("scan", str(dirty), "--select", "V001", "--ignore", "V0", "-j", "0")
    assert code == 2 and "select and ignore leave no check to run" in out
    assert invoke("scan", str(dirty), "--select", "V001", "--ignore", "V002", "-j", "0")[0] == 1


def _loaded(pid: int, library: str) -> bool:
    """Whether process ``pid`` has mapped a shared library whose file name contains ``library``."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return any(library in line for line in maps)
    except OSError:  # the process has ended
        return True


@pytest.mark.parametrize(
    "library",
    ["_pydantic_core", "_multiarray_umath", "_umath_linalg"],
    ids=["pydantic", "numpy", "numpy-linalg"],
)
def test_ctrl_c_while_dscan_starts_is_no_traceback(clean: Path, library: str) -> None:
    """Ctrl-C during dscan's imports ends it as during a scan: one line, status 130 (it printed a traceback
    from inside an import). The signal is sent the moment the process maps one of the extensions those
    imports load, so it lands inside them however slow the machine is; a fixed delay could land in the
    interpreter's own start, before any program's code runs."""
    import signal
    import time

    script = Path(sys.executable).with_name("dscan")
    proc = subprocess.Popen(
        [str(script), "scan", str(clean), "-j", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 60
    while not _loaded(proc.pid, library) and time.monotonic() < deadline:
        time.sleep(0.0002)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert "Traceback" not in stderr, stderr
    # (1: click's "Aborted!", when the signal lands while it parses the command line, a few microseconds)
    assert proc.returncode in (130, 1), (proc.returncode, stderr)


_INTERRUPT_IN_IMPORT = """
import signal
import sys

class Interrupted:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)

class Finder:
    def find_spec(self, name, path=None, target=None):
        if name != "scanner_service.cli":
            return None
        if sys.argv[2] == "callback":
            Interrupted()  # Python hands a KeyboardInterrupt raised here to sys.unraisablehook, not to the caller
            return None
        try:  # numpy's extensions print the interrupt (PyErr_Print) and raise an ImportError instead
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            sys.excepthook(*sys.exc_info())
            raise ImportError("_multiarray_umath failed to import") from None

sys.meta_path.insert(0, Finder())
from scanner_service.entry import run
sys.argv = ["dscan", "scan", sys.argv[1], "-j", "0"]
run()
"""


@pytest.mark.parametrize("where", ["callback", "import-error"])
def test_ctrl_c_that_python_does_not_raise_as_such_still_ends_dscan(clean: Path, where: str) -> None:
    """Ctrl-C in a callback of the import machinery (a module lock's weak reference) is not raised: Python
    printed "Exception ignored ... Traceback ... KeyboardInterrupt" and the scan went on. numpy's extensions
    print it with its traceback and raise "ImportError: _multiarray_umath failed to import". Either ends dscan
    as any Ctrl-C while starting: one line, status 130."""
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_IN_IMPORT, str(clean), where],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr == "dscan: interrupted; no report\n"


def test_a_file_in_a_folder_that_may_not_be_searched_is_no_verdict(shared: Path) -> None:
    """``dscan scan locked/data.h5``, ``locked`` not searchable by the user: a traceback (PermissionError
    from the format detection) and exit status 1, which says the dataset has findings."""
    locked = shared / "locked"
    locked.mkdir()
    write_h5(locked / "data.h5", {"x": np.zeros((4, 2), np.float32)})
    locked.chmod(0o700)  # the owner's only (root's, when the tests run as root)
    status, _, stderr = _cli_as_another_user(["scan", str(locked / "data.h5"), "-j0"], cwd=shared)
    assert status == 2 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines() == [f"Error: {locked / 'data.h5'} cannot be read: Permission denied"]


_CRASH = """
import sys
import scanner_service.cli as cli

def crash(*args, **kwargs):
    raise RuntimeError("a bug")

cli.scan = crash
cli.run(["scan", sys.argv[1], "-j", "0"])
"""


def test_a_bug_is_no_verdict(clean: Path) -> None:
    """An exception dscan did not expect ended the process with Python's exit status 1: in CI, "the dataset
    has findings". It is status 2 (the scan could not run), after the traceback a bug report needs."""
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(clean)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "RuntimeError: a bug" in proc.stderr
    assert proc.stderr.endswith("dscan: internal error (RuntimeError); no verdict\n")


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_a_locale_that_is_no_utf_gets_its_report_not_an_encoding_error(
    tmp_path: Path, rng: np.random.Generator, encoding: str
) -> None:
    # a Latin-1 locale (or Windows' code page with output redirected): the text report's table lines, the
    # markdown report's ✅ and the catalogue's … ended the command in "internal error (UnicodeEncodeError)"
    x = rng.normal(size=(200, 4)).astype(np.float32)
    clean = write_h5(tmp_path / "labelled.h5", {"x": x, "label": np.arange(200) % 4})
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    command = [sys.executable, "-m", "scanner_service.cli"]

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*command, *args], capture_output=True, env=env, check=False, timeout=120)

    text = run("scan", str(clean), "-j1")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(b"dscan ") and b"\xe2" not in text.stdout  # (no UTF-8 in a Latin-1 stream)
    assert b" class | count | fraction" in text.stdout, text.stdout  # the label table, with ASCII lines
    markdown = run("scan", str(clean), "-j1", "--format", "markdown")
    assert markdown.returncode == 0 and markdown.stdout.startswith(b"# dscan report: ? passed"), markdown.stdout[:80]
    catalogue = run("checks")
    assert catalogue.returncode == 0 and b"V001" in catalogue.stdout, catalogue.stderr
    assert b"Traceback" not in text.stderr + markdown.stderr + catalogue.stderr


def _on_a_terminal_until_stopped(command: list[str], stop: Any) -> tuple[int, bytes]:
    """Run ``command`` on a pseudo-terminal; once its progress bar is drawn (it hides the cursor), ``stop(pid,
    fd)``; its exit status and everything it wrote."""
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover  (the child)
        os.execv(sys.executable, [sys.executable, *command[1:]])
    out, stopped, deadline = b"", False, time.monotonic() + 120
    while time.monotonic() < deadline:
        if not stopped and b"\x1b[?25l" in out and b"items" in out.rsplit(b"\x1b[?25l", 1)[1]:  # (drawn once)
            stop(pid, fd)
            stopped = True
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the terminal's other end closed: the process is gone
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    assert stopped, f"no progress bar was drawn: {out[-300:]!r}"
    return os.waitstatus_to_exitcode(status), out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_scan_stopped_on_a_terminal_shows_the_cursor_again(tmp_path: Path, how: str) -> None:
    # the progress bar hides the terminal's cursor; a scan stopped by Ctrl-C or SIGTERM left it hidden, and
    # Ctrl-C's message was written on the bar's line
    import signal

    def stop(pid: int, fd: int) -> None:
        if how == "ctrl-c":
            os.write(fd, b"\x03")  # the terminal sends SIGINT to the foreground process group
        else:
            os.kill(pid, signal.SIGTERM)

    status, out = _on_a_terminal_until_stopped([*DSCAN, "scan", str(_slow_dataset(tmp_path)), "-j2"], stop)
    assert out.rfind(b"\x1b[?25h") > out.rfind(b"\x1b[?25l") >= 0, out[-300:]  # the cursor shown at the end
    if how == "ctrl-c":
        assert status == 130, out[-300:]
        after_bar = out.rsplit(b"\x1b[?25h", 1)[1]
        assert after_bar.lstrip(b"\r").startswith(b"dscan: interrupted; no report"), out[-300:]
        assert b"Traceback" not in out
    else:
        assert status == -signal.SIGTERM, out[-300:]
