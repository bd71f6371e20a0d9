"""The LMDB source as a user meets it: detection, read-only scans through the CLI, the plan's key ranges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest

from scanner_service import ScanConfig, plan, scan
from scanner_service.errors import UnsupportedSource
from scanner_service.forked import stall_reason
from scanner_service.sources import detect_kind
from scanner_service.sources.lmdb import LmdbSource, key_text
from tests.conftest import as_nobody, let_nobody_in, write_h5
from tests.lmdb.conftest import datum, key, tree_state, write_env

ROOT = Path(__file__).resolve().parents[2]
EnvMaker = Callable[..., Path]


def dscan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def all_keys(path: Path, subdir: bool = True) -> list[bytes]:
    env = lmdb.open(str(path), readonly=True, lock=False, subdir=subdir)
    with env.begin() as txn:
        keys = [bytes(k) for k in txn.cursor().iternext(keys=True, values=False)]
    env.close()
    return keys


@pytest.mark.parametrize("subdir", [True, False], ids=["folder", "data-file"])
def test_scan_leaves_the_environment_byte_for_byte_unchanged(tmp_path: Path, subdir: bool) -> None:
    records = [(key(i), datum(label=i % 3, seed=i)) for i in range(500)]
    records[99] = (key(99), b"broken")
    name = "env" if subdir else "train.mdb"
    env = write_env(tmp_path / "data" / name, records, subdir=subdir)
    folder = tmp_path / "data"
    os.utime(env if not subdir else env / "data.mdb", ns=(1_000_000_000, 1_000_000_000))
    before = tree_state(folder)
    for workers in ("0", "2"):
        done = dscan(str(env), "--format", "json", "-j", workers)
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)
        assert report["source"]["kind"] == "lmdb"
        assert [loc["key"] for loc in report["findings"][0]["locations"]] == [key(99)]
    assert tree_state(folder) == before  # same files (no lock file), sizes, mtimes and bytes
    assert sorted(p.name for p in folder.rglob("*")) == sorted([name] if not subdir else ["env", "data.mdb"])


def test_a_data_file_the_user_cannot_read_is_said_so(tmp_path: Path) -> None:
    """Permission denied is no damage: an unreadable data.mdb is unreadable-file saying so (LMDB's own error,
    "ReadonlyError", was reported as lmdb-corrupt), and an unreadable LMDB data file given as the path is an
    error saying so (it was "not a dataset dscan can read")."""
    folder = write_env(tmp_path / "env", [(key(i), datum(label=0, seed=i)) for i in range(5)])
    single = write_env(tmp_path / "single.mdb", [(key(0), datum(label=0, seed=0))], subdir=False)
    (folder / "data.mdb").chmod(0)
    single.chmod(0)
    folder.chmod(0o755)
    let_nobody_in(tmp_path)

    def findings() -> object:
        planned = plan(folder, ScanConfig())
        return [(code, [loc.detail for loc in t.locations]) for code, t in planned.partial.findings.items()]

    assert as_nobody(findings) == [("S001", ["permission denied: the data file cannot be read"])]
    assert as_nobody(lambda: detect_kind(single)) == f"UnsupportedSource: {single} cannot be read: permission denied"


def test_detection(tmp_path: Path) -> None:
    env = write_env(tmp_path / "mixed", [(key(0), datum())])
    write_h5(tmp_path / "mixed" / "extra.h5", {"x": [1.0, 2.0]})
    assert detect_kind(env) == "lmdb"  # a folder holding data.mdb is an environment, whatever else it holds
    assert detect_kind(env / "data.mdb") == "lmdb"
    single = write_env(tmp_path / "train.lmdb", [(key(0), datum())], subdir=False)
    assert detect_kind(single) == "lmdb"  # any name: LMDB's meta page magic
    assert not LmdbSource.detect(tmp_path / "mixed" / "extra.h5")
    # a folder of environments side by side is none: the error names them
    for name in ("train_lmdb", "val_lmdb"):
        write_env(tmp_path / "both" / name, [(key(0), datum())])
    with pytest.raises(UnsupportedSource, match=r"it holds LMDB environments \(train_lmdb, val_lmdb\); scan each"):
        detect_kind(tmp_path / "both")
    # an environment written with subdir=False (a data file and its -lock file) in a folder: named the same way
    write_env(tmp_path / "files" / "train.lmdb", [(key(0), datum())], subdir=False)
    with pytest.raises(UnsupportedSource, match=r"it holds LMDB environments \(train.lmdb\); scan each"):
        detect_kind(tmp_path / "files")


def test_shards_are_key_ranges_balanced_by_count(make_env: EnvMaker) -> None:
    path = make_env([(key(i), datum(shape=(3, 16, 16), label=i % 2, seed=i)) for i in range(1000)])
    planned = plan(path, ScanConfig(shard_bytes=1 << 16))
    shards = planned.shards
    counts = [s.spec["count"] for s in shards]
    assert len(shards) >= 5 and max(counts[:-1]) - min(counts[:-1]) <= 16  # cut at leaf pages: a few records apart
    assert counts[-1] <= max(counts)
    assert sum(counts) == planned.source.items == 1000
    keys = all_keys(path)
    position = 0
    for shard in shards:
        spec = shard.spec
        assert spec["start"] == position and shard.items == spec["count"]
        assert bytes.fromhex(spec["first"]) == keys[position]
        assert bytes.fromhex(spec["last"]) == keys[position + spec["count"] - 1]
        assert spec["prev"] == (keys[position - 1].hex() if position else None)
        position += spec["count"]


def test_shards_of_tiny_records_are_capped_by_count(make_env: EnvMaker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of a few bytes, hundreds to a page, are cut into shards of about ``MAX_SHARD_RECORDS`` (a
    reader places all of its shard's records at once: 64 MB of such pages cost 550 MB a reader), and the
    report is the one a single shard gives."""
    from scanner_service.sources import lmdb_walk

    records = [(key(i), datum(shape=(1, 1, 1), data=bytes([i % 251]), label=i % 3)) for i in range(5_000)]
    path = make_env(records)
    config = ScanConfig(batch_size=8, max_locations=1000)
    whole = plan(path, config)
    assert len(whole.shards) == 1
    assert lmdb_walk.records_per_shard({**STAT, "entries": 10**9, "leaf_pages": 10**7}, 64 << 20) == 1 << 18
    single = scan(path, config, workers=0)
    monkeypatch.setattr(lmdb_walk, "MAX_SHARD_RECORDS", 1_000)
    cut = plan(path, config)
    counts = [s.spec["count"] for s in cut.shards]
    assert len(counts) >= 4 and max(counts) < 1_200 and sum(counts) == 5_000, counts  # (cut at leaf pages)
    many = scan(path, config, workers=0)
    assert many.summary.items_scanned == single.summary.items_scanned == 5_000
    assert many.model_dump(exclude={"summary", "created"}) == single.model_dump(exclude={"summary", "created"})


