"""The head start of ``dscan scan FOLDER``: which command lines get one, what its process inspects, and that
the scan takes its verdicts only for the very bytes it judged, as the scan judges them (the report is the same
with and without it); and the work the command does while the readers read (``meanwhile``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import numpy as np
import pytest
import xxhash
from imagetools import encode, jpeg, natural, png, png_bytes
from PIL import Image

from scanner_service import DscanError, ScanConfig, head_start, imaging, scan
from scanner_service.cli import scan_command
from scanner_service.head_start import (
    LENGTH,
    SCAN_VALUE_OPTIONS,
    HeadStart,
    inspect_tail,
    launch,
    read_records,
    scan_folder,
    walk_back,
)
from scanner_service.imaging import inspect_image
from scanner_service.imaging.verdict import Verdict

DSCAN = Path(sys.executable).with_name("dscan")


def test_scan_folder_reads_the_path_of_a_scan_command_line(tmp_path: Path) -> None:
    d = str(tmp_path)
    assert scan_folder(["scan", d]) == d
    assert scan_folder(["scan", "-j", "2", d, "--format", "json"]) == d
    assert scan_folder(["scan", "-j2", "--max-pixels=100", d]) == d
    assert scan_folder(["scan", "--", d]) == d


@pytest.mark.parametrize(
    "args",
    [
        ["scan"],  # the demo
        ["demo", "{d}"],
        ["scan", "{d}/a.jpg"],  # a file, not a folder
        ["scan", "--help", "{d}"],
        ["scan", "--no-such-option", "{d}"],
        ["scan", "-j", "{d}"],  # the folder is the option's value: no PATH
        ["scan", "{d}", "{d}"],
        ["scan", " "],
        ["scan", "{d}", "-j"],
    ],
)
def test_scan_folder_refuses_what_it_cannot_read_for_sure(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a.jpg").write_bytes(b"x")
    assert scan_folder([a.format(d=tmp_path) for a in args]) is None


def test_value_options_are_the_scan_commands_options() -> None:
    options = [p for p in scan_command.params if isinstance(p, click.Option)]
    assert all(not p.is_flag and p.nargs == 1 for p in options)  # each takes one value
    assert {name for p in options for name in p.opts} == SCAN_VALUE_OPTIONS


def test_read_records_stops_at_a_record_cut_short() -> None:
    records = [(f"{i}.jpg", f"{i:016x}", {"format": "jpeg"}) for i in range(3)]
    frames = [pickle.dumps(r) for r in records]
    data = b"".join(len(f).to_bytes(LENGTH, "little") + f for f in frames)
    assert [rel for rel, _ in read_records(data)] == ["0.jpg", "1.jpg", "2.jpg"]
    whole_two = LENGTH * 2 + len(frames[0]) + len(frames[1])
    for cut in (whole_two, whole_two + 1, whole_two + LENGTH + len(frames[2]) - 1):
        assert [rel for rel, _ in read_records(data[:cut])] == ["0.jpg", "1.jpg"]
    assert list(read_records(data[:2])) == []


@pytest.fixture
def folder(tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator) -> Path:
    for i in range(4):
        write(f"data/cat/{i}.jpg", jpeg(rng))
        write(f"data/dog/{i}.png", png(rng))
    whole = jpeg(rng)
    write("data/dog/cut.jpg", whole[: len(whole) // 2])
    write("data/dog/copy.jpg", (tmp_path / "data/cat/0.jpg").read_bytes())  # a duplicate across classes
    write("data/dog/page.jpg", b"<html>not found</html>")
    write("data/dog/.hidden.jpg", jpeg(rng))
    write("data/dog/notes.txt", b"text")
    os.symlink(tmp_path / "data/cat/1.jpg", tmp_path / "data/dog/link.jpg")
    return tmp_path / "data"


def finished(folder: Path) -> HeadStart:
    started = launch(str(folder))
    assert started is not None
    assert started.join(timeout=60), "the head start did not finish its walk"
    return started


def test_the_process_inspects_the_image_files_as_the_scan_would(folder: Path) -> None:
    found = finished(folder).collect(str(folder), ScanConfig().max_pixels)
    expected = {p.relative_to(folder).as_posix() for p in folder.rglob("*.jpg") if not p.is_symlink()}
    expected |= {p.relative_to(folder).as_posix() for p in folder.rglob("*.png")}
    assert set(found) == expected - {"dog/.hidden.jpg"}  # no hidden file, no link, no .txt
    for rel, (digest, fields) in found.items():
        data = (folder / rel).read_bytes()
        assert digest == xxhash.xxh3_64_hexdigest(data)
        assert Verdict(*fields) == inspect_image(data, os.path.basename(rel))
    assert Verdict(*found["dog/cut.jpg"][1]).error  # a verdict like any other: the damage is in it


def test_walk_back_goes_from_the_end(folder: Path) -> None:
    order = [rel for _, rel in walk_back(str(folder))]
    assert order[0] == "dog/page.jpg" and order[-1] == "cat/0.jpg"
    assert order == sorted(order, reverse=True)


def findings(report: object) -> dict[str, list[tuple[str, str]]]:
    data = json.loads(report.model_dump_json())  # type: ignore[attr-defined]
    return {f["code"]: [(loc["path"], loc["detail"]) for loc in f["locations"]] for f in data["findings"]}


@pytest.mark.parametrize("workers", [0, 1])
def test_the_report_is_the_same_with_a_head_start(folder: Path, workers: int) -> None:
    without = scan(folder, ScanConfig(), workers=workers)
    head = finished(folder)
    with_it = scan(folder, ScanConfig(), workers=workers, head_start=head)
    assert head.records == -1  # collected and let go
    assert findings(with_it) == findings(without)
    assert with_it.summary.items_scanned == without.summary.items_scanned
    assert with_it.info == without.info
    assert {"I003", "I002", "I013"} <= set(findings(with_it))


def test_a_file_changed_after_the_head_start_is_judged_again(folder: Path) -> None:
    """4 KB zeroed inside a JPEG, its size and modification time kept: the bytes decide, not the metadata."""
    head = finished(folder)
    target = folder / "cat/2.jpg"
    before = os.stat(target)
    with open(target, "r+b") as fh:
        fh.seek(before.st_size // 2)
        fh.write(bytes(4096))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    report = scan(folder, ScanConfig(), workers=0, head_start=head)
    damaged = findings(report).get("I003", []) + findings(report).get("I004", [])
    assert "cat/2.jpg" in [path for path, _ in damaged]


def test_a_file_replaced_after_the_head_start_is_read_again(folder: Path) -> None:
    head = finished(folder)
    (folder / "cat/2.jpg").write_bytes(b"<html>gone</html>")
    report = scan(folder, ScanConfig(), workers=0, head_start=head)
    assert "cat/2.jpg" in [path for path, _ in findings(report)["I002"]]  # not an image any more


def test_another_pixel_limit_takes_no_verdict(folder: Path) -> None:
    head = finished(folder)
    assert head.collect(str(folder), 100) == {}
    assert head.records == -1
    report = scan(folder, ScanConfig(max_pixels=100), workers=0, head_start=finished(folder))
    assert "I007" in findings(report)  # every image is a bomb under this limit: judged by the scan itself


def test_another_folder_takes_no_verdict(folder: Path, tmp_path: Path) -> None:
    assert finished(folder).collect(str(tmp_path), ScanConfig().max_pixels) == {}


def test_the_walk_ends_when_the_command_has_ended(folder: Path) -> None:
    """The process checks before each file that its parent (the command) is still there."""
    for parent, expected in ((os.getppid(), 11), (os.getppid() + 1, 0)):
        records = os.memfd_create("test")
        try:
            inspect_tail(str(folder), records, parent)  # (in this process: its parent stands for the command's)
            os.lseek(records, 0, os.SEEK_SET)
            assert len(list(read_records(os.read(records, 1 << 20)))) == expected
        finally:
            os.close(records)


@pytest.mark.slow
def test_dscan_scan_with_its_head_start_reports_as_without(folder: Path) -> None:
    """The console command (which starts the head start) against the command run without one."""
    assert DSCAN.exists()
    started = subprocess.run([str(DSCAN), "scan", str(folder), "--format", "json", "-j1"], capture_output=True)
    plain = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(folder), "--format", "json", "-j1"],
        capture_output=True,
    )
    assert started.returncode == plain.returncode == 1, started.stderr
    a, b = json.loads(started.stdout), json.loads(plain.stdout)
    assert a["findings"] == b["findings"] and a["info"] == b["info"]


def test_the_head_start_forks_before_typing_and_with_the_environment_set(folder: Path) -> None:
    """What runs before the fork is all the time the second core idles: the entry point imports neither
    ``typing`` nor anything that does (8 ms), and the child sees the environment defaults (one OpenBLAS
    thread: it imports numpy)."""
    probe = (
        "import os, sys\n"
        "import scanner_service.entry as entry\n"
        "from scanner_service import head_start\n"
        "print('typing' in sys.modules)\n"
        "entry.set_defaults()\n"
        "started = head_start.launch(sys.argv[1])\n"
        "print(started is not None and os.environ['OPENBLAS_NUM_THREADS'])\n"
        "started.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", probe, str(folder)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1"]


NUMPY_PROBE = """
import os, sys
from scanner_service import head_start
from scanner_service.imaging.verdict import Verdict
records = os.memfd_create("probe")
head_start.inspect_tail(sys.argv[1], records, os.getppid())
os.lseek(records, 0, os.SEEK_SET)
found = dict(head_start.read_records(os.read(records, 1 << 20)))
print(len(found), sum(Verdict(*fields).error is not None for _, fields in found.values()), "numpy" in sys.modules)
"""


def test_the_head_start_judges_pngs_and_pillows_formats_without_numpy(tmp_path: Path, rng: np.random.Generator) -> None:
    """numpy is what takes the head start's time to its first verdict (0.05-0.13 s to import): the PNG and
    Pillow judges import it only for the files that need it, so a folder of PNGs (interlaced ones too), WebP,
    BMP or TIFF images is judged without it (a JPEG needs it: simplejpeg imports it)."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "0.png").write_bytes(png(rng))
    for fmt in ("webp", "bmp", "tiff"):
        (folder / f"1.{fmt}").write_bytes(encode(Image.fromarray(natural(rng)), fmt.upper()))
    probe = [sys.executable, "-c", NUMPY_PROBE, str(folder)]
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["4", "0", "False"], out.stdout + out.stderr  # four verdicts, no error
    (folder / "2.png").write_bytes(png_bytes(natural(rng), colour=2, interlace=True))
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5", "0", "False"], out.stdout + out.stderr
    (folder / "3.jpg").write_bytes(jpeg(rng))
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["6", "0", "True"], out.stdout + out.stderr


