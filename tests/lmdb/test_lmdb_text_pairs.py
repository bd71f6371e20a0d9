"""Text-recognition LMDBs (clovaai's deep-text-recognition-benchmark, CRNN, PaddleOCR): ``image-000000001`` and
``label-000000001`` pairs, numbered from 1, and ``num-samples``. The loader reads numbers 1..num-samples and
crashes on a half that is not there (``txn.get(b'label-%09d' % index).decode()`` on None)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scanner_service.report import Report
from tests.conftest import cli_json, codes, finding, run_scan
from tests.lmdb.conftest import jpeg

EnvMaker = Callable[..., Path]


def text_records(
    numbers: range | list[int],
    count: bytes | None = None,
    no_label: tuple[int, ...] = (),
    no_image: tuple[int, ...] = (),
    width: int = 9,
) -> list[tuple[str, bytes]]:
    """clovaai's ``create_lmdb_dataset``: an image and its text for each number, then ``num-samples``."""
    numbers = list(numbers)
    records = [(f"image-{i:0{width}d}", jpeg(i)) for i in numbers if i not in no_image]
    records += [(f"label-{i:0{width}d}", f"word{i}".encode()) for i in numbers if i not in no_label]
    records.append(("num-samples", str(len(numbers)).encode() if count is None else count))
    return records


def position(records: list[tuple[str, bytes]], key: str) -> int:
    """A key's position in the database: LMDB keeps keys in byte order."""
    return sorted(k.encode() for k, _ in records).index(key.encode())


def located(report: Report, code: str) -> list[tuple[str | None, int | None]]:
    return [(loc.key, loc.index) for loc in finding(report, code).locations]


def test_a_clean_database_has_no_finding_and_exits_0(make_env: EnvMaker) -> None:
    status, report = cli_json(make_env(text_records(range(1, 21))))
    assert status == 0
    assert report["findings"] == []
    assert report["info"]["lmdb.text_pairs data.mdb"] == "20 image/label pairs numbered 1-20, as num-samples says"


def test_an_image_without_its_label_is_reported_at_the_image_key(make_env: EnvMaker) -> None:
    records = text_records(range(1, 21), no_label=(7,))
    status, report = cli_json(make_env(records))
    assert status == 1
    assert [f["code"] for f in report["findings"]] == ["R006"]
    found = report["findings"][0]
    assert found["count"] == 1
    (where,) = found["locations"]
    assert where["key"] == "image-000000007"
    assert where["index"] == position(records, "image-000000007")
    assert "label-000000007" in where["detail"]


def test_a_label_without_its_image_is_reported_at_the_label_key(make_env: EnvMaker) -> None:
    records = text_records(range(1, 21), no_image=(12,))
    status, report = cli_json(make_env(records))
    assert status == 1
    assert [f["code"] for f in report["findings"]] == ["R006"]
    (where,) = report["findings"][0]["locations"]
    assert (where["key"], where["index"]) == ("label-000000012", position(records, "label-000000012"))
    assert "image-000000012" in where["detail"]


@pytest.mark.parametrize(
    ("count", "words"),
    [(b"25", ["25", "20", "21"]), (b"15", ["15", "20", "16"])],
    ids=["too-large", "too-small"],
)
def test_num_samples_that_disagrees_with_the_pairs_is_reported_once(
    make_env: EnvMaker, count: bytes, words: list[str]
) -> None:
    records = text_records(range(1, 21), count=count)
    status, report = cli_json(make_env(records))
    assert status == 1
    assert [f["code"] for f in report["findings"]] == ["R007"]
    found = report["findings"][0]
    assert found["count"] == 1
    (where,) = found["locations"]
    assert (where["key"], where["index"]) == ("num-samples", position(records, "num-samples"))
    for word in words:
        assert word in where["detail"]


@pytest.mark.parametrize("count", [b"abc", b"", b"-3", b"\xff\xfe"], ids=["text", "empty", "negative", "binary"])
def test_num_samples_that_is_not_a_count_is_reported(make_env: EnvMaker, count: bytes) -> None:
    report = run_scan(make_env(text_records(range(1, 21), count=count)))
    assert codes(report) == {"R007"}
    (where,) = finding(report, "R007").locations
    assert where.key == "num-samples"
    assert "not a" in (where.detail or "")


def test_no_num_samples_record_and_pairs_numbered_from_0_are_reported(make_env: EnvMaker) -> None:
    records = [r for r in text_records(range(1, 21)) if r[0] != "num-samples"]
    report = run_scan(make_env(records, name="uncounted"))
    assert codes(report) == {"R007"}
    assert "no num-samples" in (finding(report, "R007").locations[0].detail or "")
    from_zero = text_records(range(20))  # 0..19 and num-samples 20: the loader asks for number 20
    report = run_scan(make_env(from_zero, name="from_zero"))
    assert codes(report) == {"R007"}
    detail = finding(report, "R007").locations[0].detail or ""
    assert "0-19" in detail and "20" in detail


def test_other_widths_pair_by_number(make_env: EnvMaker) -> None:
    assert codes(run_scan(make_env(text_records(range(1, 13), width=1), name="unpadded"))) == set()
    records = text_records(range(1, 13), width=6, no_label=(10,))
    report = run_scan(make_env(records, name="six"))
    assert located(report, "R006") == [("image-000010", position(records, "image-000010"))]


@pytest.mark.parametrize(("workers", "shard_bytes"), [(0, 1 << 13), (2, 1 << 13)])
def test_pairs_across_shards_are_located_and_capped(make_env: EnvMaker, workers: int, shard_bytes: int) -> None:
    """Images and labels sit far apart in key order, in different shards: the pairing is decided after the
    merge, the locations are the same as in one shard, the count is exact past the location cap."""
    missing_labels = (5, 77, 78, 79, 150, 151, 152, 153, 199)
    records = text_records(range(1, 201), no_label=missing_labels, no_image=(120,))
    path = make_env(records)
    whole = run_scan(path, shard_bytes=64 << 20, max_locations=5)
    report = run_scan(path, workers=workers, shard_bytes=shard_bytes, max_locations=5)
    assert report.summary.shards >= 4
    assert codes(report) == codes(whole) == {"R006"}
    expected = [(f"image-{i:09d}", position(records, f"image-{i:09d}")) for i in missing_labels[:5]]
    assert located(report, "R006") == located(whole, "R006") == expected
    assert finding(report, "R006").count == finding(whole, "R006").count == len(missing_labels) + 1
    big = text_records(range(1, 201), count=b"300")
    report = run_scan(make_env(big, name="big"), workers=workers, shard_bytes=shard_bytes)
    assert codes(report) == {"R007"} and finding(report, "R007").count == 1
