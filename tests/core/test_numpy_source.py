""".npy files and .npz archives: findings at exact locations, damaged files as findings, nothing unpickled,
bounded memory; and the kinds of other folders unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scanner_service.sources import detect_kind
from tests.conftest import cli_json, finding, nested_table, run_scan, write_h5

SIZES = [
    pytest.param({}, 0, id="defaults-j0"),
    pytest.param({"shard_bytes": 4096, "block_bytes": 512}, 0, id="small-shards-j0"),
    pytest.param({"shard_bytes": 4096, "block_bytes": 512}, 2, id="small-shards-j2"),
    pytest.param({"shard_bytes": 1, "block_bytes": 64}, 2, id="one-row-shards-j2"),
]


def places(report: Any, code: str) -> list[tuple[str, str | None, int | None]]:
    found = finding(report, code)
    return [] if found is None else [(loc.path, loc.dataset, loc.index) for loc in found.locations]


def json_places(report: dict[str, Any], code: str) -> list[tuple[str, str | None, int | None]]:
    return [
        (loc["path"], loc["dataset"], loc["index"])
        for f in report["findings"]
        if f["code"] == code
        for loc in f["locations"]
    ]


def features(rows: int = 300, cols: int = 6, seed: int = 1) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).normal(size=(rows, cols)).astype(np.float32)


@pytest.fixture
def keras_folder(tmp_path: Path) -> Path:
    """X_train.npy with NaN and Inf at known rows, its labels, and an .npz archive of both kinds."""
    data = tmp_path / "data"
    data.mkdir()
    x = features()
    x[7, 2] = np.nan
    x[250, 0] = np.inf
    x[299, 5] = np.nan
    np.save(data / "X_train.npy", x)
    np.save(data / "y_train.npy", np.arange(300) % 5)
    z = features(200, 4, seed=2)
    z[123, 1] = -np.inf
    np.savez(data / "stored.npz", x=z, y=np.arange(200) % 5)
    np.savez_compressed(data / "deflated.npz", x=z, y=np.arange(200) % 5)
    return data


@pytest.mark.parametrize(("sizes", "workers"), SIZES)
def test_nan_and_inf_rows_are_exact_whatever_the_shards(
    keras_folder: Path, sizes: dict[str, int], workers: int
) -> None:
    report = run_scan(keras_folder, workers=workers, **sizes)
    assert report.source.kind == "numpy"
    assert places(report, "V001") == [("X_train.npy", None, 7), ("X_train.npy", None, 299)]
    assert places(report, "V002") == [
        ("X_train.npy", None, 250),
        ("deflated.npz", "x", 123),
        ("stored.npz", "x", 123),
    ]
    assert finding(report, "L001") is None and finding(report, "S002") is None and finding(report, "S001") is None
    assert report.source.items == 300 * 2 + 200 * 4


def test_the_cli_scans_one_file_and_a_folder(keras_folder: Path) -> None:
    status, report = cli_json(keras_folder / "X_train.npy")
    assert status == 1 and report["source"]["kind"] == "numpy"
    assert json_places(report, "V001") == [("X_train.npy", None, 7), ("X_train.npy", None, 299)]
    status, report = cli_json(keras_folder)
    assert json_places(report, "V002")[1:] == [("deflated.npz", "x", 123), ("stored.npz", "x", 123)]
    junit = subprocess.run(
        [sys.executable, "-m", "scanner_service.cli", "scan", str(keras_folder), "--format", "junit", "-j0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert junit.returncode == 1 and 'classname="dscan.V001"' in junit.stdout
    assert 'classname="dscan.L001"' in junit.stdout and 'classname="dscan.I001"' not in junit.stdout


def test_float16_overflow_and_constant_feature(tmp_path: Path) -> None:
    x = features(100, 4)
    x[42, 1] = 1e6
    x[:, 3] = 0.5
    np.save(tmp_path / "x.npy", x)
    report = run_scan(tmp_path / "x.npy", block_bytes=256)
    assert places(report, "V003") == [("x.npy", None, 42)]
    constant = finding(report, "V004")
    assert [(loc.path, loc.detail) for loc in constant.locations] == [("x.npy", "column 3 is always 0.5")]


def test_constant_feature_of_a_npy_file_names_no_dataset(tmp_path: Path) -> None:
    """A .npy file holds no dataset: constant-feature says so as nan-value does (null in JSON, not "")."""
    x = features(100, 4)
    x[7, 0] = np.nan
    x[:, 3] = 0.5
    np.save(tmp_path / "x.npy", x)
    report = run_scan(tmp_path / "x.npy")
    assert places(report, "V001") == [("x.npy", None, 7)]
    assert places(report, "V004") == [("x.npy", None, None)]


@pytest.mark.parametrize(("sizes", "workers"), SIZES[:3])
def test_labels_beside_the_data(tmp_path: Path, sizes: dict[str, int], workers: int) -> None:
    np.save(tmp_path / "X_train.npy", features(100, 3))
    y = np.arange(100) % 4
    y[[10, 60]] = 9
    np.save(tmp_path / "y_train.npy", y)
    np.save(tmp_path / "X_test.npy", features(40, 3))
    np.save(tmp_path / "y_test.npy", np.zeros(41, np.int64))  # one label too many
    report = run_scan(tmp_path, workers=workers, num_classes=10, **sizes)
    assert places(report, "L002") == []
    assert places(report, "L001") == [("X_test.npy", None, None)]
    assert finding(report, "L001").locations[0].detail == "40 samples but y_test.npy has 41 labels"
    missing = finding(report, "L003")
    assert [(loc.path, loc.dataset, loc.detail) for loc in missing.locations][:3] == [
        ("y_test.npy", None, "class 1"),
        ("y_test.npy", None, "class 2"),
        ("y_test.npy", None, "class 3"),
    ]
    assert ("y_train.npy", None, "class 4") in [(loc.path, loc.dataset, loc.detail) for loc in missing.locations]
    invalid = run_scan(tmp_path, workers=workers, num_classes=5, **sizes)
    assert places(invalid, "L002") == [("y_train.npy", None, 10), ("y_train.npy", None, 60)]


def test_labels_option_names_an_array_and_a_wrong_name_is_an_error(tmp_path: Path) -> None:
    np.save(tmp_path / "feats.npy", features(50, 3))
    np.save(tmp_path / "classes.npy", np.arange(49) % 3)
    assert finding(run_scan(tmp_path), "L001") is None  # 'classes' is no label name: data
    report = run_scan(tmp_path, labels="classes")
    assert places(report, "L001") == [("feats.npy", None, None)]
    from scanner_service.errors import ConfigError

    with pytest.raises(ConfigError, match="no array of that name"):
        run_scan(tmp_path, labels="nothing")


def test_npz_members_stored_and_deflated_with_a_flipped_byte(tmp_path: Path) -> None:
    x = features(400, 8)
    x[333, 4] = np.nan
    for name, save in (("stored.npz", np.savez), ("deflated.npz", np.savez_compressed)):
        save(tmp_path / name, x=x, y=np.arange(400) % 3)
        raw = bytearray((tmp_path / name).read_bytes())
        with zipfile.ZipFile(tmp_path / name) as zf:
            info = zf.getinfo("x.npy")
        # a byte in the middle of the member's data
        at = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2
        raw[at] ^= 0x01
        (tmp_path / "bad").mkdir(exist_ok=True)
        (tmp_path / "bad" / name).write_bytes(bytes(raw))
    report = run_scan(tmp_path / "bad", block_bytes=1024)
    damaged = finding(report, "S002")
    assert sorted((loc.path, loc.dataset) for loc in damaged.locations) == [("deflated.npz", "x"), ("stored.npz", "x")]
    stored = next(loc for loc in damaged.locations if loc.path == "stored.npz")
    assert "CRC-32" in (stored.detail or "")
    assert ("stored.npz", "x", 333) in places(report, "V001")  # the rest of the member was scanned
    assert finding(report, "L001") is None


def test_truncated_npy_names_the_missing_rows_and_the_folder_goes_on(tmp_path: Path) -> None:
    x = features(100, 10)
    x[5, 0] = np.nan
    np.save(tmp_path / "a.npy", x)
    raw = (tmp_path / "a.npy").read_bytes()
    header = len(raw) - x.nbytes
    (tmp_path / "a.npy").write_bytes(raw[: header + 60 * 40 + 17])  # 60 rows and a part of the 61st
    (tmp_path / "b.npy").write_bytes(b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (3,), ")  # header cut
    (tmp_path / "c.npy").write_bytes(b"not numpy at all")
    good = features(20, 2)
    good[11, 1] = np.nan
    np.save(tmp_path / "d.npy", good)
    for workers in (0, 2):
        report = run_scan(tmp_path, workers=workers, shard_bytes=1000, block_bytes=300)
        assert places(report, "S002") == [("a.npy", None, 60)]
        assert finding(report, "S002").locations[0].detail.startswith("rows 60-99 missing: the file ends after")
        assert places(report, "S001") == [("b.npy", None, None), ("c.npy", None, None)]
        assert "damaged header" in finding(report, "S001").locations[0].detail
        assert places(report, "V001") == [("a.npy", None, 5), ("d.npy", None, 11)]


def test_truncated_npz_scans_the_members_before_the_cut(tmp_path: Path) -> None:
    x = features(300, 8)
    x[9, 0] = np.nan
    y = features(300, 8, seed=5)
    y[10, 0] = np.nan
    y[290, 0] = np.nan
    for name, save in (("s.npz", np.savez), ("d.npz", np.savez_compressed)):
        save(tmp_path / name, a=x, b=y)
        raw = (tmp_path / name).read_bytes()
        with zipfile.ZipFile(tmp_path / name) as zf:
            info = zf.getinfo("b.npy")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra)
        (tmp_path / name).write_bytes(raw[: start + info.compress_size // 2])
    report = run_scan(tmp_path, block_bytes=512)
    assert places(report, "S001") == [("d.npz", None, None), ("s.npz", None, None)]
    assert "2 member(s) found by their local headers" in finding(report, "S001").locations[0].detail
    v001 = places(report, "V001")
    assert ("d.npz", "a", 9) in v001 and ("s.npz", "a", 9) in v001 and ("s.npz", "b", 10) in v001
    assert ("s.npz", "b", 290) not in v001
    cut = {loc.path: loc for loc in finding(report, "S002").locations}
    assert set(cut) == {"d.npz", "s.npz"}
    assert cut["s.npz"].dataset == "b" and "the archive ends inside this member" in (cut["s.npz"].detail or "")
    assert cut["s.npz"].index is not None and 140 <= cut["s.npz"].index <= 150


class Trap:
    """Unpickling it creates a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def test_object_arrays_are_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    objects = np.array([Trap(str(marker)), 1], dtype=object)
    np.save(tmp_path / "objects.npy", objects, allow_pickle=True)
    np.savez(tmp_path / "mixed.npz", o=objects, x=np.ones((3, 2), np.float32))
    for workers in (0, 2):
        report = run_scan(tmp_path, workers=workers)
        assert not marker.exists()
        note = report.info["numpy.not_scanned"]
        assert note.startswith("2 array(s) not scanned") and "mixed.npz:o (Python objects" in note
        assert "objects.npy (Python objects, stored as a pickle: not unpickled" in note
    status, _ = cli_json(tmp_path / "objects.npy")
    assert status == 0 and not marker.exists()