def test_a_head_start_is_stopped_when_the_path_is_no_dataset(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no images here")
    head = launch(str(tmp_path))
    assert head is not None
    with pytest.raises(DscanError):
        scan(tmp_path, ScanConfig(), workers=0, head_start=head)
    assert head.ended and head.records == -1


def test_meanwhile_runs_once_while_the_readers_read(folder: Path) -> None:
    calls: list[int] = []
    scan(folder, ScanConfig(), workers=1, meanwhile=lambda: calls.append(len(multiprocessing.active_children())))
    assert calls == [1]  # once, with the reader still there


def test_a_decoder_that_kills_the_head_start_costs_only_its_own_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    for name in ("a.jpg", "b.jpg", "killer.jpg", "y.jpg", "z.jpg"):
        write(f"crash/{name}", jpeg(rng))
    real = imaging.inspect_image

    def crashing(data: bytes, name: str = "", max_pixels: int = imaging.DEFAULT_MAX_PIXELS) -> object:
        if name.startswith("killer"):
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(data, name, max_pixels)

    monkeypatch.setattr(imaging, "inspect_image", crashing)  # (the head start's process imports it from there)
    head = launch(str(tmp_path / "crash"))
    assert head is not None and head.join(timeout=60)
    monkeypatch.setattr(imaging, "inspect_image", real)
    assert set(head.collect(str(tmp_path / "crash"), ScanConfig().max_pixels)) == {"z.jpg", "y.jpg"}  # before it
    report = scan(tmp_path / "crash", ScanConfig(), workers=1, head_start=finished(tmp_path / "crash"))
    assert report.summary.items_scanned == 5 and report.summary.errors == 0


def test_a_folder_too_large_to_sort_is_left_to_the_readers(
    monkeypatch: pytest.MonkeyPatch, folder: Path, write: Callable[[str, bytes], Path], rng: np.random.Generator
) -> None:
    monkeypatch.setattr(head_start, "MAX_ENTRIES", 12)  # the folders of the fixture hold at most 10 entries
    for i in range(13):
        write(f"data/many/{i}.jpg", jpeg(rng))
    order = [rel for _, rel in walk_back(str(folder))]
    assert order[0] == "dog/page.jpg" and not any(rel.startswith("many/") for rel in order)
