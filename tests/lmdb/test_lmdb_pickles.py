"""Pickled records (folder2lmdb / ImageFolderLMDB): plain data is loaded with every global refused and scanned like
msgpack records; a pickle that needs a global stays pickled-records, and nothing in it is imported or called."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scanner_service.records.pickles import MAX_OPS, PickleDamaged, PickleRefused, plain_loads
from tests.conftest import codes, finding, run_scan
from tests.lmdb.conftest import jpeg, pickled

EnvMaker = Callable[..., Path]
ROOT = Path(__file__).resolve().parents[2]
BROKEN_IMAGE, BROKEN_LABEL = 7, 23


def folder2lmdb(protocol: int, broken: bool = True, dicts: bool = False) -> list[tuple[bytes, bytes]]:
    """``pickle.dumps((jpeg_bytes, label))`` under ``str(i)`` with the writer's ``__keys__`` and ``__len__``; when
    ``broken``, a truncated JPEG under key 7 and label 42 (of 10 classes) under key 23."""
    keys = [str(i).encode("ascii") for i in range(30)]
    records = []
    for i, k in enumerate(keys):
        image, label = jpeg(i), i % 10
        if broken and i == BROKEN_IMAGE:
            image = image[: len(image) // 2]
        if broken and i == BROKEN_LABEL:
            label = 42
        value: Any = {"img": image, "label": label} if dicts else (image, label)
        records.append((k, pickled(value, protocol)))
    return [*records, (b"__keys__", pickled(keys, protocol)), (b"__len__", pickled(len(keys), protocol))]


def keys_of(report: Any, code: str) -> list[str | None]:
    found = finding(report, code)
    assert found is not None, f"no {code} finding"
    return [loc.key for loc in found.locations]


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_a_folder2lmdb_database_is_read_and_its_defects_found_at_their_keys(make_env: EnvMaker, protocol: int) -> None:
    report = run_scan(make_env(folder2lmdb(protocol)), num_classes=10)
    assert codes(report) == {"I003", "L002"}
    assert keys_of(report, "I003") == [str(BROKEN_IMAGE)]
    assert keys_of(report, "L002") == [str(BROKEN_LABEL)]
    assert not report.summary.passed
    assert report.labels[0].total == 30
    assert "lmdb.bookkeeping __keys__" in report.info and "globals refused" not in report.info["lmdb.decoder"]
    assert "every global refused" in report.info["lmdb.decoder"]


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_the_clean_twin_passes(make_env: EnvMaker, protocol: int) -> None:
    report = run_scan(make_env(folder2lmdb(protocol, broken=False)), num_classes=10)
    assert codes(report) == set() and report.summary.passed
    assert report.summary.items_scanned == 32  # 30 images and the writer's two records


def test_a_database_of_dict_records_is_read(make_env: EnvMaker) -> None:
    report = run_scan(make_env(folder2lmdb(4, dicts=True)), num_classes=10)
    assert codes(report) == {"I003", "L002"}
    assert (keys_of(report, "I003"), keys_of(report, "L002")) == ([str(BROKEN_IMAGE)], [str(BROKEN_LABEL)])


def test_float_labels_in_tuples_are_class_ids_when_whole(make_env: EnvMaker) -> None:
    """``(jpeg, float(y))`` and ``(jpeg, np.float32(y))`` (as ``.item()`` of a float tensor or a pandas column
    gives): 3.0 is class 3, so 7.0 of 3 classes, 1.5 and NaN are label-invalid at their keys."""
    records = [(str(i).encode(), pickled((jpeg(i), float(i % 3)))) for i in range(30)]
    bad = {4: 7.0, 9: 1.5, 12: float("nan")}
    for i, label in bad.items():
        records[i] = (str(i).encode(), pickled((jpeg(i), label)))
    report = run_scan(make_env(records), num_classes=3)
    assert codes(report) == {"L002"}
    assert keys_of(report, "L002") == ["12", "4", "9"]  # key order
    assert report.labels[0].total == 28  # 7.0 is a class id (out of range); 1.5 and NaN are none


def test_fractional_targets_are_no_class_ids_but_a_nan_target_is_reported(make_env: EnvMaker) -> None:
    """``(jpeg, 0.37)``: regression targets, not labels: no label check (no label-invalid on every record), a
    note says so, and a NaN or infinite target is nan-value / inf-value at its key."""
    records = [(str(i).encode(), pickled((jpeg(i), 0.25 + i / 7))) for i in range(30)]
    records[6] = (b"6", pickled((jpeg(6), float("nan"))))
    records[8] = (b"8", pickled((jpeg(8), float("-inf"))))
    report = run_scan(make_env(records))
    assert codes(report) == {"V001", "V002"}
    assert (keys_of(report, "V001"), keys_of(report, "V002")) == (["6"], ["8"])
    assert not report.labels and "regression targets" in report.info["lmdb.labels"]
    clean = run_scan(make_env(records[:6] + records[9:], name="clean"))
    assert codes(clean) == set() and clean.summary.passed
    judged = run_scan(make_env(records[:6] + records[9:], name="judged"), num_classes=3)  # classes after all
    assert finding(judged, "L002").count == 27


def test_a_record_unlike_the_others_is_record_invalid(make_env: EnvMaker) -> None:
    """A pickled record without an image among (image, label) records, and a damaged one (cut short)."""
    records = folder2lmdb(4, broken=False)
    records[5] = (b"5", pickled({"x": 1}))
    records[9] = (b"9", records[9][1][:-20])
    report = run_scan(make_env(records), num_classes=10)
    assert codes(report) == {"R001"}
    assert keys_of(report, "R001") == ["5", "9"]


class _Trap:
    """A pickle whose REDUCE would create a file: what an untrusted database can hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_pickles_that_need_a_global_stay_pickled_records_and_nothing_runs(make_env: EnvMaker, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    trap = [(str(i).encode(), pickled((_Trap(marker), i), protocol=2)) for i in range(10)]
    arrays = [(f"a{i}".encode(), pickled((np.zeros((4, 4), np.uint8), np.int64(i)))) for i in range(20)]
    report = run_scan(make_env(trap + arrays))
    assert codes(report) == {"R005"}
    assert finding(report, "R005").count == 30
    assert report.summary.items_scanned == 0
    assert not marker.exists()


def test_a_trap_among_plain_pickles_is_pickled_records_at_its_key(make_env: EnvMaker, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    records = folder2lmdb(4, broken=False)
    records[4] = (b"4", pickled((_Trap(marker), 4), protocol=4))
    report = run_scan(make_env(records), num_classes=10)
    assert codes(report) == {"R005"}
    assert keys_of(report, "R005") == ["4"]
    assert "needs the global" in (finding(report, "R005").locations[0].detail or "")
    assert not marker.exists()


def test_the_restricted_loader_refuses_globals_bombs_and_damage(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    for protocol in range(6):
        with pytest.raises(PickleRefused):
            plain_loads(pickle.dumps(_Trap(marker), protocol=protocol))
    with pytest.raises(PickleRefused):
        plain_loads(pickle.dumps(np.arange(3)))
    with pytest.raises(PickleRefused):  # a million empty dicts from a megabyte
        plain_loads(b"\x80\x04(" + b"}" * (MAX_OPS + 1) + b"l.")
    with pytest.raises(PickleDamaged):
        plain_loads(pickle.dumps((b"\xff\xd8", 1))[:-3])
    assert not marker.exists()
    assert plain_loads(pickle.dumps({"img": bytearray(b"\xff\xd8"), "label": 3}, protocol=2)) == {
        "img": b"\xff\xd8",
        "label": 3,
    }


def _cli(path: Path, workers: str) -> tuple[int, list[Any]]:
    options = ("--num-classes", "10", "-j", workers, "--format", "json")
    done = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(path), *options],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)["findings"]


def test_the_cli_exits_1_with_the_same_findings_at_j1_and_j2_and_0_on_the_clean_twin(make_env: EnvMaker) -> None:
    broken = make_env(folder2lmdb(4), name="broken")
    status, one = _cli(broken, "1")
    assert status == 1 and {f["code"] for f in one} == {"I003", "L002"}
    assert _cli(broken, "2") == (1, one)
    assert _cli(make_env(folder2lmdb(4, broken=False), name="clean"), "1") == (0, [])
