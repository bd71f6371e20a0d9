"""Reading the B-tree's pages directly agrees with LMDB's cursor, and steps aside whenever it is unsure."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lmdb
import numpy as np
import pytest

from scanner_service import ScanConfig, plan
from scanner_service.engine import scan_shard
from scanner_service.errors import UnsupportedSource
from scanner_service.partial import Partial, merge
from scanner_service.sources.lmdb_pages import read_tree
from tests.conftest import finding, run_scan
from tests.lmdb.conftest import P_LEAF, datum, jpeg, key, node_of, page_flags, page_size, patch

EnvMaker = Callable[..., Path]


def mixed_records() -> list[tuple[str, bytes]]:
    """Raw Datums with every kind of odd record, labels of one and two varint bytes and none."""
    rng = np.random.default_rng(7)
    records = []
    for i in range(3000):
        label: int | None = int(rng.integers(0, 400)) if i % 3 else i % 7
        if i % 500 == 499:
            label = None
        records.append((key(i), datum(shape=(3, 12, 12), label=label, seed=i, encoded=False if i % 2 else None)))
    records[10] = (key(10), b"\x0a\xff\xff not a datum")
    records[11] = (key(11), datum(shape=(3, 12, 12), data=b"\x00" * 400, label=3))
    records[12] = (key(12), datum(shape=(3, 6, 6), label=4, seed=12))
    records[13] = (key(13), datum(shape=(3, 40, 48), data=jpeg(13)[:500], encoded=True, label=5))
    records[14] = (key(14), datum(shape=(3, 12, 12), label=-1, seed=14))
    records[15] = (key(15), datum(shape=(3, 12, 12), label=70000, seed=15))
    return records


def float_records() -> list[tuple[str, bytes]]:
    rng = np.random.default_rng(8)
    records = []
    for i in range(1500):
        values = rng.standard_normal((2, 5, 5)).astype(np.float32)
        if i in (5, 900):
            values[1, 2, 3] = np.nan
        records.append((key(i), datum(shape=(2, 5, 5), floats=values, label=int(rng.integers(0, 300)))))
    records[20] = (key(20), datum(shape=(2, 5, 5), floats=np.zeros(49), label=1))
    forged = bytearray(datum(shape=(2, 5, 5), floats=np.ones(50), label=1))
    forged[len(forged) - 5 * 10] = 0x3D  # one float's tag byte: same length, no longer a float_data field
    records[30] = (key(30), bytes(forged))
    return records


def by_both_paths(path: Path, **options: object) -> tuple[Partial, Partial]:
    config = ScanConfig(shard_bytes=1 << 16, **options)  # type: ignore[arg-type]
    planned = plan(path, config)
    assert all("leaves" in s.spec for s in planned.shards), "planned from the pages"
    direct = [scan_shard("lmdb", planned.source.path, s, config) for s in planned.shards]
    cursor = []
    for shard in planned.shards:
        spec = {k: v for k, v in shard.spec.items() if k not in ("leaves", "psize")}
        cursor.append(scan_shard("lmdb", planned.source.path, shard.model_copy(update={"spec": spec}), config))
    return merge(direct), merge(cursor)


def shuffled(records: Callable[[], list[tuple[str, bytes]]]) -> Callable[[], list[tuple[str, bytes]]]:
    """The same records written in random key order: their values are not in key order in the file."""

    def make() -> list[tuple[str, bytes]]:
        items = records()
        np.random.default_rng(0).shuffle(items)  # type: ignore[arg-type]
        return items

    return make


@pytest.mark.parametrize(
    "records",
    [mixed_records, float_records, shuffled(mixed_records), shuffled(float_records)],
    ids=["raw", "floats", "raw-shuffled", "floats-shuffled"],
)
def test_pages_and_cursor_read_the_same(make_env: EnvMaker, records: Callable[[], list[tuple[str, bytes]]]) -> None:
    direct, cursor = by_both_paths(make_env(records()), max_locations=50)
    assert direct.items == cursor.items == len(records())
    assert direct.findings.keys() == cursor.findings.keys()
    for code, tally in direct.findings.items():
        assert (tally.count, tally.locations) == (cursor.findings[code].count, cursor.findings[code].locations), code
    if records in (float_records,):
        # record 30's forged field is foreign to a Datum: parsed as Caffe does, it holds 49 floats, not 50
        assert [loc.key for loc in direct.findings["R002"].locations] == [key(20), key(30)]
    assert direct.labels["label"].histogram == cursor.labels["label"].histogram
    assert direct.labels["label"].runs == cursor.labels["label"].runs
    assert direct.counters == cursor.counters
    for name, stats in direct.stats.items():
        other = cursor.stats[name]
        assert stats.count == other.count and stats.nan == other.nan
        assert np.allclose(stats.mean, other.mean) and stats.min == other.min and stats.max == other.max


def test_blank_raw_datums_are_constant_samples_on_both_paths(make_env: EnvMaker) -> None:
    almost = bytearray([9]) * 768
    almost[400] = 8  # its first, middle and last pixels agree, yet it is no blank image
    pixels = {0: bytes(768), 500: b"\xff" * 768, 700: bytes(almost), 2999: b"\x11" * 768}
    records = [(key(i), datum(shape=(3, 16, 16), data=pixels.get(i), label=i % 5, seed=i)) for i in range(3000)]
    direct, cursor = by_both_paths(make_env(records))
    for partial in (direct, cursor):  # the first record is parsed in full, the others on the fast paths
        found = partial.findings["V005"]
        assert [(loc.key, loc.detail) for loc in found.locations] == [
            (key(0), "every value is 0 (3×16×16)"),
            (key(500), "every value is 255 (3×16×16)"),
            (key(2999), "every value is 17 (3×16×16)"),
        ]
        assert partial.items == 3000 and set(partial.findings) == {"V005"}


def test_the_tree_read_from_the_pages_matches_the_cursor(make_env: EnvMaker) -> None:
    path = make_env(mixed_records())
    tree = read_tree(path / "data.mdb")
    assert tree is not None and tree.entries == 3000
    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn:
        keys = [bytes(k) for k in txn.cursor().iternext(keys=True, values=False)]
    env.close()
    assert sum(leaf.count for leaf in tree.leaves) == len(keys)
    at = 0
    for leaf in tree.leaves:
        assert (leaf.first, leaf.last) == (keys[at], keys[at + leaf.count - 1])
        at += leaf.count


def test_named_databases_and_duplicates_fall_back_to_the_cursor(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path / "named"), max_dbs=2, map_size=1 << 24, lock=True)
    inner = env.open_db(b"inner", dupsort=True)
    with env.begin(write=True) as txn:
        for i in range(50):
            txn.put(key(i).encode(), datum(seed=i), db=inner)
            txn.put(key(i).encode(), datum(seed=i + 1), db=inner)
    env.close()
    (tmp_path / "named" / "lock.mdb").unlink()
    assert read_tree(tmp_path / "named" / "data.mdb") is not None  # the main database holds one sub-database
    with pytest.raises(UnsupportedSource, match="named databases"):  # LMDB's own record, not a bad Datum
        run_scan(tmp_path / "named")


def test_a_named_database_beside_the_main_records_is_a_note_not_a_bad_record(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path / "mixed"), max_dbs=2, map_size=1 << 24, lock=True)
    meta = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        for i in range(300):
            txn.put(key(i).encode(), datum(label=i % 3, seed=i))
        txn.put(b"classes", b"cat,dog,bird", db=meta)
    env.close()
    (tmp_path / "mixed" / "lock.mdb").unlink()
    report = run_scan(tmp_path / "mixed")
    assert report.findings == []
    assert report.summary.items_scanned == 301
    assert "named database" in report.info["lmdb.named_database meta"]


def test_a_bad_overflow_page_costs_only_its_record(make_env: EnvMaker) -> None:
    """LMDB would stop the whole range at such a record; reading the pages reports it and goes on."""
    path = make_env([(key(i), datum(shape=(3, 32, 32), label=i % 5, seed=i)) for i in range(400)])
    data = (path / "data.mdb").read_bytes()
    node = node_of(data, key(123).encode())
    overflow = int.from_bytes(data[node + 8 + 8 : node + 8 + 8 + 8], "little")
    psize = page_size(path)
    assert page_flags(data, overflow, psize) & 0x04
    patch(path / "data.mdb", overflow * psize + 10, P_LEAF.to_bytes(2, "little"))
    report = run_scan(path)
    r004 = finding(report, "R004")
    assert [(loc.key, loc.index) for loc in r004.locations] == [(key(123), 123)]
    assert "overflow page" in (r004.locations[0].detail or "")
    assert report.summary.items_scanned == 400
    assert report.labels[0].total == 399


def test_a_damaged_node_costs_only_its_record(make_env: EnvMaker) -> None:
    path = make_env([(key(i), datum(shape=(3, 32, 32), label=i % 5, seed=i)) for i in range(400)])
    node = node_of((path / "data.mdb").read_bytes(), key(250).encode())
    patch(path / "data.mdb", node + 6, b"\xff\xff")  # the key size: far past the page
    report = run_scan(path)
    r004 = finding(report, "R004")
    assert [(loc.key, loc.index) for loc in r004.locations] == [(None, 250)]
    assert "node in the leaf page is damaged" in (r004.locations[0].detail or "")
    assert "it follows key 00000249" in (r004.locations[0].detail or "")
    assert report.summary.items_scanned == 400 and report.labels[0].total == 399


def test_values_over_many_pages(make_env: EnvMaker) -> None:
    records = [(key(i), datum(shape=(3, 200, 200), label=i % 3, seed=i)) for i in range(60)]
    records[41] = (key(41), datum(shape=(3, 200, 200), data=b"\x07" * 100_000, label=1))
    direct, cursor = by_both_paths(make_env(records))
    assert direct.items == cursor.items == 60
    assert [loc.key for loc in direct.findings["R002"].locations] == [key(41)]
    assert direct.findings.keys() == cursor.findings.keys() == {"R002"}
    assert direct.labels["label"].histogram == cursor.labels["label"].histogram == {0: 20, 1: 21, 2: 19}


def test_an_overflow_page_number_damaged_in_its_top_bytes_is_lmdb_corrupt(make_env: Callable[..., Path]) -> None:
    """A page number is 8 bytes; its top two were not read, so a flipped bit there left the value where it
    was for dscan while LMDB looks for a page far past the file (MDB_PAGE_NOTFOUND): the loader dies there."""
    records = [(key(i), datum(shape=(3, 32, 32), label=i % 3, seed=i)) for i in range(40)]  # values on overflow pages
    path = make_env(records)
    data_file = path / "data.mdb"
    node = node_of(data_file.read_bytes(), key(17).encode())
    patch(data_file, node + 8 + len(key(17)) + 7, b"\x20")  # the page number's top byte
    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn, pytest.raises(lmdb.Error, match="MDB_PAGE_NOTFOUND"):
        for _ in txn.cursor():
            pass
    env.close()
    found = finding(run_scan(path, workers=1), "R004")
    assert found is not None and [(loc.key, loc.index) for loc in found.locations] == [("00000017", 17)]
    assert "past the end of the file" in (found.locations[0].detail or "")


def test_a_key_damaged_inside_a_leaf_page_is_keys_out_of_order(make_env: Callable[..., Path]) -> None:
    """One byte of a key in the middle of a leaf page: a read in key order still gets every record, but a lookup
    by key goes astray in the page (txn.get finds nothing for it or its neighbour); the order across pages was
    checked, not within one."""
    records = [(key(i), datum(shape=(1, 4, 4), label=i % 3, seed=i)) for i in range(300)]  # many to a page
    path = make_env(records)
    data_file = path / "data.mdb"
    at = data_file.read_bytes().index(key(150).encode())
    patch(data_file, at + 3, b"4")  # 00000150 -> 00040150: after 00000151 in bytewise order
    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn:
        assert sum(1 for _ in txn.cursor()) == 300
        assert [i for i in range(300) if txn.get(key(i).encode()) is None]
    env.close()
    report = run_scan(path, workers=1)
    found = finding(report, "R004")
    assert found is not None and [(loc.key, loc.index) for loc in found.locations] == [("00000151", 151)]
    assert "keys out of order" in (found.locations[0].detail or "") and "00040150" in (found.locations[0].detail or "")
    assert report.summary.items_scanned == 300
    assert finding(run_scan(make_env(records, name="clean"), workers=1), "R004") is None


def test_keys_out_of_order_within_pages_with_keys_of_any_length() -> None:
    """The check compares keys of one length as a byte matrix and others one pair at a time, alike; it compares
    no pair across pages (the tree's order tells there) and none with a damaged node."""
    from scanner_service.sources.lmdb_pages import BAD_NODE, Records, unsorted_in_pages

    long = [b"a" * 80, b"b" * 80, b"a" * 80, b"c" * 80]  # (longer than the matrix takes)
    for keys in ([b"aa", b"ab", b"aa", b"ac"], [b"a", b"ab", b"aa", b"b"], long):
        psize = 4096
        buf = np.zeros(2 * psize, np.uint8)
        starts = [0, 200, psize, psize + 200]  # two pages of two keys
        for at, k in zip(starts, keys, strict=True):
            buf[at : at + len(k)] = np.frombuffer(k, np.uint8)
        n = len(keys)
        zero = np.zeros(n, np.int64)
        lengths = np.array([len(k) for k in keys])
        records = Records(np.array(starts), lengths, zero, zero, zero, zero.copy())
        assert unsorted_in_pages(buf, records, psize).tolist() == [], keys  # pages each sorted; page 2 < page 1
        records = Records(np.array([0, 200, 400, 600]), lengths, zero, zero, zero, zero.copy())
        for at, k in zip([0, 200, 400, 600], keys, strict=True):
            buf[at : at + len(k)] = np.frombuffer(k, np.uint8)
        assert unsorted_in_pages(buf, records, psize).tolist() == [2], keys  # one page: the third is not after
        records.damaged[2] = BAD_NODE
        assert unsorted_in_pages(buf, records, psize).tolist() == [], keys


def test_a_key_out_of_order_in_its_page_is_found_whatever_the_decoder(make_env: Callable[..., Path]) -> None:
    """Records of other decoders are read through LMDB's cursor, not the pages: the pages are still read for the
    order of their keys."""
    rng = np.random.default_rng(3)
    path = make_env([(key(i), rng.standard_normal(16).astype(np.float32).tobytes()) for i in range(300)])
    data_file = path / "data.mdb"
    at = data_file.read_bytes().index(key(150).encode())
    patch(data_file, at + 3, b"4")
    report = run_scan(path, workers=1, decoder="raw:float32:16")
    found = finding(report, "R004")
    assert found is not None and [(loc.key, loc.index) for loc in found.locations] == [("00000151", 151)]
    assert report.summary.items_scanned == 300 and finding(report, "R001") is None
