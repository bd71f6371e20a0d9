"""Defects found by probing dscan with LMDB environments written as real tools write them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import lmdb
import numpy as np
import pytest

from tests.conftest import codes, finding, run_scan
from tests.lmdb.conftest import (
    P_BRANCH,
    PAGE_HEADER,
    datum,
    jpeg,
    key,
    leaf_keys,
    leaf_of,
    page_flags,
    page_size,
    patch,
    pickled,
)

EnvMaker = Callable[..., Path]


def test_a_pickled_imagefolder_lmdb_counts_its_samples_not_its_keys_and_length(make_env: EnvMaker) -> None:
    """ImageFolderLMDB (``folder2lmdb.py``) pickles ``(image bytes, label)`` under ``str(i)`` and adds a pickled
    ``__keys__`` list and ``__len__``: 30 samples are not scanned, not 32 (numpy labels: pickles that need a
    global, which are not read; plain ones are, see test_lmdb_pickles.py)."""
    keys = [str(i).encode("ascii") for i in range(30)]
    records = [(k, pickled((jpeg(i), np.int64(i % 3)))) for i, k in enumerate(keys)]  # needs a global
    records += [(b"__keys__", pickled(keys)), (b"__len__", pickled(len(keys)))]
    report = run_scan(make_env(records))
    assert codes(report) == {"R005"}
    r005 = finding(report, "R005")
    assert r005.count == 30 and r005.values == 30
    assert "none of the 30 records was scanned" in (r005.locations[0].detail or "")
    assert r005.locations[0].key == "0"
    assert "lmdb.bookkeeping __keys__" in report.info and "lmdb.bookkeeping __len__" in report.info


def test_a_pickled_database_is_located_at_its_first_sample_not_at_a_writers_record(make_env: EnvMaker) -> None:
    """``__keys__`` and ``__len__`` sort before lower-case keys: the finding named ``__keys__`` (position 0), the
    writer's list of keys, as the first pickled sample."""
    keys = [f"img_{i:04d}".encode() for i in range(30)]
    records = [(k, pickled((jpeg(i), np.int64(i % 3)))) for i, k in enumerate(keys)]  # needs a global
    records += [(b"__keys__", pickled(keys)), (b"__len__", pickled(len(keys)))]
    r005 = finding(run_scan(make_env(records)), "R005")
    assert r005.count == 30
    assert (r005.locations[0].key, r005.locations[0].index) == ("img_0000", 2)


