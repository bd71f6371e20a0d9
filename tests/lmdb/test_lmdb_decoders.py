"""Each value decoder on generated LMDB environments: Datum (raw, float_data, encoded), image, npy, raw, pickle."""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from scanner_service import ScanConfig, plan
from scanner_service.errors import ConfigError
from scanner_service.records import parse_decoder
from scanner_service.records.detect import detect, sniff
from scanner_service.records.npy import NpyPickled, read_header
from scanner_service.records.pickles import pickle_protocol
from tests.conftest import codes, finding, run_scan
from tests.lmdb.conftest import datum, jpeg, key, npy, pickled

EnvMaker = Callable[..., Path]


def keys_of(report: object, code: str) -> list[str | None]:
    found = finding(report, code)  # type: ignore[arg-type]
    assert found is not None, f"no {code} finding"
    return [loc.key for loc in found.locations]


def test_clean_raw_datums_pass_with_labels_counted(datum_env: Callable[..., Path]) -> None:
    report = run_scan(datum_env(n=300, classes=5))
    assert report.summary.passed and report.summary.errors == report.summary.warnings == 0
    assert report.summary.items_scanned == 300
    assert report.source.kind == "lmdb"
    (labels,) = report.labels
    assert labels.total == 300 and labels.distinct == 5
    assert {row.label: row.count for row in labels.histogram} == dict.fromkeys(range(5), 60)
    assert report.info["lmdb.decoder"].startswith("datum (detected")
    assert "upb" in report.info["lmdb.datum_parser"] or "protobuf" in report.info["lmdb.datum_parser"]


def test_float_data_nan_inf_and_float16_overflow_at_their_keys(make_env: EnvMaker) -> None:
    rng = np.random.default_rng(0)
    records = []
    for i in range(400):
        values = rng.standard_normal((2, 4, 4)).astype(np.float32)
        if i == 17:
            values[1, 2, 3] = np.nan
        if i == 230:
            values[0, 0, 0] = -np.inf
        if i == 311:
            values[1, 1, 1] = 1e6
        records.append((key(i), datum(shape=(2, 4, 4), floats=values, label=i % 4)))
    report = run_scan(make_env(records))
    assert keys_of(report, "V001") == [key(17)]
    assert keys_of(report, "V002") == [key(230)]
    assert keys_of(report, "V003") == [key(311)]
    assert finding(report, "V001").locations[0].index == 17
    (stats,) = report.statistics
    assert stats.dataset == "float_data" and stats.shape == [400, 2, 4, 4]
    assert stats.count == 400 * 32 - 2 and stats.nan == 1 and stats.inf == 1
    assert report.labels[0].total == 400


def test_float_data_with_large_labels_and_no_labels(make_env: EnvMaker) -> None:
    """Labels of two varint bytes, three bytes, and records without a label all read right: a Datum without
    a label field is label 0, as Caffe reads it (proto3 writers leave a 0 label out)."""
    records = []
    for i in range(300):
        values = np.full((1, 2, 2), i, np.float32)
        if i == 200:
            values[0, 0, 1] = np.nan
        label = None if i >= 250 else (i * 1000 if i % 2 else i * 100)
        records.append((key(i), datum(shape=(1, 2, 2), floats=values, label=label)))
    report = run_scan(make_env(records), max_locations=50)
    assert keys_of(report, "V001") == [key(200)]
    (labels,) = report.labels
    assert labels.total == 300
    assert labels.histogram[-1].label == 249 * 1000
    assert (labels.histogram[0].label, labels.histogram[0].count) == (0, 51)  # record 0 and the 50 without


def test_encoded_datums_become_images_judged_by_the_image_checks(make_env: EnvMaker) -> None:
    records = [(key(i), datum(shape=(3, 40, 48), data=jpeg(i), encoded=True, label=i % 2)) for i in range(30)]
    records[7] = (key(7), datum(shape=(3, 40, 48), data=jpeg(7)[:900], encoded=True, label=1))
    report = run_scan(make_env(records))
    assert keys_of(report, "I003") == [key(7)]
    assert report.summary.items_scanned == 30
    assert report.labels[0].total == 30