@pytest.mark.parametrize("block", [64, 1000, 4 << 20])
def test_fortran_order_arrays(tmp_path: Path, block: int) -> None:
    x = np.asfortranarray(features(200, 7))
    x[123, 6] = np.nan
    x[3, 0] = np.inf
    x[:, 2] = 1.0
    np.save(tmp_path / "f.npy", x)
    cube = np.asfortranarray(np.random.default_rng(3).normal(size=(50, 4, 3)).astype(np.float64))
    cube[44, 3, 2] = np.nan
    np.savez_compressed(tmp_path / "c.npz", cube=cube)
    report = run_scan(tmp_path, block_bytes=block, shard_bytes=2000)
    assert places(report, "V001") == [("c.npz", "cube", 44), ("f.npy", None, 123)]
    assert places(report, "V002") == [("f.npy", None, 3)]
    assert [loc.detail for loc in finding(report, "V004").locations] == ["column 2 is always 1"]
    assert "f.npy" in report.info["numpy.fortran"]
    raw = (tmp_path / "f.npy").read_bytes()
    (tmp_path / "f.npy").write_bytes(raw[: len(raw) - x.nbytes + 5 * 200 * 4 + 10])  # 5 whole columns and a bit
    report = run_scan(tmp_path / "f.npy", block_bytes=block)
    assert places(report, "S002") == [("f.npy", None, None)]
    assert "misses its values from column 5 on" in finding(report, "S002").locations[0].detail
    assert places(report, "V001") == [] and places(report, "V002") == [("f.npy", None, 3)]


