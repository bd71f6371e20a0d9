"""Damaged environments: every damage is an lmdb-corrupt (or record) finding, never a dead scan.

The damage is made on the real file: a truncated data.mdb (SIGBUS past the end), a leaf page whose header is
overwritten (MDB_CORRUPTED), a record whose size field points past the map (SIGSEGV in the reader), garbage
in a value, a file that is no LMDB at all.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import codes, finding, run_scan
from tests.lmdb.conftest import P_OVERFLOW, datum, key, leaf_keys, leaf_of, node_of, page_size, patch

EnvMaker = Callable[..., Path]
N = 1200


@pytest.fixture
def big_env(make_env: EnvMaker) -> Path:
    """1200 Datums of 3x32x32 (values in overflow pages), labels 0-6."""
    return make_env([(key(i), datum(shape=(3, 32, 32), label=i % 7, seed=i)) for i in range(N)])


def r004_details(report: object) -> list[str]:
    found = finding(report, "R004")  # type: ignore[arg-type]
    assert found is not None, "no R004 finding"
    return [loc.detail or "" for loc in found.locations]


def test_truncated_data_file(big_env: Path) -> None:
    data = big_env / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    report = run_scan(big_env, workers=2)
    details = r004_details(report)
    assert any("is truncated" in d for d in details)
    assert any("the key walk stopped" in d and "SIGBUS" in d for d in details)
    assert 0 < report.summary.items_scanned < N
    assert not report.summary.passed


def test_a_damaged_last_page_number_is_no_truncation_with_lost_records(big_env: Path) -> None:
    """mm_last_pg of both meta pages damaged to 100000: the file is whole and every record is read, so the
    finding must not say that records past the end are lost."""
    psize = page_size(big_env)
    for meta in (0, 1):  # mm_last_pg follows the 16-byte header, 24 bytes and the two 48-byte db records
        patch(big_env / "data.mdb", meta * psize + 16 + 24 + 96, struct.pack("<Q", 100_000))
    report = run_scan(big_env)
    (detail,) = r004_details(report)
    assert "the file was cut short, or that page number is damaged. Every record's key was reached" in detail
    assert "lost" not in detail and report.summary.items_scanned == N


def break_leaf(env: Path, i: int) -> list[bytes]:
    """Make the leaf page holding key ``i`` no leaf (its flags say overflow); the keys it held."""
    data = (env / "data.mdb").read_bytes()
    psize = page_size(env)
    page = leaf_of(data, key(i).encode(), psize)
    patch(env / "data.mdb", page * psize + 10, P_OVERFLOW.to_bytes(2, "little"))
    return leaf_keys(data, page, psize)


def test_damaged_leaf_page_reports_the_last_good_key_and_scans_the_rest(big_env: Path) -> None:
    lost = break_leaf(big_env, 600)
    report = run_scan(big_env, workers=2)
    r004 = finding(report, "R004")
    before = int(lost[0]) - 1
    assert r004.locations[0].key == key(before) and r004.locations[0].index == before
    detail = r004.locations[0].detail or ""
    assert "the key walk stopped after this key" in detail
    assert "MDB_CORRUPTED" in detail or "killed by SIGABRT (mdb.c" in detail  # an error, or LMDB's assertion
    assert f"{len(lost):,} of {N:,} records cannot be reached" in detail
    assert f"reached key {int(lost[-1]) + 1:08d}" in detail
    assert report.summary.items_scanned == N - len(lost)
    assert report.labels[0].total == N - len(lost)


def test_a_damaged_first_leaf_still_leaves_the_decoder_detected_from_the_rest(big_env: Path) -> None:
    lost = break_leaf(big_env, 0)  # the front is unreachable
    report = run_scan(big_env, workers=2)
    assert "R001" not in codes(report)  # the sample comes from the records that can be read
    assert report.info["lmdb.decoder"].startswith("datum")
    assert report.summary.items_scanned == N - len(lost)
    assert "R004" in codes(report)


def test_a_file_cut_inside_an_early_value_costs_only_the_records_past_the_cut(make_env: EnvMaker) -> None:
    records = [(key(i), datum(shape=(3, 128, 128), label=i % 2, seed=i)) for i in range(20)]
    records[3] = (key(3), datum(shape=(3, 128, 128), data=b"\x01" * 100, label=1))  # a planted size mismatch
    env = make_env(records)
    data = (env / "data.mdb").read_bytes()
    node = node_of(data, key(10).encode())
    first_page = struct.unpack_from("<Q", data, node + 8 + len(key(10)))[0]  # the value's overflow pages
    os.truncate(env / "data.mdb", (first_page + 2) * page_size(env))
    report = run_scan(env, workers=2)
    assert "R001" not in codes(report)
    assert [loc.key for loc in finding(report, "R002").locations] == [key(3)]
    assert report.summary.items_scanned >= 10
    assert any(loc.key == key(10) for loc in finding(report, "R004").locations)


def test_a_node_cut_short_is_lmdb_corrupt_after_the_key_before_it(make_env: EnvMaker) -> None:
    env = make_env([(f"{i:08d}_img{i}.jpg", datum(shape=(3, 16, 16), label=i % 10, seed=i)) for i in range(2000)])
    data = env / "data.mdb"
    os.truncate(data, data.stat().st_size - 1000)  # the last leaf page loses its end, where its first node is
    report = run_scan(env)
    every = [loc for f in report.findings for loc in f.locations]
    assert all(loc.key != "0x" for loc in every)  # no record under an empty key: LMDB stores none
    cut = [loc for loc in finding(report, "R004").locations if "its key is empty" in (loc.detail or "")]
    assert len(cut) == 1 and cut[0].key is None
    assert f"after key {cut[0].index - 1:08d}_img{cut[0].index - 1}.jpg" in (cut[0].detail or "")


def test_record_past_the_end_of_the_file_is_reported_without_reading_it(big_env: Path) -> None:
    node = node_of((big_env / "data.mdb").read_bytes(), key(777).encode())
    patch(big_env / "data.mdb", node, struct.pack("<HH", 0xFFFF, 0x7FFF))  # value size ~2 GB: past the map
    report = run_scan(big_env, workers=2)
    r004 = finding(report, "R004")
    assert [(loc.key, loc.index) for loc in r004.locations] == [(key(777), 777)]
    assert "past the end of the file" in (r004.locations[0].detail or "")
    assert report.summary.items_scanned == N
    assert report.labels[0].total == N - 1


def test_record_that_kills_the_reader_costs_only_itself(big_env: Path) -> None:
    """Read through LMDB (the image decoder), the record's value runs past the map: the reader dies."""
    node = node_of((big_env / "data.mdb").read_bytes(), key(777).encode())
    patch(big_env / "data.mdb", node, struct.pack("<HH", 0xFFFF, 0x7FFF))  # value size ~2 GB: past the map
    report = run_scan(big_env, workers=2, decoder="image", select=["R004"])
    r004 = finding(report, "R004")
    assert r004.count == 1
    loc = r004.locations[0]
    assert (loc.key, loc.index) == (key(777), 777)
    assert "kills the reader (the reader process was killed by SIG" in (loc.detail or "")
    assert "last good key before it is 00000776" in (loc.detail or "")
    assert report.summary.items_scanned == N