def test_image_values_detected_and_judged_with_keys(make_env: EnvMaker) -> None:
    records = [(key(i), jpeg(i)) for i in range(24)]
    records[5] = (key(5), jpeg(5)[:700])
    records[9] = (key(9), b"this is not an image at all, just text")
    report = run_scan(make_env(records))
    assert report.info["lmdb.decoder"].startswith("image")
    assert keys_of(report, "I003") == [key(5)]
    assert keys_of(report, "I002") == [key(9)]
    assert report.summary.items_scanned == 24


def test_npy_values(make_env: EnvMaker) -> None:
    records = [(key(i), npy(np.full((3, 5), i, np.float32))) for i in range(60)]
    bad = np.full((3, 5), 1, np.float32)
    bad[2, 4] = np.nan
    records[4] = (key(4), npy(bad))
    records[8] = (key(8), npy(np.asfortranarray(np.arange(15, dtype=np.float64).reshape(3, 5))))
    fortran_nan = np.asfortranarray(np.zeros((3, 5), np.float64))
    fortran_nan[0, 1] = np.inf
    records[9] = (key(9), npy(fortran_nan))
    records[20] = (key(20), npy(np.ones((4, 4), np.float32)))
    records[30] = (key(30), npy(np.ones((3, 5), np.float32))[:-12])
    records[40] = (key(40), b"\x93NUMPY\x01\x00" + (20).to_bytes(2, "little") + b"{'descr': 'nonsense'}")
    out = io.BytesIO()
    np.save(out, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    records[50] = (key(50), out.getvalue())
    report = run_scan(make_env(records))
    assert report.info["lmdb.decoder"].startswith("npy")
    assert keys_of(report, "V001") == [key(4)]
    assert keys_of(report, "V002") == [key(9)]
    assert keys_of(report, "R003") == [key(20)]
    assert keys_of(report, "R002") == [key(30)]
    assert keys_of(report, "R001") == [key(40)]
    assert keys_of(report, "R005") == [key(50)]
    assert report.summary.items_scanned == 60


def test_npy_values_of_one_shape_and_several_dtypes(make_env: EnvMaker, rng: np.random.Generator) -> None:
    """float32 arrays with a few saved as float64 (a missing ``astype``): each dtype's rows have their own
    buffer (sharing one, they overwrote each other: a NaN lost, false findings on clean keys)."""
    records = []
    for i in range(60):
        a = rng.normal(size=(5, 6)).astype(np.float32)
        if i % 10 == 5:
            a = a.astype(np.float64)
        if i in (1, 23):
            a[1, 1] = np.nan
        records.append((key(i), npy(a)))
    report = run_scan(make_env(records))
    assert keys_of(report, "V001") == [key(1), key(23)]
    assert codes(report) == {"V001"}


def test_npy_header_parser_never_unpickles() -> None:
    out = io.BytesIO()
    np.save(out, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(NpyPickled):
        read_header(out.getvalue())
    header = read_header(npy(np.zeros((2, 3), "<f2")))
    assert header.shape == (2, 3) and header.dtype == np.dtype("<f2") and header.nbytes == 12


def test_image_checks_alone_run_nothing_on_records_that_hold_no_image(make_env: EnvMaker, tmp_path: Path) -> None:
    """``--select I`` on an LMDB of raw float32 tensors passed (exit status 0) with a NaN in it: the image
    checks apply to LMDBs, but these records hold no image, so no check ran and the pass said nothing."""
    records = [(key(i), np.full(12, i, np.float32).tobytes()) for i in range(20)]
    records[9] = (key(9), np.array([np.nan] * 12, np.float32).tobytes())
    raw = make_env(records)
    report = run_scan(raw, decoder="raw:float32:3x4", select=["I"])
    assert report.summary.passed and report.checks_run() == frozenset()
    assert "nothing to check in this lmdb dataset: its records hold no image (I)" in report.no_check_reason()
    assert "V001" in run_scan(raw, decoder="raw:float32:3x4", select=["I", "V"]).checks_run()
    images = make_env([(key(i), datum(encoded=True, data=jpeg(i), label=0)) for i in range(5)], name="enc_lmdb")
    assert "I003" in run_scan(images, select=["I"]).checks_run()


def test_a_labels_option_is_named_unused_on_an_lmdb(datum_env: EnvMaker) -> None:
    report = run_scan(datum_env(n=20), labels="y")
    assert report.info["labels.option"].startswith("labels 'y' not used: an LMDB's labels are in its records")
    assert report.labels and report.labels[0].total == 20


def test_raw_decoder(make_env: EnvMaker) -> None:
    records = [(key(i), np.full(12, i, np.float32).tobytes()) for i in range(50)]
    records[3] = (key(3), np.array([0.0] * 11 + [np.nan], np.float32).tobytes())
    records[6] = (key(6), b"\x00" * 10)
    report = run_scan(make_env(records), decoder="raw:float32:3x4")
    assert keys_of(report, "V001") == [key(3)]
    assert keys_of(report, "R002") == [key(6)]
    assert "needs 48" in (finding(report, "R002").locations[0].detail or "")
    assert report.statistics[0].shape == [49, 3, 4]  # the records of that shape: not the one of 10 bytes
    assert report.info["lmdb.decoder"] == "raw:float32:3x4 (--decoder)"


@pytest.mark.parametrize(
    "spec",
    ["raw", "raw:float32", "raw:complex64:3", "raw:float32:0x3", "raw:nosuch:3", "raw:int8:3xa", "jpeg", "pickle"],
)
def test_bad_decoder_specs_are_usage_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_decoder(spec)


def test_pickled_database_is_reported_not_unpickled(make_env: EnvMaker) -> None:
    path = make_env([(key(i), pickled((b"\xff\xd8 image bytes", np.int64(i)))) for i in range(40)])  # a global
    report = run_scan(path)
    assert codes(report) == {"R005"}
    r005 = finding(report, "R005")
    assert r005.count == 40 and r005.severity.value == "warning"
    assert "loads only pickles of plain data" in (r005.locations[0].detail or "")
    assert report.summary.items_scanned == 0
    assert report.summary.passed  # a warning: unchecked, not broken
    assert not run_scan(path, fail_on="warning").summary.passed


def test_pickled_record_among_datums_is_no_datum(datum_env: Callable[..., Path]) -> None:
    """Caffe's Data layer (or any Datum loader) fails on a pickle among the Datums: record-invalid, an error. It
    was a pickled-records warning, "not scanned", and the database passed (exit status 0)."""
    report = run_scan(datum_env(n=100, extra={key(42): pickled({"x": 1}, protocol=2), key(43): pickled(1, 0)}))
    assert keys_of(report, "R001") == [key(42), key(43)]
    assert finding(report, "R005") is None
    assert (finding(report, "R001").locations[0].detail or "").startswith(
        "not a Datum protobuf: a pickled Python object (pickle protocol 2)"
    )
    assert not report.summary.passed


def test_sniffing_and_detection() -> None:
    assert sniff(datum()) == "datum"
    assert sniff(datum(floats=np.zeros(192))) == "datum"
    assert sniff(jpeg()) == "image"
    assert sniff(npy(np.zeros(3))) == "npy"
    assert sniff(pickle.dumps([1, 2], protocol=5)) == "pickle"
    assert sniff(pickle.dumps({"a": 1}, protocol=0)) == "pickle"
    assert sniff(b"plain text value.") is None
    assert sniff(b"") is None
    assert all(pickle_protocol(pickle.dumps(3.5, protocol=p)) is not None for p in range(6))
    found = detect([datum()] * 5 + [b"junk"] * 2)
    assert found.decoder is not None and found.decoder.name == "datum" and found.votes == {"datum": 5}
    assert detect([b"junk"] * 3).decoder is None


def test_unknown_values_are_one_finding_with_a_hint(make_env: EnvMaker) -> None:
    report = run_scan(make_env([(key(i), b"opaque-%d" % i) for i in range(30)]))
    r001 = finding(report, "R001")
    assert r001.count == 30 and "--decoder" in (r001.locations[0].detail or "")
    assert report.summary.items_scanned == 0


def test_decoder_flag_overrides_detection(datum_env: Callable[..., Path]) -> None:
    report = run_scan(datum_env(n=20), decoder="npy")
    assert finding(report, "R001").count == 20
    assert report.info["lmdb.decoder"] == "npy (--decoder)"


def _value_kinds() -> dict[str, tuple[list[bytes], dict[str, object]]]:
    rng = np.random.default_rng(3)
    floats = [datum(shape=(2, 2, 2), floats=rng.normal(size=8), label=i % 3) for i in range(300)]
    floats[7] = datum(shape=(2, 2, 2), floats=rng.normal(size=5), label=1)  # a wrong float count
    raw = [datum(seed=i, label=i % 3) for i in range(300)]
    raw[9] = b"\x08\x03\x10\x08"  # cut short
    return {
        "float_data": (floats, {}),
        "raw datum": (raw, {}),
        "encoded": ([datum(shape=(3, 40, 48), data=jpeg(i), encoded=True, label=i % 2) for i in range(40)], {}),
        "npy": ([npy(rng.normal(size=(3, 4)).astype("f4")) for _ in range(200)], {}),
        "raw decoder": (
            [rng.normal(size=16).astype("f4").tobytes() for _ in range(200)],
            {"decoder": "raw:float32:4x4"},
        ),
        "images": ([jpeg(i) for i in range(30)], {}),
    }


@pytest.mark.parametrize("kind", list(_value_kinds()))
def test_bytes_scanned_are_the_values_bytes_each_counted_once(make_env: EnvMaker, kind: str) -> None:
    """Progress and ``bytes_scanned`` count what was read from the file: each value's bytes, once (decoded
    floats and labels are not bytes of the file)."""
    values, options = _value_kinds()[kind]
    report = run_scan(make_env([(key(i), v) for i, v in enumerate(values)]), shard_bytes=1 << 14, **options)
    assert report.summary.bytes_scanned == sum(len(v) for v in values)
    assert report.summary.items_scanned == len(values)


@pytest.mark.parametrize("block_bytes", [4096, 1 << 16, 4 << 20])
def test_records_as_large_as_a_block_read_alike_for_any_block_size(make_env: EnvMaker, block_bytes: int) -> None:
    """Raw and npy records of 12 KB fill a block every record or two at small block sizes: the findings and
    the bytes read are the same whatever the block size."""
    rng = np.random.default_rng(5)
    rows = [rng.normal(size=(3, 32, 32)).astype("f4") for _ in range(40)]
    rows[5][0, 1, 2] = np.nan
    rows[33][2, 0, 0] = np.inf
    raw = run_scan(
        make_env([(key(i), r.tobytes()) for i, r in enumerate(rows)]),
        decoder="raw:float32:3x32x32",
        block_bytes=block_bytes,
    )
    as_npy = run_scan(make_env([(key(i), npy(r)) for i, r in enumerate(rows)]), block_bytes=block_bytes)
    for report in (raw, as_npy):
        assert keys_of(report, "V001") == [key(5)] and keys_of(report, "V002") == [key(33)]
        assert "R004" not in codes(report)
        assert report.summary.items_scanned == 40
    assert raw.summary.bytes_scanned == 40 * 3 * 32 * 32 * 4


def test_records_writers_keep_beside_the_samples_are_no_findings(make_env: EnvMaker) -> None:
    """ImageNet-LMDB scripts add ``__len__`` and a pickled ``__keys__``; clovaai's text-recognition datasets
    hold ``label-N`` texts and ``num-samples`` beside ``image-N``: none of them is a sample. A damaged image
    is still found, and an image stored under such a key is judged as one."""
    keys = [key(i) for i in range(30)]
    records = [(k, jpeg(i)) for i, k in enumerate(keys)]
    records[7] = (keys[7], jpeg(7)[:300])
    records += [("__keys__", pickled([k.encode() for k in keys])), ("__len__", b"30"), ("length", jpeg(99)[:200])]
    report = run_scan(make_env(records))
    assert keys_of(report, "I003") == [key(7), "length"]  # a truncated JPEG under a bookkeeping name: a sample
    assert codes(report) == {"I003"}
    assert report.info["lmdb.bookkeeping __len__"].startswith("the writer's own record")
    assert "lmdb.bookkeeping __keys__" in report.info
    text = [(f"image-{i:09d}", jpeg(i)) for i in range(1, 21)] + [(f"label-{i:09d}", b"hello") for i in range(1, 21)]
    text += [("num-samples", b"20")]
    clovaai = run_scan(make_env(text, name="clovaai"))
    assert codes(clovaai) == set()
    assert clovaai.summary.items_scanned == 41
    assert clovaai.info["lmdb.text_records"].endswith("not images, not scanned")
    datums = [(key(i), datum(data=jpeg(i), encoded=True, label=i % 3)) for i in range(20)] + [("__len__", b"20")]
    assert codes(run_scan(make_env(datums, name="datums"))) == set()
    floats = [(key(i), np.arange(i, i + 6, dtype=np.float32).tobytes()) for i in range(30)] + records[-3:-1]
    raw = run_scan(make_env(floats, name="raw"), decoder="raw:float32:2x3")  # was R002 for __len__'s 2 bytes
    assert codes(raw) == set() and "lmdb.bookkeeping __len__" in raw.info


def test_msgpack_records_are_decoded_and_their_images_and_labels_checked(make_env: EnvMaker) -> None:
    """``msgpack.packb({"img": jpeg, "label": 3})`` (or a list): data only, so decoded; the image inside is
    judged, the label checked. A healthy database passes (it was one record-invalid error for every record)."""
    import msgpack

    records = [(key(i), msgpack.packb({"img": jpeg(i), "label": i % 4})) for i in range(40)]
    records[5] = (key(5), msgpack.packb({"img": jpeg(5)[:250], "label": 1}))
    records[9] = (key(9), msgpack.packb([jpeg(9), 7]))
    records[12] = (key(12), msgpack.packb({"text": "no image here", "label": 2}))
    report = run_scan(make_env(records), num_classes=4)
    assert report.info["lmdb.decoder"].startswith("msgpack")
    assert keys_of(report, "I003") == [key(5)]
    assert keys_of(report, "L002") == [key(9)]
    assert keys_of(report, "R001") == [key(12)]
    assert "msgpack record without an encoded image" in finding(report, "R001").locations[0].detail
    (labels,) = report.labels
    assert labels.total == 39 and [row.count for row in labels.histogram][:4] == [9, 9, 10, 10]
    healthy = [(key(i), msgpack.packb({"image": jpeg(i), "target": i % 2})) for i in range(20)]
    assert codes(run_scan(make_env(healthy, name="healthy"))) == set()
    assert parse_decoder("msgpack").name == "msgpack"


def _msgpack_numpy(obj: object) -> object:
    """msgpack-numpy's encoding (``msgpack_numpy.encode``): arrays and numpy scalars as maps, written here."""
    if isinstance(obj, np.ndarray):
        return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": obj.shape, b"data": obj.tobytes()}
    if isinstance(obj, np.generic):
        return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
    return obj


def test_msgpack_records_without_a_label_are_located_by_the_keys_read(
    make_env: EnvMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every unlabelled record ends a label block, whose first and last runs are located by key. The keys come
    from the loop that read them, never from a cursor walked from the nearest remembered key (two walks per
    unlabelled record: 400 µs each at a million records), and are the right ones."""
    import msgpack

    from scanner_service.engine import scan_shard
    from scanner_service.sources import lmdb_read

    def pack(value: object) -> bytes:
        return bytes(msgpack.packb(value, default=_msgpack_numpy, use_bin_type=True))

    pixels = np.arange(8, dtype=np.uint8).reshape(2, 2, 2)
    records = [(key(i), pack({"x": pixels, "label": i // 300})) for i in range(6000)]
    for i in range(9, 6000, 10):
        records[i] = (key(i), pack({"x": pixels}))  # no label
    for i in (1200, 3601, 5998):  # the first, second and last record of label blocks: out of range
        records[i] = (key(i), pack({"x": pixels, "label": 99}))
    path = make_env(records)
    walks = []
    walk = lmdb_read._Keys._walk
    monkeypatch.setattr(lmdb_read._Keys, "_walk", lambda keys, *a: walks.append(a) or walk(keys, *a))
    config = ScanConfig(decoder="msgpack", num_classes=20)
    planned = plan(path, config)
    for shard in planned.shards:
        scan_shard("lmdb", planned.source.path, shard, config)
    assert walks == []
    report = run_scan(path, decoder="msgpack", num_classes=20)
    assert keys_of(report, "L002") == [key(1200), key(3601), key(5998)]
    assert [loc.index for loc in finding(report, "L002").locations] == [1200, 3601, 5998]
    (labels,) = report.labels
    assert labels.total == 5400


def test_msgpack_numpy_arrays_and_scalars_are_data(make_env: EnvMaker, rng: np.random.Generator) -> None:
    """tensorpack's and ``msgpack_numpy.patch()``'s records: arrays go to the numeric checks, numpy scalar
    labels to the label checks, bare pixel bytes with their shape are pixels. A healthy database passes (every
    record was a not-an-image error), and NaN or a bad label is found at its key (they passed unseen)."""
    import msgpack

    def pack(value: object) -> bytes:
        return bytes(msgpack.packb(value, default=_msgpack_numpy, use_bin_type=True))

    images = [
        (key(i), pack({"image": rng.integers(0, 256, (8, 8, 3), np.uint8), "label": np.int64(i % 3)}))
        for i in range(30)
    ]
    assert codes(run_scan(make_env(images, name="images"), num_classes=3)) == set()
    images[7] = (key(7), pack({"image": rng.integers(0, 256, (8, 8, 3), np.uint8), "label": np.int64(9)}))
    assert keys_of(run_scan(make_env(images, name="bad_label"), num_classes=3), "L002") == [key(7)]

    features = [(key(i), pack([rng.normal(size=(3, 4, 4)).astype(np.float32), i % 3])) for i in range(30)]
    nan = np.ones((3, 4, 4), np.float32)
    nan[1, 2, 3] = np.nan
    features[9] = (key(9), pack([nan, 0]))
    features.append(("__keys__", pack([k for k, _ in features])))
    report = run_scan(make_env(features, name="features"))
    assert report.info["lmdb.decoder"].startswith("msgpack")
    assert keys_of(report, "V001") == [key(9)] and codes(report) == {"V001"}
    assert [(s.dataset, s.shape) for s in report.statistics] == [("msgpack", [30, 3, 4, 4])]

    pixels = [
        (
            key(i),
            pack({"image": rng.integers(0, 256, (8, 8, 3), np.uint8).tobytes(), "shape": [8, 8, 3], "label": i % 2}),
        )
        for i in range(30)
    ]
    assert codes(run_scan(make_env(pixels, name="pixels"))) == set()


def test_structured_npy_values_are_checked_field_by_field(make_env: EnvMaker, rng: np.random.Generator) -> None:
    """Record arrays (``np.save`` of a structured dtype): each numeric field is a column of its own, as HDF5
    compound columns are (NaN and Inf in them passed unseen); a text field is named as not scanned."""
    kind = np.dtype([("x", "<f4"), ("y", "<f8", (2,)), ("name", "S4")])
    records = []
    for i in range(30):
        value = np.zeros(5, kind)
        value["x"] = rng.normal(size=5)
        value["y"] = rng.normal(size=(5, 2))
        if i == 6:
            value["x"][3] = np.nan
        if i == 9:
            value["y"][1, 1] = np.inf
        records.append((key(i), npy(value)))
    report = run_scan(make_env(records))
    assert keys_of(report, "V001") == [key(6)] and keys_of(report, "V002") == [key(9)]
    assert {s.dataset for s in report.statistics} == {"npy['x']", "npy['y']"}
    assert "name" in report.info["lmdb.not_scanned"]


def test_complex_npy_values_are_checked_part_by_part(make_env: EnvMaker, rng: np.random.Generator) -> None:
    """complex64/complex128 arrays (spectra, MRI k-space): NaN and Inf in the real or imaginary part are found
    (they passed without a word)."""
    records = [
        (key(i), npy((rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))).astype(np.complex64))) for i in range(40)
    ]
    bad = np.ones((4, 4), np.complex64)
    bad[1, 2] = complex(1.0, np.nan)
    records[30] = (key(30), npy(bad))
    worse = np.ones((4, 4), np.dtype(">c16"))
    worse[0, 0] = complex(np.inf, 0.0)
    records[31] = (key(31), npy(worse))
    report = run_scan(make_env(records))
    assert keys_of(report, "V001") == [key(30)]
    assert keys_of(report, "V002") == [key(31)]
    assert report.summary.items_scanned == 40


def test_msgpack_legacy_strings_big_labels_and_records_that_only_look_like_labels(make_env: EnvMaker) -> None:
    """Legacy msgpack (``use_bin_type=False``: images stored as strings) is read; a label beyond 64 bits is an
    invalid label, not a damaged database; a ``label_N`` record that is no short text (an empty or binary
    value) is judged like any other record."""
    import msgpack

    legacy = [(key(i), msgpack.packb({"img": jpeg(i), "label": 1}, use_bin_type=False)) for i in range(20)]
    legacy[5] = (key(5), msgpack.packb({"img": jpeg(5), "label": 2**64 - 1}))
    report = run_scan(make_env(legacy))
    assert report.info["lmdb.decoder"].startswith("msgpack") and keys_of(report, "L002") == [key(5)]
    assert "R004" not in codes(report)
    arrays = [(f"label_{i}", npy(np.ones(4, np.float32))) for i in range(20)]
    arrays[3] = ("label_3", npy(np.ones(4, np.float32))[:-6])
    assert keys_of(run_scan(make_env(arrays, name="arrays")), "R002") == ["label_3"]
    images = [(f"gt_{i}", jpeg(i)) for i in range(20)]
    images[3] = ("gt_3", b"")
    assert keys_of(run_scan(make_env(images, name="images")), "I001") == ["gt_3"]


def test_text_labels_small_text_datasets_and_what_a_msgpack_record_names_its_image(make_env: EnvMaker) -> None:
    """clovaai labels in any script (a zero-width non-joiner is text), a small such database (its text records
    have no vote in detecting the decoder), a damaged image under its name in a msgpack record (never replaced
    by a thumbnail beside it), and list records: (image, label) takes the one integer, [index, image, label]
    none (no key says which)."""
    import msgpack

    small = [(f"image-{i:09d}", jpeg(i)) for i in range(1, 5)]
    small += [(f"label-{i:09d}", "می\u200cخواهم".encode()) for i in range(1, 5)] + [("num-samples", b"4")]
    report = run_scan(make_env(small))
    assert codes(report) == set() and report.info["lmdb.decoder"].startswith("image")
    records = [(key(i), msgpack.packb({"img": jpeg(i), "thumb": jpeg(i, (8, 8)), "label": 0})) for i in range(20)]
    records[2] = (key(2), msgpack.packb({"img": bytes(2000), "thumb": jpeg(2, (8, 8)), "label": 0}))
    assert keys_of(run_scan(make_env(records, name="named")), "I002") == [key(2)]
    listed = [(key(i), msgpack.packb([1000 + i, jpeg(i), i % 2])) for i in range(20)]
    report = run_scan(make_env(listed, name="listed"), num_classes=2)
    assert "L002" not in codes(report) and report.labels == []  # which integer is the label, no key says
    pairs = [(key(i), msgpack.packb([jpeg(i), i % 2])) for i in range(20)]
    assert run_scan(make_env(pairs, name="pairs"), num_classes=2).labels[0].total == 20
    named = [(key(i), msgpack.packb({"image": f"train/{i}.jpg", "content": jpeg(i), "label": 0})) for i in range(20)]
    assert codes(run_scan(make_env(named, name="paths"))) == set()  # a file name under 'image' is no image


def test_msgpack_binary_under_an_image_name_is_judged_and_legacy_strings_that_are_images_read(
    make_env: EnvMaker,
) -> None:
    """A bin value under 'image' is judged whatever it holds (a saved web page must not hide behind the
    thumbnail beside it); a legacy string that happens to be UTF-8 (a small BMP) is still an image."""
    import io
    import struct

    import msgpack
    from PIL import Image

    records = [(key(i), msgpack.packb({"image": jpeg(i), "thumb": jpeg(i, (8, 8)), "label": 0})) for i in range(12)]
    records[4] = (key(4), msgpack.packb({"image": b"<html>404 Not Found</html>", "thumb": jpeg(4, (8, 8))}))
    assert keys_of(run_scan(make_env(records)), "I002") == [key(4)]
    header = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, 4, 0, 0, 0, 0)  # no resolution: every byte < 0x80
    tile = b"BM" + struct.pack("<IHHI", 58, 0, 0, 54) + header + b"\x10\x20\x30\x00"
    Image.open(io.BytesIO(tile)).load()  # a valid image
    assert tile.decode("utf-8")
    legacy = [(key(i), msgpack.packb({"image": tile, "label": 1}, use_bin_type=False)) for i in range(10)]
    report = run_scan(make_env(legacy, name="legacy"))
    assert report.info["lmdb.decoder"].startswith("msgpack") and not {"R001", "I002", "I003"} & codes(report)


def test_msgpack_images_nested_as_converters_write_them_and_float_labels(make_env: EnvMaker) -> None:
    """Hugging Face's Image feature ({"bytes": ..., "path": None}) and msgpack-numpy's arrays ({"nd": True,
    "data": ...}) keep the image one level down; a feature vector under 'data' beside 'jpg' is no image; a
    label of 2.5 is no class id (3.0 is class 3)."""
    import msgpack

    hf = [(key(i), msgpack.packb({"image": {"bytes": jpeg(i), "path": None}, "label": i % 2})) for i in range(10)]
    hf[3] = (key(3), msgpack.packb({"image": {"bytes": jpeg(3)[:200], "path": None}, "label": 1}))
    assert keys_of(run_scan(make_env(hf)), "I003") == [key(3)]
    nd = [
        (key(i), msgpack.packb([{"nd": True, "type": "|u1", "shape": [9], "data": jpeg(i)}, i % 2])) for i in range(10)
    ]
    assert codes(run_scan(make_env(nd, name="nd"))) == set()
    features = np.ones(16, np.float32).tobytes()
    wds = [(key(i), msgpack.packb({"jpg": jpeg(i), "data": features, "cls": float(i % 2)})) for i in range(10)]
    wds[6] = (key(6), msgpack.packb({"jpg": jpeg(6), "data": features, "cls": 2.5}))
    report = run_scan(make_env(wds, name="wds"))
    assert keys_of(report, "L002") == [key(6)] and "I002" not in codes(report)
    assert "label 2.5 is not a class id" in finding(report, "L002").locations[0].detail


def test_msgpack_labels_that_are_no_number_are_named(make_env: EnvMaker) -> None:
    """A label stored as text ('cat') is left out of the label checks with a note saying so (it was left out
    without a word)."""
    import msgpack

    records = [(key(i), msgpack.packb({"img": jpeg(i), "label": i % 3})) for i in range(12)]
    records[4] = (key(4), msgpack.packb({"img": jpeg(4), "label": "cat"}))
    report = run_scan(make_env(records))
    assert (
        report.info["lmdb.labels"] == "records whose label is no number (such as 'cat'): left out of the label checks"
    )
    assert report.labels[0].total == 11


def test_msgpack_label_is_the_first_stored_number(make_env: EnvMaker) -> None:
    """A class name beside its id ('class': 'cat', 'class_id': 0) and an empty 'label' beside 'target': the
    number is the label (a name or None first hid it, and the label checks did not run)."""
    import msgpack

    named = [(key(i), msgpack.packb({"img": jpeg(i), "class": "cat", "class_id": i % 2})) for i in range(8)]
    assert run_scan(make_env(named)).labels[0].total == 8
    empty = [(key(i), msgpack.packb({"img": jpeg(i), "label": None, "target": i % 2})) for i in range(8)]
    assert run_scan(make_env(empty, name="empty")).labels[0].total == 8


def test_fields_of_nested_tables_in_npy_values_are_columns(make_env: EnvMaker, rng: np.random.Generator) -> None:
    """A table nested in structured .npy values (``pos`` of ``x`` and ``y``) was passed over whole as holding no
    numbers: a NaN in ``pos.y`` went unreported. Its fields are columns named by their path."""
    kind = np.dtype([("pos", [("x", "<f4"), ("y", "<f4")]), ("label", "<i8"), ("meta", [("name", "S4")])])
    records = []
    for i in range(20):
        value = np.zeros(4, kind)
        value["pos"]["x"] = rng.normal(size=4)
        value["pos"]["y"] = rng.normal(size=4)
        if i == 11:
            value["pos"]["y"][2] = np.nan
        records.append((key(i), npy(value)))
    report = run_scan(make_env(records))
    assert keys_of(report, "V001") == [key(11)]
    assert {s.dataset for s in report.statistics} >= {"npy['pos']['x']", "npy['pos']['y']", "npy['label']"}
    assert report.info["lmdb.not_scanned"].endswith("hold no numbers: ['meta']['name']")