STAT = {"branch_pages": 0, "leaf_pages": 0, "overflow_pages": 0, "psize": 4096, "entries": 0}


def test_split_halves_a_range_by_count_down_to_one_record(make_env: EnvMaker) -> None:
    path = make_env([(key(i), datum(seed=i)) for i in range(37)])
    source = LmdbSource(path, ScanConfig())
    (shard,) = plan(path, ScanConfig()).shards
    halves = source.split(shard)
    assert [h.spec["count"] for h in halves] == [19, 18]
    assert [h.spec["start"] for h in halves] == [0, 19]
    assert bytes.fromhex(halves[1].spec["first"]) == key(19).encode()
    assert halves[1].spec["prev"] == key(18).encode().hex()
    piece = halves[1]
    while piece.spec["count"] > 1:
        piece = source.split(piece)[0]
    assert source.split(piece) == []
    code, where = source.crash_finding(piece, "the reader process was killed by SIGSEGV")
    assert code == "R004" and (where.key, where.index) == (key(19), 19)
    assert "SIGSEGV" in (where.detail or "") and key(18) in (where.detail or "")
    assert (where.detail or "").startswith("reading this record kills the reader (")
    _, hung = source.crash_finding(piece, stall_reason(120))  # a hang is no crash
    assert (hung.detail or "").startswith("reading this record hangs the reader (the reader made no progress")
    _, many = source.crash_finding(halves[1], stall_reason(120))
    assert f"reading records 19-36 (keys {key(19)} to {key(36)}) hangs the reader" in (many.detail or "")


def test_key_text() -> None:
    assert key_text(b"00000042") == "00000042"
    assert key_text(b"train/cat/001.jpg") == "train/cat/001.jpg"
    assert key_text(b"\x00\x00\x01\xff") == "0x000001ff"
    assert key_text(b"0x12") == "0x30783132"  # text that looks like hex is shown as hex: no ambiguity
    assert key_text(b"\x01" * 500).endswith("(500 bytes)")
    long_path = b"00000042_/mnt/nfs/datasets/imagenet/train/" + b"n01440764/" * 8 + b"n01440764_10042.JPEG"
    assert len(long_path) > 128 and key_text(long_path) == long_path.decode()  # convert_imageset keys: whole


def test_cli_text_report_names_keys(make_env: EnvMaker) -> None:
    path = make_env([(key(i), datum(label=i // 100, seed=i)) for i in range(300)])
    done = dscan(str(path), "-j", "1", "--batch-size", "8", "--fail-on", "warning")
    assert done.returncode == 1, done.stderr
    assert "L005 label-sorted-storage" in done.stdout
    assert "data.mdb[100] key 00000100" in done.stdout


def test_cli_bad_decoder_is_a_usage_error(make_env: EnvMaker) -> None:
    path = make_env([(key(0), datum())])
    done = dscan(str(path), "--decoder", "raw:float32")
    assert done.returncode == 2
    assert "raw:DTYPE:SHAPE" in done.stderr


def test_records_kept_in_named_databases_are_a_clear_usage_error(tmp_path: Path) -> None:
    """An environment whose main database holds only named databases is not read as if its database
    records were bad values: the scan cannot run, and says why and what to do."""
    path = tmp_path / "named"
    with lmdb.open(str(path), max_dbs=2, map_size=1 << 24) as env:
        train = env.open_db(b"train")
        with env.begin(write=True) as txn:
            for i in range(20):
                txn.put(key(i).encode(), datum(label=i % 2, seed=i), db=train)
    done = dscan(str(path), "-j", "1")
    assert done.returncode == 2, done.stdout
    assert "named databases (the first is 'train')" in done.stderr and "R001" not in done.stdout