def test_garbage_in_a_value_is_record_invalid(big_env: Path) -> None:
    data = (big_env / "data.mdb").read_bytes()
    node = node_of(data, key(345).encode())
    (page,) = struct.unpack_from("<Q", data, node + 8 + 8)  # the overflow page number after the 8-byte key
    psize = page_size(big_env)
    patch(big_env / "data.mdb", page * psize + 16, bytes(np.random.default_rng(0).integers(0, 256, 64, np.uint8)))
    report = run_scan(big_env)
    assert [loc.key for loc in finding(report, "R001").locations] == [key(345)]
    assert "R004" not in codes(report)


@pytest.mark.parametrize("content", [b"", b"not an lmdb file" * 300, b"\x00" * 16384], ids=["empty", "text", "zeros"])
def test_data_file_that_is_no_environment(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "data.mdb").write_bytes(content)
    report = run_scan(tmp_path / "env")
    assert codes(report) == {"R004"}
    assert report.summary.items_scanned == 0 and not report.summary.passed
    detail = r004_details(report)[0]
    assert "empty (0 bytes)" in detail if not content else "cannot be opened" in detail


def test_a_damaged_page_count_in_the_meta_page_is_reported_and_does_not_explode_the_plan(tmp_path: Path) -> None:
    from scanner_service.config import ScanConfig
    from scanner_service.engine import plan
    from tests.lmdb.conftest import write_env

    env = write_env(tmp_path / "env", [(key(i), datum(seed=i)) for i in range(3000)])
    psize = page_size(env)
    for meta in (0, 1):  # MDB_meta after the 16-byte page header: magic, version, address, mapsize, then the
        # free and main MDB_db (48 bytes each); md_branch_pages is the main db's third field
        patch(env / "data.mdb", meta * psize + 16 + 24 + 48 + 8, struct.pack("<Q", 1 << 43))
    planned = plan(env, ScanConfig())
    assert len(planned.shards) <= 4  # sized from the pages in the file, not from 8.8e12 claimed ones
    report = run_scan(env)
    damaged = finding(report, "R004")
    assert damaged is not None and "damaged meta page" in damaged.locations[0].detail
    assert report.summary.items_scanned == 3000


