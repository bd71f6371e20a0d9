"""Each record check, and the core checks on LMDB records, with the exact keys; shard size never matters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from scanner_service import ScanConfig, plan
from scanner_service.engine import scan_shard
from scanner_service.report import Report
from tests.conftest import codes, finding, run_scan
from tests.lmdb.conftest import datum, jpeg, key, npy

EnvMaker = Callable[..., Path]


def located(report: Report, code: str) -> list[tuple[str | None, int | None]]:
    found = finding(report, code)
    assert found is not None, f"no {code} finding; found {codes(report)}"
    return [(loc.key, loc.index) for loc in found.locations]


def test_record_invalid_names_each_key(datum_env: Callable[..., Path]) -> None:
    extra = {key(10): b"\x0a\xff\xff garbage", key(77): b"", key(150): datum(shape=(0, 0, 0), data=b"", label=1)}
    report = run_scan(datum_env(n=200, extra=extra))
    assert located(report, "R001") == [(key(10), 10), (key(77), 77), (key(150), 150)]
    details = [loc.detail or "" for loc in finding(report, "R001").locations]
    assert "not a Datum" in details[0] and "empty value" in details[1] and "neither data nor float_data" in details[2]
    assert report.summary.items_scanned == 200 and not report.summary.passed


def test_record_size_mismatch(datum_env: Callable[..., Path]) -> None:
    extra = {
        key(33): datum(shape=(3, 8, 8), data=b"\x01" * 100, label=2),
        key(66): datum(shape=(2, 2, 2), floats=np.zeros(7), label=1),
    }
    report = run_scan(datum_env(n=100, extra=extra))
    assert located(report, "R002") == [(key(33), 33), (key(66), 66)]
    first, second = (loc.detail or "" for loc in finding(report, "R002").locations)
    assert "data has 100 bytes" in first and "3×8×8 = 192" in first
    assert "float_data has 7 values" in second


def test_record_shape_mismatch_lists_the_minority(datum_env: Callable[..., Path]) -> None:
    odd = {key(i): datum(shape=(3, 4, 4), label=1, seed=i) for i in (5, 120, 121)}
    report = run_scan(datum_env(n=300, extra=odd))
    assert located(report, "R003") == [(key(5), 5), (key(120), 120), (key(121), 121)]
    r003 = finding(report, "R003")
    assert r003.count == 3 and r003.severity.value == "warning"
    assert "3x4x4 (3 records); most records are 3x8x8 (297)" in (r003.locations[0].detail or "")


def test_one_record_of_an_odd_shape_is_no_constant_feature_and_counts_once(
    make_env: EnvMaker, rng: np.random.Generator
) -> None:
    """A blank 1x2x2 record beside 50 random 3x2x2 ones: R003 and V005 name it; no feature of the data is
    constant (one sample varies nowhere), and the statistics count 50 and 1 records, not 51 of each shape."""
    records = [(key(i), datum(shape=(3, 2, 2), floats=rng.normal(size=12), label=i % 2)) for i in range(50)]
    records.append(("zzz", datum(shape=(1, 2, 2), floats=np.zeros(4), label=0)))
    report = run_scan(make_env(records))
    assert codes(report) == {"R003", "V005"}
    assert sorted(s.shape for s in report.statistics) == [[1, 1, 2, 2], [50, 3, 2, 2]]


def test_record_shape_mismatch_when_the_minority_comes_first(make_env: EnvMaker) -> None:
    """The fast path learns the first records' layout; counts and keys must not depend on that."""
    records = [(key(i), datum(shape=(1, 4, 4), label=0, seed=i)) for i in range(40)]
    records += [(key(i), datum(shape=(1, 8, 8), label=1, seed=i)) for i in range(40, 400)]
    report = run_scan(make_env(records))
    assert finding(report, "R003").count == 40
    assert [k for k, _ in located(report, "R003")] == [key(i) for i in range(20)]


def test_a_malformed_record_counts_towards_no_majority_shape(make_env: EnvMaker) -> None:
    """Encoded JPEG Datums, two of them without the encoded flag (one 0x0x0, one 3x48x48): each is R002, and
    neither shape is judged against the other: one record of two is no majority, and R002 records count for none."""
    records = [(key(i), datum(shape=(0, 0, 0), data=jpeg(i), encoded=True, label=i % 3)) for i in range(60)]
    records[40] = (key(40), datum(shape=(0, 0, 0), data=jpeg(40), label=1))
    records[41] = (key(41), datum(shape=(3, 48, 48), data=jpeg(41), label=2))
    report = run_scan(make_env(records))
    assert codes(report) == {"R002"}
    assert located(report, "R002") == [(key(40), 40), (key(41), 41)]


def test_two_shapes_as_common_as_each_other_are_no_majority(make_env: EnvMaker) -> None:
    records = [(key(i), datum(shape=(3, 4, 4) if i % 2 else (3, 8, 8), label=i % 2, seed=i)) for i in range(40)]
    assert "R003" not in codes(run_scan(make_env(records)))
    records.append((key(40), datum(shape=(3, 8, 8), label=0, seed=40)))  # 21 of 41: a majority again
    assert finding(run_scan(make_env(records, name="more")), "R003").count == 20


