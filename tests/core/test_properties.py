"""Property tests: the report does not depend on chunking, shard size, worker count or merge order."""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

import h5py
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner_service import ScanConfig, build_report, merge, plan, scan_shard
from scanner_service.partial import Partial

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Close(float):
    """A mean or std as float merging keeps it: the order of the sums moves the last digits of float32 data, so
    two are equal within a relative 1e-5. (Rounding both to 3 decimals failed when a value sat on a boundary.)"""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and math.isclose(self, other, rel_tol=1e-5, abs_tol=1e-7)

    __hash__ = float.__hash__


def comparable(report_json: dict) -> dict:
    """The report without timings, and with means and stds compared as float merging keeps them (``Close``)."""
    out = {k: v for k, v in report_json.items() if k not in ("created", "config")}
    out["summary"] = {k: v for k, v in out["summary"].items() if k not in ("duration_s", "shards")}
    for stats in out["statistics"]:
        for key in ("mean", "std"):
            stats[key] = None if stats[key] is None else Close(stats[key])
        stats["channels"] = [
            {k: (Close(v) if isinstance(v, float) and k in ("mean", "std") else v) for k, v in ch.items()}
            for ch in stats["channels"]
        ]
    return out


@st.composite
def datasets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, tuple[int, int] | None]:
    rows = draw(st.integers(1, 300))
    cols = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(rows, cols)).astype(np.float32)
    bad = draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1), st.sampled_from(["nan", "inf"]))))
    for r, c, kind in bad:
        data[r, c] = np.nan if kind == "nan" else np.inf
    labels = rng.integers(0, draw(st.integers(1, 5)), size=rows)
    chunks = draw(st.one_of(st.none(), st.tuples(st.integers(1, rows), st.just(cols))))
    return data, labels, chunks