def test_walks_from_both_ends_that_reach_more_than_the_count_do_not_claim_nothing_is_lost(tmp_path: Path) -> None:
    """The meta pages of commit 2, the other pages of commit 5: the forward walk fails after 200 records, the
    walk back reaches 204 of a later commit. It said "0 of 400 records cannot be reached"."""
    import lmdb

    rng = np.random.default_rng(10)

    def record(label: int) -> bytes:
        return datum(shape=(3, 16, 16), data=rng.integers(0, 256, 768, np.uint8).tobytes(), label=label)

    source = tmp_path / "src"
    opened = lmdb.open(str(source), map_size=1 << 24)
    snapshots = []
    for commit in range(5):
        with opened.begin(write=True) as txn:
            for i in range(commit * 200, (commit + 1) * 200):
                txn.put(f"k{i:05d}".encode(), record(i % 5))
            for i in range(0, commit * 200, 3):  # rewritten records: later commits reuse freed pages
                txn.put(f"k{i:05d}".encode(), record((i + commit) % 5))
        snapshots.append((source / "data.mdb").read_bytes())
    opened.close()
    size = page_size(source)
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "data.mdb").write_bytes(snapshots[1][: 2 * size] + snapshots[4][2 * size :])
    report = run_scan(torn)
    details = r004_details(report)
    assert any("more than the 400 the meta page counts" in d for d in details), details
    assert not any("0 of 400 records cannot be reached" in d for d in details)


def test_a_record_count_too_low_in_the_meta_pages_is_lmdb_corrupt(tmp_path: Path) -> None:
    """md_entries damaged from 3000 to 30 in both meta pages: LMDB still walks 3000 records, but a Dataset whose
    ``__len__`` is ``txn.stat()['entries']`` trains on 1% of them (the scan passed; too high was reported)."""
    from tests.lmdb.conftest import write_env

    env = write_env(tmp_path / "env", [(key(i), datum(seed=i, label=i % 3)) for i in range(3000)])
    psize = page_size(env)
    for meta in (0, 1):  # md_entries: byte 32 of the main db (after the 16-byte header, 24 bytes and the free db)
        patch(env / "data.mdb", meta * psize + 16 + 24 + 48 + 32, struct.pack("<Q", 30))
    report = run_scan(env, num_classes=3)
    (detail,) = r004_details(report)
    assert detail.startswith("the meta page counts 30 records, the tree holds 3,000: the count is damaged")
    assert report.source.items == report.summary.items_scanned == 3000
    assert report.labels[0].total == 3000


def test_a_damaged_transaction_id_that_hides_every_record_is_lmdb_corrupt(tmp_path: Path) -> None:
    from tests.lmdb.conftest import write_env

    env = write_env(tmp_path / "env", [(key(i), datum(seed=i)) for i in range(200)])
    # meta page 0 still holds the empty state of transaction 0; a flipped bit in its transaction id makes it
    # the newest, and LMDB opens an empty database
    patch(env / "data.mdb", 16 + 24 + 48 + 48 + 8, struct.pack("<Q", 1 << 23))
    report = run_scan(env)
    damaged = finding(report, "R004")
    assert damaged is not None and "damaged meta page" in damaged.locations[0].detail
    assert "200 records" in damaged.locations[0].detail
    assert "S006" not in codes(report)