def test_variable_shapes_without_a_majority_are_not_reported(make_env: EnvMaker) -> None:
    records = [(key(i), npy(np.zeros(i + 1, np.float32))) for i in range(50)]
    assert "R003" not in codes(run_scan(make_env(records)))


def test_label_sorted_storage_names_the_key_of_each_run(make_env: EnvMaker) -> None:
    records = [(key(i), datum(label=i // 150, seed=i)) for i in range(600)]
    report = run_scan(make_env(records), batch_size=16)
    assert located(report, "L005") == [(key(0), 0), (key(150), 150), (key(300), 300), (key(450), 450)]
    assert "150 consecutive samples of label 0" in (finding(report, "L005").locations[0].detail or "")


def test_damaged_records_leave_no_label_runs_behind(make_env: EnvMaker) -> None:
    """Every damaged record ends a label block; a shard hands on its long runs, its first and its last only."""
    rng = np.random.default_rng(5)
    records = [(key(i), datum(label=int(rng.integers(0, 50)), seed=i)) for i in range(1200)]
    records += [(key(i), datum(label=7, seed=i)) for i in range(1200, 1300)]  # one long run
    for i in range(0, 1200, 4):
        records[i] = (key(i), b"\x0a\xff not a datum")
    config = ScanConfig(batch_size=8)
    planned = plan(make_env(records), config)
    assert len(planned.shards) == 1
    shard = scan_shard("lmdb", planned.source.path, planned.shards[0], config)
    runs = shard.labels["label"].runs
    assert len(runs) <= 3, len(runs)
    assert [(r.start, r.length, r.label) for r in runs if r.length > config.run_threshold] == [(1200, 100, 7)]
    report = run_scan(make_env(records, name="again"), batch_size=8)
    assert located(report, "L005") == [(key(1200), 1200)]
    assert finding(report, "R001").count == 300


def test_label_invalid_and_missing_class(datum_env: Callable[..., Path]) -> None:
    report = run_scan(
        datum_env(n=100, classes=4, extra={key(12): datum(label=-1), key(13): datum(label=9)}), num_classes=5
    )
    assert located(report, "L002") == [(key(12), 12), (key(13), 13)]
    assert "L003" in codes(report)  # class 4 never appears


def test_empty_environment(make_env: EnvMaker) -> None:
    report = run_scan(make_env([]))
    assert codes(report) == {"S006", "S008"}  # the environment is empty, and so is the dataset: no pass
    assert finding(report, "S006").locations[0].path == "data.mdb"
    assert [(loc.path, loc.detail) for loc in finding(report, "S008").locations] == [
        ("data.mdb", "0 samples in the whole dataset")
    ]
    assert report.exit_code() == 1


@pytest.mark.parametrize(("workers", "shard_bytes"), [(0, 1 << 16), (2, 1 << 16), (2, 64 << 20)])
def test_findings_do_not_depend_on_shards_or_workers(make_env: EnvMaker, workers: int, shard_bytes: int) -> None:
    rng = np.random.default_rng(3)
    records = []
    for i in range(1500):
        if i % 500 == 250:
            records.append((key(i), datum(shape=(2, 4, 4), label=7, seed=i)))
            continue
        values = rng.standard_normal((1, 6, 6)).astype(np.float32)
        if i in (3, 777, 1499):
            values[0, 2, 2] = np.nan
        records.append((key(i), datum(shape=(1, 6, 6), floats=values, label=int(i // 100 % 3))))
    records[900] = (key(900), b"\x0a\xff")
    path = make_env(records)
    reference = run_scan(path, workers=0, shard_bytes=64 << 20, batch_size=8)
    report = run_scan(path, workers=workers, shard_bytes=shard_bytes, batch_size=8)
    assert report.summary.shards >= (2 if shard_bytes < 1 << 20 else 1)
    for code in ("V001", "R001", "R003", "L005"):
        assert located(report, code) == located(reference, code), code
        assert finding(report, code).count == finding(reference, code).count
    assert report.labels[0].total == reference.labels[0].total == 1499
    assert report.statistics[0].count == reference.statistics[0].count


def test_vectors_stored_as_k_by_1_by_1_datums_are_no_constant_samples(make_env: EnvMaker) -> None:
    """Multi-label and feature LMDBs store vectors as K×1×1 Datums: an all-zero label vector is no blank image
    (it was a constant-sample warning per record), raw or float; a blank 1×4×4 image still is one."""
    vectors = [(key(i), datum(shape=(5, 1, 1), data=bytes([i % 2] * 5), label=None)) for i in range(30)]
    assert "V005" not in codes(run_scan(make_env(vectors, name="raw_vectors")))
    floats = [(key(i), datum(shape=(5, 1, 1), floats=np.full(5, float(i % 2)), label=None)) for i in range(30)]
    assert "V005" not in codes(run_scan(make_env(floats, name="float_vectors")))
    images = [(key(i), datum(shape=(1, 4, 4), seed=i)) for i in range(30)]
    images[3] = (key(3), datum(shape=(1, 4, 4), data=bytes(16)))
    blank = finding(run_scan(make_env(images, name="images")), "V005")
    assert blank is not None and [loc.key for loc in blank.locations] == [key(3)]
