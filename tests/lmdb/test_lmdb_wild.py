"""Defects found by probing dscan with LMDB environments as they are in the wild, and damaged ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lmdb

from tests.conftest import codes, finding, run_scan
from tests.lmdb.conftest import datum, key, leaf_of, page_size, patch, tree_state, write_env

EnvMaker = Callable[..., Path]


def _swap_pages(data_file: Path, a: int, b: int, psize: int) -> None:
    data = bytearray(data_file.read_bytes())
    first = data[a * psize : (a + 1) * psize]
    data[a * psize : (a + 1) * psize] = data[b * psize : (b + 1) * psize]
    data[b * psize : (b + 1) * psize] = first
    data_file.write_bytes(bytes(data))


def test_two_leaf_pages_swapped_in_the_file_are_keys_out_of_order(datum_env: Callable[..., Path]) -> None:
    """Two leaf pages that changed places in data.mdb (a misdirected write, a bad sector remapped): each page's
    header names the other's page number, so planning walks the keys with LMDB, which reads on without an
    error, the records of one leaf in the other's place. A read in key order meets them out of order and a
    lookup by key finds none of them; the scan reported nothing (exit status 0)."""
    env = datum_env(n=1500, classes=5)
    data_file = env / "data.mdb"
    data, psize = data_file.read_bytes(), page_size(env)
    _swap_pages(data_file, leaf_of(data, key(20).encode(), psize), leaf_of(data, key(1485).encode(), psize), psize)
    before = tree_state(env)
    report = run_scan(env)
    assert tree_state(env) == before
    r004 = finding(report, "R004")
    assert r004 is not None and r004.count == 1, codes(report)
    where = r004.locations[0]
    assert "out of order" in (where.detail or "")
    # key order breaks where the walk leaves the misplaced leaf (keys 1479-1495 in place of 17-33)
    assert (where.key, where.index) == (key(34), 34)
    assert report.summary.items_scanned == 1500


def test_keys_in_integer_order_are_no_disorder(tmp_path: Path) -> None:
    """A main database written with MDB_INTEGERKEY (C writers; py-lmdb cannot set it) keeps 8-byte native
    integer keys in integer order, not bytewise: walking them is no sign of damage. (The key walk, taken for
    any database flag, judged the order bytewise.)"""
    env = tmp_path / "env"
    env.mkdir()
    opened = lmdb.open(str(env), map_size=1 << 26)
    with opened.begin(write=True) as txn:  # an empty main database of a committed transaction: then its flags
        txn.put(bytes(8), b"x")
    with opened.begin(write=True) as txn:
        txn.delete(bytes(8))
    opened.close()
    for meta in (0, 1):  # md_flags: byte 4 of the main db (after the 16-byte header, 24 bytes and the free db)
        patch(env / "data.mdb", meta * page_size(env) + 16 + 24 + 48 + 4, (0x08).to_bytes(2, "little"))
    opened = lmdb.open(str(env), map_size=1 << 26)
    with opened.begin(write=True) as txn:
        for i in range(1500):
            txn.put(i.to_bytes(8, "little"), datum(seed=i, label=i % 3))
    opened.close()
    (env / "lock.mdb").unlink()
    report = run_scan(env)
    assert codes(report) == set(), [loc.detail for f in report.findings for loc in f.locations]
    assert report.summary.items_scanned == 1500


def test_a_record_count_no_file_of_its_size_could_hold_is_a_damaged_count(tmp_path: Path) -> None:
    """md_entries with a flipped high bit (2,000 -> 4,294,969,296) in the meta page in use: LMDB walks the 2,000
    records, and every one was scanned, but the report said "the tree reached is not the one counted ... the
    other records cannot be read", and counted 4,294,969,296 items in the source. 495 KB cannot hold 4 billion
    records: the count is damaged."""
    env = write_env(tmp_path / "env", [(key(i), datum(seed=i, label=i % 3)) for i in range(2000)])
    psize = page_size(env)
    for meta in (0, 1):  # md_entries: byte 32 of the main db (after the 16-byte header, 24 bytes and the free db)
        patch(env / "data.mdb", meta * psize + 16 + 24 + 48 + 32 + 4, b"\x01")
    report = run_scan(env, num_classes=3)
    r004 = finding(report, "R004")
    assert r004 is not None and r004.count == 1, codes(report)
    detail = r004.locations[0].detail or ""
    assert detail.startswith("the meta page counts 4,294,969,296 records, the tree holds 2,000: the count is damaged")
    assert "cannot be read" not in detail
    assert report.source.items == report.summary.items_scanned == 2000