def test_structured_arrays_are_tables(tmp_path: Path) -> None:
    table = np.zeros(80, dtype=[("a", "<f4"), ("b", "<f8", (3,)), ("name", "S8"), ("label", "<i8")])
    table["a"] = np.arange(80)
    table["b"] = 1.5 + np.arange(240).reshape(80, 3)
    table["a"][31] = np.nan
    table["b"][77, 2] = np.inf
    table["label"] = np.arange(80) % 3
    np.save(tmp_path / "t.npy", table)
    report = run_scan(tmp_path / "t.npy", block_bytes=100, num_classes=4)
    assert places(report, "V001") == [("t.npy", "['a']", 31)]
    assert places(report, "V002") == [("t.npy", "['b']", 77)]
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 3"]
    assert report.info["numpy.not_scanned"] == "1 array(s) not scanned: t.npy fields ['name'] (bytes)"
    assert sorted(s.dataset for s in report.statistics) == ["['a']", "['b']"]  # the label field is no data


@pytest.mark.parametrize("archive", [False, True], ids=["npy", "npz"])
@pytest.mark.parametrize(("sizes", "workers"), SIZES)
def test_fields_of_nested_tables_are_columns(
    tmp_path: Path, archive: bool, sizes: dict[str, int], workers: int
) -> None:
    """Every numeric leaf of a structured dtype is a column named by its path of fields (``['pos']['y']``),
    scanned as flat fields are, at its exact row; a nested field named like labels is data; text is named."""
    table = nested_table(500, [42, 431], 250)
    if archive:
        np.savez(tmp_path / "t.npz", tab=table)
        path, file, prefix, shown = tmp_path / "t.npz", "t.npz", "tab", "t.npz:tab"
    else:
        np.save(tmp_path / "t.npy", table)
        path, file, prefix, shown = tmp_path / "t.npy", "t.npy", "", "t.npy"
    report = run_scan(path, workers, num_classes=4, **sizes)
    assert places(report, "V001") == [(file, f"{prefix}['pos']['y']", 42), (file, f"{prefix}['pos']['y']", 431)]
    assert places(report, "V002") == [(file, f"{prefix}['meta']['inner']['z']", 499)]
    assert places(report, "V003") == [(file, f"{prefix}['pts']['a']", 250)]
    assert {loc.dataset for loc in finding(report, "V004").locations} == {f"{prefix}['pts']['b']"}
    assert [loc.detail for loc in finding(report, "L003").locations] == ["class 3"]  # the flat label field
    assert finding(report, "L002") is None  # meta['y'] (1000 and more) is no class id: data
    columns = [
        "['meta']['inner']['z']",
        "['meta']['y']",
        "['pos']['x']",
        "['pos']['y']",
        "['pts']['a']",
        "['pts']['b']",
    ]
    assert sorted(s.dataset for s in report.statistics) == [prefix + c for c in columns]
    assert next(s for s in report.statistics if s.dataset.endswith("['pts']['a']")).shape == [500, 3]
    assert report.info["numpy.not_scanned"] == f"1 array(s) not scanned: {shown} fields ['meta']['name'] (bytes)"


