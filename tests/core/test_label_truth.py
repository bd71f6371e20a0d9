"""Label findings against the truth computed independently: exact hypergeometric probabilities in integers,
class counts and runs of the generated labels."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner_service.labels import absent_exceeds, absent_probability, smallest_batch
from tests.conftest import finding, run_scan, write_h5


def exact_absent(total: int, in_class: int, batch: int) -> Fraction:
    """C(N - n, B) / C(N, B) as a fraction, from min(n, B) ratios of whole numbers."""
    if batch > total - in_class:
        return Fraction(0)
    k = min(in_class, batch)
    return Fraction(
        math.prod(range(total - in_class - batch + 1, total - in_class - batch + k + 1)),
        math.prod(range(total - k + 1, total + 1)),
    )


def test_a_class_exactly_at_the_threshold_in_millions_of_samples_is_not_reported(tmp_path: Path) -> None:
    """One sample of class 1 in 2**21, batches of N - 1: P(absent) = 1/N = 2**-21 exactly, the threshold. In
    log-gamma the probability came out above it (its error grows with log(N!)): a false L004 naming a batch
    size of N, where N - 1 already reaches the threshold."""
    total = 2**21
    labels = np.zeros(total, np.uint8)
    labels[total // 2] = 1
    path = write_h5(tmp_path / "big.h5", {"label": (labels, {"compression": "gzip"})})
    report = run_scan(path, workers=1, batch_size=total - 1, batch_absence_threshold=2.0**-21)
    assert exact_absent(total, 1, total - 1) == Fraction(2.0**-21)
    assert finding(report, "L004") is None
    row = next(r for r in report.labels[0].histogram if r.label == 1)
    assert row.min_batch_size == total - 1
    assert row.p_absent is not None and math.isclose(row.p_absent, 2.0**-21, rel_tol=1e-6)


@settings(max_examples=150, deadline=None)
@given(
    total=st.integers(10**5, 10**12),
    in_class=st.integers(1, 300),
    threshold=st.sampled_from([0.5, 0.05, 0.01, 1e-3, 1e-6]),
)
def test_smallest_batch_is_exact_for_large_datasets(total: int, in_class: int, threshold: float) -> None:
    """The batch size named in the detail is the smallest whose exact P(absent) is at most the threshold."""
    need = smallest_batch(total, in_class, threshold)
    limit = Fraction(repr(threshold))
    assert need is not None
    assert exact_absent(total, in_class, need) <= limit
    assert need == 1 or exact_absent(total, in_class, need - 1) > limit
    for batch in (need - 1, need, need + 1):
        if batch >= 1:
            assert absent_exceeds(total, in_class, batch, threshold) == (exact_absent(total, in_class, batch) > limit)
            p = exact_absent(total, in_class, batch)
            if p:
                assert abs(absent_probability(total, in_class, batch) / float(p) - 1) < 1e-12


def test_probability_of_absence_matches_the_hypergeometric_truth(tmp_path: Path) -> None:
    """Counts, P(absent) and the smallest batch size of every class, against exact fractions."""
    rng = np.random.default_rng(17)
    labels = rng.choice(6, size=5000, p=[0.6, 0.3, 0.07, 0.02, 0.008, 0.002]).astype(np.int64)
    path = write_h5(tmp_path / "d.h5", {"x": rng.normal(size=(5000, 2)).astype(np.float32), "y": labels})
    report = run_scan(path, workers=1, batch_size=64, num_classes=7)
    counts = Counter(labels.tolist())
    rows = {r.label: r for r in report.labels[0].histogram}
    limit = Fraction(1, 100)
    for label, n in counts.items():
        truth = exact_absent(5000, n, 64)
        assert rows[label].count == n
        assert rows[label].p_absent is not None and math.isclose(rows[label].p_absent, float(truth), rel_tol=1e-6)
        need = rows[label].min_batch_size
        assert need is not None and exact_absent(5000, n, need) <= limit < exact_absent(5000, n, need - 1)
    flagged = [loc.detail.split(":")[0] for loc in finding(report, "L004").locations]
    assert flagged == [f"class {c}" for c in sorted(counts) if exact_absent(5000, counts[c], 64) > limit]
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 6"]


def test_whole_negative_regression_targets_are_no_invalid_labels(tmp_path: Path) -> None:
    """A float ``y`` of regression targets (mostly fractional: class checks skipped) that happens to hold -3.0
    and -1.0: fractional targets were left alone, but the whole negative ones were `negative label` errors."""
    rng = np.random.default_rng(3)
    targets = rng.normal(size=400)
    targets[[5, 9]] = [-3.0, -1.0]
    path = write_h5(tmp_path / "r.h5", {"x": rng.normal(size=(400, 2)), "y": targets})
    for block_bytes in (1 << 20, 64):
        report = run_scan(path, workers=2, block_bytes=block_bytes, shard_bytes=512)
        assert report.labels[0].kind == "continuous"
        assert finding(report, "L002") is None
    # with a class count they are class ids, and the same values are invalid
    found = finding(run_scan(path, workers=1, num_classes=3), "L002")
    details = {loc.index: loc.detail for loc in found.locations}
    assert details[5] == "negative label -3" and details[9] == "negative label -1"
    assert found.count == 400  # every other target is fractional


def test_nan_and_inf_regression_targets_are_nan_value_and_inf_value(tmp_path: Path) -> None:
    """A NaN or infinite regression target makes the loss NaN as a NaN feature does: nan-value and inf-value at
    its row (label-invalid is for class ids); with a class count the same values are labels, and invalid."""
    rng = np.random.default_rng(4)
    targets = rng.normal(size=100)
    targets[7], targets[40] = np.nan, -np.inf
    path = write_h5(tmp_path / "r.h5", {"y": targets})
    for workers, block_bytes in ((1, 1 << 20), (2, 64)):
        report = run_scan(path, workers=workers, block_bytes=block_bytes, shard_bytes=512)
        assert report.labels[0].kind == "continuous" and finding(report, "L002") is None
        nan, inf = finding(report, "V001"), finding(report, "V002")
        assert [(loc.index, loc.detail) for loc in nan.locations] == [(7, "regression target is NaN")]
        assert [(loc.index, loc.detail) for loc in inf.locations] == [(40, "regression target is -Inf")]
    classes = finding(run_scan(path, workers=1, num_classes=3, max_locations=1000), "L002")
    assert {7: "label is NaN", 40: "label is -Inf"}.items() <= {
        loc.index: loc.detail for loc in classes.locations
    }.items()


def test_huge_whole_float_labels_are_not_called_fractional(tmp_path: Path) -> None:
    labels = (np.arange(100) % 3).astype(np.float64)
    labels[[2, 3]] = [2.0**53, 2.0**63]
    report = run_scan(write_h5(tmp_path / "h.h5", {"label": labels}), workers=1)
    too_large = "too large for a class id (floats hold every whole number only up to 2**53)"
    assert [(loc.index, loc.detail) for loc in finding(report, "L002").locations] == [
        (2, f"label 9007199254740992 {too_large}"),
        (3, f"label 9223372036854775808 {too_large}"),
    ]


def test_the_detail_tells_the_probability_from_the_threshold(tmp_path: Path) -> None:
    """P(absent) = 1.0046% against 1% read "1.00%; ... brings it under 1.00%"; a threshold of 1e-5 "0.00%"."""
    labels = np.r_[np.zeros(19, np.int64), np.ones(88, np.int64)]
    np.random.default_rng(0).shuffle(labels)
    path = write_h5(tmp_path / "t.h5", {"label": labels})
    p = float(exact_absent(107, 19, 21))
    assert 0.01 < p < 0.01005
    (loc,) = finding(run_scan(path, workers=1, batch_size=21), "L004").locations
    assert loc.detail == "class 0: 19 of 107 samples, P(absent from 21) = 1.005%; a batch of 22 brings it under 1.00%"
    labels = np.zeros(1000, np.int64)
    labels[:3] = 1
    path = write_h5(tmp_path / "s.h5", {"label": labels})
    report = run_scan(path, workers=1, batch_size=300, batch_absence_threshold=1e-5)
    (loc,) = finding(report, "L004").locations
    assert loc.detail.endswith("P(absent from 300) = 34.26%; a batch of 978 brings it under 0.001%")


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    block=st.integers(1, 200),
    batch=st.integers(1, 20),
)
def test_runs_and_counts_do_not_depend_on_blocks_or_workers(
    tmp_path_factory: pytest.TempPathFactory, seed: int, block: int, batch: int
) -> None:
    """Labels sorted in blocks of random length: the runs longer than 4 batches, exactly, at their start."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(rng.integers(0, 3, 2000 // block + 1), block)[:2000].astype(np.int32)
    path = write_h5(tmp_path_factory.mktemp("runs") / "r.h5", {"label": labels})
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    lengths = np.diff(np.r_[starts, labels.size])
    threshold = 4 * batch
    truth = [(int(s), int(n)) for s, n in zip(starts, lengths, strict=True) if n > threshold]
    shown = sorted(sorted(truth, key=lambda r: (-r[1], r[0]))[:20])  # the 20 longest are listed
    for workers, block_bytes in ((1, 4 << 20), (2, 52)):
        report = run_scan(path, workers=workers, batch_size=batch, block_bytes=block_bytes, shard_bytes=400)
        found = finding(report, "L005")
        got = sorted((loc.index, int(loc.detail.split()[0])) for loc in found.locations) if found else []
        assert got == shown
        assert (found.count if found else 0) == len(truth)
        histogram = report.labels[0].histogram  # (a class below the largest that no block drew: missing, 0)
        assert {r.label: r.count for r in histogram if r.count} == dict(Counter(labels.tolist()))
        assert all(r.missing for r in histogram if not r.count)