def _branch_children(data: bytes, psize: int) -> tuple[int, list[int]]:
    """The root branch page and the offsets of its nodes (whose first 6 bytes hold the child's page number)."""
    root = next(p for p in range(2, len(data) // psize) if page_flags(data, p, psize) == P_BRANCH)
    base = root * psize
    lower = int.from_bytes(data[base + 12 : base + 14], "little")
    at = [base + int.from_bytes(data[base + i : base + i + 2], "little") for i in range(PAGE_HEADER, lower, 2)]
    return root, at


@pytest.mark.parametrize("damage", ["same-leaf-twice", "leaves-swapped"])
def test_a_branch_page_that_sends_lookups_to_the_wrong_leaf_is_lmdb_corrupt(
    datum_env: Callable[..., Path], damage: str
) -> None:
    """A damaged child page number in a branch page that names another leaf of the tree: LMDB reads on without
    an error (the record count adds up when leaves hold as many records, as Caffe's equal-sized Datums do), a
    read in key order meets one leaf's records twice or out of order, and a lookup by key (txn.get) of the
    records in between finds nothing. The scan reported nothing."""
    env = datum_env(n=3000, classes=5)
    data_file = env / "data.mdb"
    data = data_file.read_bytes()
    psize = page_size(env)
    _root, nodes = _branch_children(data, psize)
    five, six = data[nodes[5] : nodes[5] + 6], data[nodes[6] : nodes[6] + 6]
    counts = [len(leaf_keys(data, int.from_bytes(n[:4], "little"), psize)) for n in (five, six)]
    assert counts[0] == counts[1]  # the damage leaves the record count as it was
    first_of_six = leaf_keys(data, int.from_bytes(six[:4], "little"), psize)[0]
    patch(data_file, nodes[5], six[:4])
    if damage == "leaves-swapped":
        patch(data_file, nodes[6], five[:4])
    report = run_scan(env)
    r004 = finding(report, "R004")
    assert r004 is not None and r004.count == 1, codes(report)
    where = r004.locations[0]
    assert "out of order" in (where.detail or "")
    if damage == "same-leaf-twice":  # the second copy of leaf six's records, where they belong
        assert (where.key, where.index) == (first_of_six.decode(), 6 * counts[0])
    assert report.summary.items_scanned == 3000


def test_a_damaged_branch_key_is_lmdb_corrupt(datum_env: Callable[..., Path]) -> None:
    """The key in a branch page that leads to a leaf, damaged (``00000z85`` for ``00000085``): a lookup of any of
    that leaf's keys descends into the leaf before it and finds nothing. The scan reported nothing."""
    env = datum_env(n=3000, classes=5)
    data_file = env / "data.mdb"
    data = data_file.read_bytes()
    _root, nodes = _branch_children(data, page_size(env))
    size = int.from_bytes(data[nodes[5] + 6 : nodes[5] + 8], "little")
    separator = data[nodes[5] + 8 : nodes[5] + 8 + size]
    patch(data_file, nodes[5] + 8, separator[:5] + b"z" + separator[6:])
    r004 = finding(run_scan(env), "R004")
    assert r004 is not None and r004.count == 1
    assert (r004.locations[0].key, r004.locations[0].index) == (separator.decode(), int(separator))
    assert "out of order" in (r004.locations[0].detail or "")


def test_the_size_of_an_environment_written_with_writemap_is_its_pages_not_its_map(tmp_path: Path) -> None:
    """``lmdb.open(path, map_size=1 << 34, writemap=True)`` extends data.mdb to the whole map (a sparse file):
    the report gave the dataset as 16 GB, for 200 records in a few dozen pages."""
    path = tmp_path / "writemap_lmdb"
    path.mkdir()
    env = lmdb.open(str(path), map_size=1 << 34, writemap=True)
    with env.begin(write=True) as txn:
        for i in range(200):
            txn.put(key(i).encode(), datum(label=i % 4, seed=i))
    pages = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    env.close()
    (path / "lock.mdb").unlink()
    assert (path / "data.mdb").stat().st_size == 1 << 34
    report = run_scan(path)
    assert codes(report) == set() and report.summary.items_scanned == 200
    assert report.source.bytes == pages < 1 << 20


def test_a_pickled_database_whose_first_leaf_is_damaged_is_located_at_the_first_key_reached(
    make_env: EnvMaker,
) -> None:
    """The first records cannot be reached: the finding named the first key reached as record 0."""
    keys = sorted(str(i).encode("ascii") for i in range(300))
    records = [(k, pickled((jpeg(int(k), size=(8, 8)), np.int64(int(k) % 3)))) for k in keys]
    records += [(b"__keys__", pickled(keys)), (b"__len__", pickled(len(keys)))]
    env = make_env(records)
    data_file = env / "data.mdb"
    psize = page_size(env)
    patch(data_file, leaf_of(data_file.read_bytes(), b"0", psize) * psize, bytes(psize))
    report = run_scan(env)
    assert finding(report, "R004") is not None
    where = finding(report, "R005").locations[0]
    assert where.key is not None and where.key != "0"
    assert where.index == keys.index(where.key.encode())


def test_progress_of_a_finished_scan_reaches_the_planned_bytes(make_env: EnvMaker) -> None:
    """An LMDB is planned by its file's size (pages and free space included) and its records measure their
    values: progress stopped at the values' share (77% here) until the scan ended. Each finished shard now
    reports its planned bytes, in the CLI's progress bar and the service's job record alike."""
    from scanner_service import ScanConfig, plan, scan_shard

    path = make_env([(key(i), datum(shape=(3, 8, 8), label=i % 2, seed=i)) for i in range(2000)])
    config = ScanConfig(shard_bytes=1 << 16)
    planned = plan(path, config)
    assert len(planned.shards) > 2
    done = [0, 0]

    def progress(items: int, nbytes: int) -> None:
        done[0] += items
        done[1] += nbytes

    scanned = sum(scan_shard("lmdb", str(path), s, config, progress=progress).bytes for s in planned.shards)
    assert scanned < planned.source.bytes  # the values alone: what progress stopped at before
    assert done == [planned.source.items, sum(s.bytes for s in planned.shards)]
    assert abs(done[1] - planned.source.bytes) <= len(planned.shards)  # the shards' shares, rounded down


@pytest.mark.parametrize(
    ("label_key", "shared"),
    [(lambda i: f"lbl-{i:06d}", False), (lambda i: f"{i:08d}_label", False), (lambda i: "", True)],
    ids=["lbl-N", "N_label", "one-labels-record"],
)
def test_labels_kept_apart_from_raw_image_values_are_no_findings(
    make_env: EnvMaker, label_key: Callable[[int], str], shared: bool
) -> None:
    """Raw JPEG bytes as values and each label as text under a key of its own (``00000012_label``,
    ``lbl-000012``) or all of them in one ``labels`` record: every label record was a ``not-an-image`` error
    ("content is text"), exit status 1 for a healthy database. A truncated JPEG is still found."""
    records = [(key(i), jpeg(i)) for i in range(30)]
    records[7] = (key(7), jpeg(7)[:300])
    if shared:
        records.append(("labels", ",".join(str(i % 3) for i in range(30)).encode()))
    else:
        records += [(label_key(i), str(i % 3).encode()) for i in range(30)]
    report = run_scan(make_env(records))
    assert codes(report) == {"I003"}
    assert [loc.key for loc in finding(report, "I003").locations] == [key(7)]
    assert report.info["lmdb.text_records"].endswith("not images, not scanned")


def test_a_msgpack_record_without_the_label_every_other_record_carries_is_invalid(make_env: EnvMaker) -> None:
    """``{"img": jpeg, "label": 3}`` in every record but one, which lost its label (``[jpeg]`` in a database
    of ``[jpeg, label]`` lists alike): the loader's ``record["label"]`` raises on it, mid-epoch. The scan
    reported nothing (exit status 0). Records without labels throughout are a database without labels."""
    import msgpack

    records = [(key(i), msgpack.packb({"img": jpeg(i), "label": i % 4})) for i in range(60)]
    records[33] = (key(33), msgpack.packb({"img": jpeg(33)}))
    records[41] = (key(41), msgpack.packb([jpeg(41)]))
    report = run_scan(make_env(records), shard_bytes=1 << 14, workers=2)
    r001 = finding(report, "R001")
    assert r001 is not None and r001.count == 2, codes(report)
    assert [(loc.key, loc.index) for loc in r001.locations] == [(key(33), 33), (key(41), 41)]
    assert "no label" in (r001.locations[0].detail or "")
    assert report.summary.items_scanned == 60
    unlabelled = [(key(i), msgpack.packb({"img": jpeg(i)})) for i in range(30)]
    assert codes(run_scan(make_env(unlabelled, name="unlabelled"))) == set()
    # the record without one among those sampled (the first ones; a small database is sampled whole): it turned
    # the check off for the whole database
    for n in (10, 200):
        records = [(key(i), msgpack.packb({"img": jpeg(i), "label": i % 4})) for i in range(n)]
        records[3] = (key(3), msgpack.packb({"img": jpeg(3)}))
        r001 = finding(run_scan(make_env(records, name=f"sampled{n}")), "R001")
        assert r001 is not None and [loc.key for loc in r001.locations] == [key(3)], n
    half = [(key(i), msgpack.packb({"img": jpeg(i), **({"label": 1} if i % 2 else {})})) for i in range(40)]
    assert "R001" not in codes(run_scan(make_env(half, name="half")))  # labels here and there: no rule broken


def test_a_record_that_is_no_datum_says_what_it_holds(datum_env: Callable[..., Path]) -> None:
    """A web page (a scraper's error page written as the record) and a bare JPEG (an image stored without its
    Datum) among raw Datums: each was "not a Datum protobuf (Error parsing message with type 'caffe.Datum':
    Wire format was corrupt)", which sends the user looking for damage in the file."""
    html = b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>"
    report = run_scan(datum_env(n=300, extra={key(70): html, key(71): jpeg(71)}))
    r001 = finding(report, "R001")
    assert r001 is not None and r001.count == 2, codes(report)
    details = {loc.key: loc.detail or "" for loc in r001.locations}
    assert details[key(70)].startswith("not a Datum protobuf: content is HTML")
    assert details[key(71)].startswith("not a Datum protobuf: an encoded JPEG image, not wrapped in a Datum")


def test_a_walker_that_hangs_is_stopped_and_says_so(
    datum_env: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """LMDB following a damaged tree round in a loop never returns: the walker child was waited for forever, and
    the scan with it. Here the child's walk is replaced by a read of a named pipe no one writes to (what a hung
    walk looks like from the parent); the walker is killed after the stall time and the walk fails with why."""
    from scanner_service.forked import stall_reason
    from scanner_service.sources import lmdb_walk

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    monkeypatch.setattr(lmdb_walk, "_child", lambda *args: pipe.read_bytes())
    monkeypatch.setattr(lmdb_walk, "STALL_S", 0.5)
    result = lmdb_walk.walk(datum_env(n=10), True, lmdb_walk.Job())
    assert result.failure == stall_reason(0.5) and result.done is None