def test_a_nan_in_a_nested_field_fails_the_scan_at_its_row(tmp_path: Path) -> None:
    """The case as users meet it: ``a["pos"]["y"][42] = np.nan`` in a saved table, and in a Fortran-order one
    (read column by column)."""
    table = np.zeros(100, [("pos", [("x", "f4"), ("y", "f4")]), ("label", "i8")])
    table["pos"]["y"][42] = np.nan
    np.save(tmp_path / "t.npy", table)
    grid = np.zeros((30, 4), [("pos", [("x", "f4"), ("y", "f4")]), ("w", "f8")])
    grid["pos"]["y"][17, 2] = np.inf
    np.save(tmp_path / "f.npy", np.asfortranarray(grid))
    status, report = cli_json(tmp_path)
    assert status == 1
    assert json_places(report, "V001") == [("t.npy", "['pos']['y']", 42)]
    assert json_places(report, "V002") == [("f.npy", "['pos']['y']", 17)]
    assert "nested" not in json.dumps(report["info"])


def test_zero_d_and_empty_arrays(tmp_path: Path) -> None:
    np.save(tmp_path / "scalar.npy", np.float32(np.nan))
    np.save(tmp_path / "empty.npy", np.zeros((0, 5), np.float32))
    np.savez(tmp_path / "z.npz", none=np.zeros((4, 0)), one=np.array(np.inf))
    np.savez(tmp_path / "nothing.npz")  # no array at all: it passed without a word
    report = run_scan(tmp_path)
    assert places(report, "V001") == [("scalar.npy", None, None)]
    assert places(report, "V002") == [("z.npz", "one", None)]
    assert places(report, "S006") == [("empty.npy", None, None), ("nothing.npz", None, None), ("z.npz", "none", None)]
    alone = run_scan(tmp_path / "nothing.npz")
    assert [(loc.path, loc.detail) for loc in finding(alone, "S006").locations] == [
        ("nothing.npz", "the archive holds no array")
    ]