@pytest.mark.parametrize("rows", [30, 300_000], ids=["small", "large"])
def test_an_hdf5_enum_label_type_names_the_classes_and_their_count(tmp_path: Path, rows: int) -> None:
    """``h5py.enum_dtype({"cat": 0, "dog": 1, "bird": 2})``: the type declares 3 classes, so a class no sample
    has is missing without --num-classes, and the report names the classes; an enum of other values names none."""
    import h5py

    path = tmp_path / "enum.h5"
    with h5py.File(path, "w") as fh:
        fh["data"] = np.random.default_rng(0).random((rows, 2), dtype=np.float32)
        kind = h5py.enum_dtype({"cat": 0, "dog": 1, "bird": 2}, basetype="i1")
        fh.create_dataset("label", data=(np.arange(rows) % 2).astype("i1"), dtype=kind)
    report = run_scan(path)
    missing = finding(report, "L003")
    assert missing is not None and missing.locations[0].detail == "class 2 (bird)"
    assert [(row.label, row.name) for row in report.labels[0].histogram] == [(0, "cat"), (1, "dog"), (2, "bird")]
    assert report.labels[0].num_classes == 3
    sparse = tmp_path / "sparse.h5"
    with h5py.File(sparse, "w") as fh:
        fh["data"] = np.random.default_rng(0).random((30, 2), dtype=np.float32)
        kind = h5py.enum_dtype({"low": 10, "high": 20}, basetype="i1")
        fh.create_dataset("label", data=np.where(np.arange(30) % 2, 10, 20).astype("i1"), dtype=kind)
    assert finding(run_scan(sparse), "L003") is None