def write(folder: Path, data: np.ndarray, labels: np.ndarray, chunks: tuple[int, int] | None) -> Path:
    path = folder / "p.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", data=data, chunks=chunks)
        fh.create_dataset("label", data=labels, chunks=(max(1, len(labels) // 3),))
    return path


def report_for(path: Path, config: ScanConfig, shuffle_seed: int | None = None) -> dict:
    planned = plan(path, config)
    partials: list[Partial] = [planned.partial] + [
        scan_shard(planned.source.kind, planned.source.path, shard, config) for shard in planned.shards
    ]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(partials)
        # merge in a random tree shape, not just left to right
        while len(partials) > 1:
            i = random.Random(shuffle_seed + len(partials)).randrange(len(partials) - 1)
            partials[i : i + 2] = [merge(partials[i : i + 2])]
    merged = merge(partials)
    return comparable(build_report(planned.source, merged, config, 0.0).model_dump(mode="json"))


@SETTINGS
@given(datasets(), st.integers(1, 600), st.integers(0, 1000))
def test_report_independent_of_shard_size_and_merge_order(case, shard_rows: int, order: int) -> None:
    data, labels, chunks = case
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), data, labels, chunks)
        base = ScanConfig(batch_size=4, num_classes=5, max_locations=1000)
        whole = report_for(path, base)
        small = base.model_copy(update={"shard_bytes": shard_rows * 4, "block_bytes": max(1, shard_rows)})
        assert report_for(path, small, shuffle_seed=order) == whole
        shards = len(plan(path, small).shards)
        assert shards >= min(len(data), -(-len(data) // max(1, (chunks or (1,))[0]))) // max(1, shard_rows), shards
    nan_rows = sorted({int(r) for r in np.flatnonzero(np.isnan(data).any(axis=1))})
    found = next((f for f in whole["findings"] if f["code"] == "V001"), None)
    assert (found["locations"] if found else []) == [
        {"path": "p.h5", "dataset": "/x", "index": r, "key": None, "line": None, "chunk": None, "detail": d}
        for r, d in (
            (r, f"{int(np.isnan(data[r]).sum())} NaN value{'s' if np.isnan(data[r]).sum() > 1 else ''}")
            for r in nan_rows
        )
    ]


@SETTINGS
@given(st.integers(1, 400), st.integers(1, 8), st.integers(0, 2**16))
def test_clean_arrays_yield_no_value_finding(rows: int, cols: int, seed: int) -> None:
    data = np.random.default_rng(seed).uniform(-1e4, 1e4, size=(rows, cols)).astype(np.float32)
    data[0] += 1.0  # no column is constant
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.h5"
        with h5py.File(path, "w") as fh:
            fh.create_dataset("x", data=data)
        report = report_for(path, ScanConfig())
    assert [f["code"] for f in report["findings"] if f["code"].startswith("V")] == [] or rows == 1


@SETTINGS
@given(st.lists(st.integers(0, 3), min_size=1, max_size=400), st.integers(1, 64), st.integers(0, 1000))
def test_label_runs_merge_in_any_order(labels: list[int], block: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.h5"
        with h5py.File(path, "w") as fh:
            fh.create_dataset("label", data=np.array(labels, np.int64), chunks=(min(block, len(labels)),))
        config = ScanConfig(batch_size=2, sorted_run_batches=2, max_locations=1000)
        whole = report_for(path, config)
        pieces = report_for(path, config.model_copy(update={"shard_bytes": block * 8, "block_bytes": block * 8}), seed)
    assert pieces == whole
    runs, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            if i - start > 4 and len(set(labels)) > 1:
                runs.append((start, i - start))
            start = i
    found = next((f for f in whole["findings"] if f["code"] == "L005"), None)
    assert (
        sorted((loc["index"], int(loc["detail"].split()[0])) for loc in (found["locations"] if found else [])) == runs
    )


def test_worker_count_does_not_change_the_report(tmp_path: Path) -> None:
    from scanner_service import scan
    from scanner_service.demo import build_demo

    root = build_demo(tmp_path)
    config = ScanConfig(num_classes=10, batch_size=32, shard_bytes=1 << 15, max_locations=50)
    reports = [comparable(scan(root, config, workers=n).model_dump(mode="json")) for n in (0, 1, 2)]
    assert reports[0] == reports[1] == reports[2]
    assert {f["code"] for f in reports[0]["findings"]} >= {"V001", "V002", "S001", "S002", "L001", "L003"}


def _statistics(path: Path, config: ScanConfig) -> tuple[int, list[dict]]:
    planned = plan(path, config)
    partials = [planned.partial] + [scan_shard(planned.source.kind, str(path), s, config) for s in planned.shards]
    report = build_report(planned.source, merge(partials), config, 0.0).model_dump(mode="json")
    return len(planned.shards), report["statistics"]


def test_statistics_are_the_same_whatever_the_shard_size(tmp_path: Path) -> None:
    """Shards of whole blocks: each block of float32 values is summed over the same rows however the dataset is
    sharded, so the means and deviations are exactly the same (they moved in their seventh digit), for
    HDF5 datasets (contiguous and chunked) and NumPy files alike."""
    rng = np.random.default_rng(7)
    data = (rng.standard_normal((20_000, 64)) * 3 + 1).astype(np.float32)  # rows of 256 bytes, 5 MB
    h5 = tmp_path / "t.h5"
    with h5py.File(h5, "w") as fh:
        fh.create_dataset("flat", data=data)
        fh.create_dataset("chunked", data=data, chunks=(10, 64))
    npy = tmp_path / "t.npy"
    np.save(npy, data)
    block = 64 * 256  # 64 rows a block (60 of the chunked dataset: whole chunks)
    for path in (h5, npy):
        found = [
            _statistics(path, ScanConfig(block_bytes=block, shard_bytes=rows * 256))
            for rows in (20_000, 9_000, 5_000, 1_000)
        ]
        counts = [shards for shards, _ in found]
        assert counts == sorted(set(counts)), (path, counts)  # ever more shards
        assert all(stats == found[0][1] for _, stats in found[1:]), path
    assert len(found[0][1]) == 1 and found[0][1][0]["mean"] != 0