def test_detection_keeps_other_kinds(tmp_path: Path) -> None:
    from PIL import Image

    images = tmp_path / "images"
    for k in range(4):
        (images / "cat").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((8, 8, 3), k, np.uint8)).save(images / "cat" / f"{k}.png")
    np.save(images / "embeddings.npy", features(4, 2))
    h5 = tmp_path / "h5"
    write_h5(h5 / "a.h5", {"x": features(10, 2)})
    write_h5(h5 / "b.h5", {"x": features(10, 2)})
    np.save(h5 / "mean.npy", features(1, 2))
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    np.save(arrays / "X.npy", features(3000, 8))
    np.save(arrays / "y.npy", np.zeros(3000, np.int64))
    write_h5(arrays / "model.h5", {"w": features(4, 4)})  # a Keras model beside the data
    (arrays / "loss.png").write_bytes((images / "cat" / "0.png").read_bytes())
    plain = tmp_path / "blob"
    np.save(tmp_path / "blob.npy", features(2, 2))
    (tmp_path / "blob.npy").rename(plain)
    (tmp_path / "photo.jpg").write_bytes(b"\x93NUMPY" + bytes(40))
    with (tmp_path / "arch.zip").open("wb") as fh:
        np.savez(fh, x=features(2, 2))
    (tmp_path / "other.zip").write_bytes(b"")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("readme.txt", "hello")
    kinds = {p.name: detect_kind(p) for p in (images, h5, arrays, plain, tmp_path / "photo.jpg", tmp_path / "arch.zip")}
    assert kinds == {
        "images": "images",
        "h5": "hdf5",
        "arrays": "numpy",
        "blob": "numpy",
        "photo.jpg": "image-file",
        "arch.zip": "numpy",
    }
    with pytest.raises(Exception, match="not a dataset"):
        detect_kind(tmp_path / "other.zip")
    report = run_scan(arrays)
    assert report.info["numpy.other_files"] == (
        "1 HDF5 and 1 image file(s) below this folder not scanned (model.h5; loss.png; it was read as a folder of "
        "NumPy arrays): scan them on their own"
    )


MEASURE = """
import re, resource, sys
from pathlib import Path
from scanner_service import ScanConfig, scan
report = scan(Path(sys.argv[1]), ScanConfig(), workers=0)
# VmHWM: this process's own peak (ru_maxrss also keeps the peak of the process that forked it, across exec)
status = Path("/proc/self/status").read_text()
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) * 1024
print(peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, report.source.items)
print(json.dumps([[l.path, l.index] for f in report.findings if f.code == "V001" for l in f.locations]))
""".replace("import re,", "import json, re,")


@pytest.mark.slow
def test_memory_stays_bounded(tmp_path: Path) -> None:
    """A 400 MB .npy is scanned with a peak RSS of a fraction of it (the reader holds one block)."""
    rows, cols = 100_000, 1000  # 400 MB of float32
    stat = os.statvfs(tmp_path)
    if stat.f_bavail * stat.f_frsize < 1 << 30:
        pytest.skip("not enough disk for a 400 MB array")
    path = tmp_path / "big.npy"
    step = 5_000
    with path.open("wb") as fh:  # written in slices: this process never holds the array either
        header = {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)}
        np.lib.format.write_array_header_1_0(fh, header)
        for r in range(0, rows, step):
            block = np.ones((step, cols), np.float32)
            block[:, 0] = np.arange(r, r + step)
            if r <= 98_765 < r + step:
                block[98_765 - r, 500] = np.nan
            fh.write(block.tobytes())
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)], capture_output=True, text=True, check=True, timeout=300
    )
    first, second = out.stdout.splitlines()
    peak, _inherited, items = (int(v) for v in first.split())
    assert items == rows
    assert json.loads(second) == [["big.npy", 98_765]]
    assert peak < 150 << 20, f"peak RSS {peak >> 20} MB for a {path.stat().st_size >> 20} MB file"