def test_equal_transaction_ids_open_the_first_meta_page_as_lmdb_does(tmp_path: Path) -> None:
    import lmdb

    from tests.lmdb.conftest import write_env

    env = write_env(tmp_path / "env", [(key(i), datum(seed=i)) for i in range(200)])
    # the records are transaction 1, on meta page 1; a damaged id 0 there ties with meta page 0's empty
    # transaction 0, and LMDB then opens meta page 0
    patch(env / "data.mdb", page_size(env) + 16 + 24 + 48 + 48 + 8, struct.pack("<Q", 0))
    with lmdb.open(str(env), readonly=True, lock=False) as opened:
        assert opened.stat()["entries"] == 0
    report = run_scan(env)
    damaged = finding(report, "R004")
    assert damaged is not None and "damaged meta page" in damaged.locations[0].detail
    assert "200 records" in damaged.locations[0].detail


def test_a_database_emptied_by_its_last_transaction_is_only_empty(tmp_path: Path) -> None:
    import lmdb

    path = tmp_path / "env"
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i in range(50):
            txn.put(key(i).encode(), datum(seed=i))
    with env.begin(write=True) as txn:
        for i in range(50):
            txn.delete(key(i).encode())
    env.close()
    (path / "lock.mdb").unlink()
    report = run_scan(path)
    assert codes(report) == {"S006", "S008"}  # empty, and so the whole dataset: no damage


def test_a_damaged_second_meta_page_is_lmdb_corrupt(tmp_path: Path) -> None:
    """LMDB checks both meta pages and refuses the environment when one is no meta page (MDB_INVALID): dscan
    says so, and scans what the first one records (an older transaction's records, after three commits)."""
    import lmdb

    env = tmp_path / "env"
    opened = lmdb.open(str(env), map_size=1 << 24)
    for commit in range(3):
        with opened.begin(write=True) as txn:
            for i in range(commit * 100, commit * 100 + 100):
                txn.put(key(i).encode(), datum(seed=i))
    opened.close()
    size = page_size(env)
    patch(env / "data.mdb", size, bytes(size))  # meta page 1, transaction 3's
    with pytest.raises(lmdb.InvalidError):
        lmdb.open(str(env), readonly=True, lock=False)
    report = run_scan(env)
    damaged = finding(report, "R004")
    assert damaged is not None and damaged.locations[0].detail.startswith("damaged meta page: page 1 is no LMDB")
    assert "transaction 2" in damaged.locations[0].detail and report.summary.items_scanned == 200


def test_a_copy_taken_while_a_writer_committed_is_lmdb_corrupt(tmp_path: Path) -> None:
    """``cp`` of an environment a writer keeps committing to: the meta pages of an early transaction, the other
    pages of a later one, whose reused pages hold other records. The key walk ends without an error, short of
    the records the meta page counts: the records it cannot reach are reported (the scan passed on 2 of 700)."""
    import lmdb

    from tests.lmdb.conftest import jpeg, write_env

    def encoded(i: int) -> bytes:  # convert_imageset's records: Datums holding JPEG files
        return datum(data=jpeg(i, (24, 24)), encoded=True, label=i % 10)

    source = tmp_path / "src"
    opened = lmdb.open(str(source), map_size=1 << 27)
    snapshots, n = [], 0
    for _commit in range(4):
        with opened.begin(write=True) as txn:
            for i in range(n, n + 700):
                txn.put(f"{i:08d}_train/{i}.jpg".encode(), encoded(i))
            for i in range(0, n, 50):  # rewrites free pages that later transactions reuse
                txn.put(f"{i:08d}_train/{i}.jpg".encode(), encoded(i + 1))
        n += 700
        opened.sync(True)
        snapshots.append((source / "data.mdb").read_bytes())
    opened.close()
    copy = write_env(tmp_path / "copy", [])
    size = page_size(source)
    (copy / "data.mdb").write_bytes(snapshots[0][: 2 * size] + snapshots[3][2 * size :])
    report = run_scan(copy)
    damaged = finding(report, "R004")
    assert damaged is not None, codes(report)
    assert damaged.locations[0].detail.startswith("the meta page counts 700 records, the tree holds")
    assert report.summary.items_scanned < 700
