"""HDF5 files and folders of HDF5 files: every numeric dataset in every group, read chunk by chunk.

Planning walks each file's tree without reading data. Shards are row ranges aligned to the chunk rows of
each dataset (row blocks for contiguous ones), packed up to ``shard_bytes``. Reading picks, per dataset:

- large uncompressed chunks: their addresses from one walk of the chunk index (``hdf5_chunks``); chunks that
  follow each other in the file are read as one block with one ``preadv`` into a reused buffer, others chunk
  by chunk; chunks that split rows are assembled into whole rows;
- large gzip/shuffle chunks: the raw chunk (``preadv`` at its address) inflated with libdeflate, outside HDF5;
- contiguous data: ``preadv`` of row blocks at the dataset's file offset into a reused buffer;
- everything else (small chunks, other filters, compact and virtual layouts): h5py row blocks.

A block that fails is read again chunk by chunk, so a damaged chunk costs only its own rows: it becomes a
``corrupt-chunk`` finding naming the chunk and the rows it covers, and the scan continues.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import math
import os
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deflate
import h5py
import numpy as np

from ..buffers import aligned_buffer
from ..errors import ConfigError
from ..forked import stalled
from ..imaging.sniff import claimed_format
from ..items import DatasetMeta, EncodedImage, LabelBlock, Note, NumericBlock, ReadFailure
from ..labels import is_onehot_shape, label_tally
from ..location import Location
from ..partial import Partial, merge
from ..statistics import channel_layout, complex_parts
from ..text import printable
from .base import (
    Plan,
    Rows,
    Shard,
    Source,
    SourceInfo,
    block_rows,
    listed_names,
    pack_segments,
    segment_shard,
    shard_rows,
)
from .hdf5_chunks import ChunkIndex, chunk_index
from .hdf5_files import folder_contents, is_hdf5_source, other_version
from .hdf5_nonnumeric import (
    IMAGE_BLOCK_ROWS,
    IMAGE_MIN_BYTES,
    VALUE_BLOCK_ROWS,
    blank,
    bytes_type,
    file_image,
    holds_images,
    image_kind,
    one_per_row,
    row_size,
    row_values,
    sampled_rows,
    starts_like_image,
    value_size,
)
from .hdf5_roles import SHOWN as ROLES_SHOWN
from .hdf5_roles import Gap, Role, find_roles, member_gaps, role_meta, roles_text
from .hdf5_small import BATCH_BYTES, BATCH_DATASETS, Scratch, is_small, read_small, small_spec
from .naming import LABEL_NAMES, is_label_name, lengths_differ, split_folder, split_of, split_stream
from .npy_fields import FieldPath, field_dtype, field_text, leaf_fields, pick
from .walk import LINK_OUT, UNLISTABLE, Outside

ZLIB_ERROR: type[Exception] = deflate.DeflateError
"""What libdeflate raises for damaged data (a bad stream, a wrong Adler-32, more data than the chunk holds)."""


FILTER_DEFLATE, FILTER_SHUFFLE = 1, 2
OWN_PIPELINES = frozenset({(), (FILTER_DEFLATE,), (FILTER_SHUFFLE,), (FILTER_SHUFFLE, FILTER_DEFLATE)})
"""Filter pipelines (in the order they were applied on writing) decoded here; any other order or filter is
read through HDF5 (deflate before shuffle is valid, and must be undone in the reverse order)."""
OWN_CHUNK_MIN_BYTES = 256 << 10
"""Chunks at least this large are read raw and decoded here; smaller ones through h5py row blocks."""

FILTER_PACKAGES: dict[int, tuple[str, str]] = {
    4: ("szip", "an HDF5 built with libaec (the h5py wheels have it)"),
    307: ("bzip2", "hdf5plugin"),
    32000: ("lzf", "h5py"),
    32001: ("blosc", "hdf5plugin"),
    32004: ("lz4", "hdf5plugin"),
    32008: ("bitshuffle", "hdf5plugin"),
    32013: ("zfp", "hdf5plugin"),
    32015: ("zstd", "hdf5plugin"),
    32017: ("sz", "hdf5plugin"),
    32018: ("fcidecomp", "hdf5plugin"),
    32024: ("sz3", "hdf5plugin"),
    32026: ("blosc2", "hdf5plugin"),
}


def missing_filters(filter_ids: list[int]) -> list[int]:
    """The filters HDF5 cannot apply here; registers hdf5plugin's filters first when one is missing."""
    missing = [fid for fid in filter_ids if not h5py.h5z.filter_avail(fid)]
    if missing:
        with contextlib.suppress(ImportError):  # blosc, lz4, zstd, bitshuffle ... (imported only when needed)
            importlib.import_module("hdf5plugin")
        missing = [fid for fid in missing if not h5py.h5z.filter_avail(fid)]
    return missing


CHUNK_CACHE_BYTES = 16 << 20
"""HDF5 1.x caches only 1 MiB of chunks per dataset: row blocks that span chunks then decode them repeatedly."""


def open_h5(path: Path) -> h5py.File:
    """Open read-only, without HDF5's file locking (read-only media, shared filesystems). A file a writer has
    open in SWMR mode refuses a plain reader: it is read the way SWMR readers read it."""
    try:
        return h5py.File(path, "r", locking=False, rdcc_nbytes=CHUNK_CACHE_BYTES)
    except OSError as exc:
        if "already open for write" not in str(exc):
            raise
        try:
            return h5py.File(path, "r", locking=False, rdcc_nbytes=CHUNK_CACHE_BYTES, swmr=True)
        except OSError:
            raise exc from None  # a writer that is not in SWMR mode: the first reason is the one to read


NETCDF_PLACEHOLDER = b"This is a netCDF dimension but not a netCDF variable"
"""How netCDF-4 names the dataset it stores for a dimension that has no coordinate variable (zeros, no data)."""


ATTRIBUTE_ERRORS = (OSError, RuntimeError, ValueError, KeyError, TypeError)
"""What h5py raises for an attribute it cannot read (a damaged global heap, a type NumPy cannot hold)."""


def writer_bookkeeping(name: str, obj: h5py.Dataset) -> str | None:
    """What a dataset a writer keeps for itself is (no data of the user's), None for data: netCDF-4's
    placeholders of dimensions without a coordinate variable, PyTables' column indexes (``_i_<table>``). An
    attribute that cannot be read says nothing: the data is judged as data."""
    with contextlib.suppress(*ATTRIBUTE_ERRORS):
        attrs = obj.attrs
        if "NAME" in attrs:
            named = attrs["NAME"]
            if isinstance(named, bytes | np.bytes_) and named.startswith(NETCDF_PLACEHOLDER):
                return "a netCDF-4 dimension without a variable: no data"
    in_index = any(part.startswith("_i_") for part in name.split("/")[:-1])
    with contextlib.suppress(*ATTRIBUTE_ERRORS):
        if in_index and obj.parent.attrs.get("CLASS") == b"INDEX":
            return "a PyTables index"
    return None


NETCDF_DEFAULT_FILL = 9.969209968386869e36
"""netCDF's default fill value of float and double variables: netCDF readers mask it without an attribute."""


def declared_missing(ds: h5py.Dataset, dtype: np.dtype[Any]) -> tuple[float, ...]:
    """The values ``ds`` declares missing, as ``dtype`` holds them: its CF ``_FillValue`` and ``missing_value``
    attributes, and in a netCDF-4 file netCDF's default fill of floats where no ``_FillValue`` is set (netCDF
    writes it into rows never written; netCDF4 and xarray read all of these as missing, NaN). NaN is left to
    the NaN check."""
    found: list[Any] = []
    try:
        attrs = ds.attrs
        for key in ("_FillValue", "missing_value"):
            if key in attrs:
                found.extend(np.atleast_1d(np.asarray(attrs[key])).ravel().tolist())
        if "_FillValue" not in attrs and dtype.kind == "f" and "_NCProperties" in ds.file.attrs:
            found.append(NETCDF_DEFAULT_FILL)
    except ATTRIBUTE_ERRORS:  # an unreadable attribute declares nothing
        return ()
    values: list[float] = []
    for value in found:
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            held = np.asarray(value).astype(dtype)
        if not np.isnan(held) and float(held) not in values and (dtype.kind == "f" or float(held) == value):
            values.append(float(held))
    return tuple(values)


def is_matlab(path: Path) -> bool:
    """A MATLAB v7.3 MAT-file: HDF5 after a user block that starts with MATLAB's text header."""
    try:
        with path.open("rb") as fh:
            return fh.read(19) == b"MATLAB 7.3 MAT-file"
    except OSError:
        return False


def _is_text(dtype: np.dtype[Any]) -> bool:
    """Fixed-length bytes, or variable-length strings (h5py's object dtype)."""
    return dtype.kind in "SU" or h5py.check_string_dtype(dtype) is not None


COORDINATE_MAX_VALUES = 1 << 20
"""Label candidates longer than this are not read to tell whether they are coordinates (they stay labels)."""


def coordinates(fh: h5py.File, datasets: list[_Dataset], rel: str, labels_option: str | None) -> list[str]:
    """Datasets named like labels (``y``) that are coordinates: as long as an axis of the data beside them
    other than its first, as long as the first axis of none, and strictly monotonic, as netCDF and CF require
    of a coordinate variable (``h['y'] = np.arange(512)`` beside data of 300 × 512: the columns' positions).
    They are made data (scanned as values, no label stream, no label-length mismatch) and named in the notes;
    labels named with ``--labels`` stay labels. A real mismatch stays one: 299 labels beside 300 samples are
    as long as no other axis; 512 class ids beside 300 × 512 data are no monotonic run."""
    if labels_option:
        return []
    found: list[str] = []
    for label in datasets:
        if not label.is_label or label.field is not None or label.dtype.kind == "b" or label.rows < 2:
            continue
        group = label.name.rsplit("/", 1)[0]
        beside = [d for d in datasets if not d.is_label and d.shape and d.name.rsplit("/", 1)[0] == group]
        if any(d.rows == label.rows for d in beside) or label.rows > COORDINATE_MAX_VALUES:
            continue
        along = next(((d, k) for d in beside for k, n in enumerate(d.shape[1:], 1) if n == label.rows), None)
        if along is None:
            continue
        try:
            values = np.asarray(fh[h5_key(label.path or label.name)][()]).reshape(-1)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError):
            continue  # a damaged label dataset: read as labels, the reader reports it
        rising, falling = bool((values[1:] > values[:-1]).all()), bool((values[1:] < values[:-1]).all())
        if not (rising or falling):
            continue
        label.is_label = False
        data, axis = along
        order = "increasing" if rising else "decreasing"
        found.append(f"{rel}:{label.name} ({label.rows} {order} values, axis {axis} of {data.name})")
    return found


def is_coordinate(obj: h5py.Dataset) -> bool:
    """A dimension scale (netCDF-4 coordinate variables: ``x``, ``y``, ``time``): coordinates, not labels."""
    try:
        return bool("CLASS" in obj.attrs and obj.attrs["CLASS"] == b"DIMENSION_SCALE")
    except ATTRIBUTE_ERRORS:  # an attribute that cannot be read makes no coordinate
        return False


@dataclass(slots=True)
class _FilePlan:
    """One file's plan, as the planning child sends it back."""

    segments: list[dict[str, Any]]
    partial: Partial
    unscanned: list[str]
    text_labels: list[str]
    matlab: list[str]
    offsets: dict[str, int]
    unwritten: list[str]
    coordinates: list[str]
    roles: list[str]


@dataclass(slots=True)
class _Dataset(Rows):
    name: str
    """As locations name it: the dataset's path, and for a field of a compound dataset ``/t['x']`` (a field of
    a nested compound by its path: ``/t['pos']['y']``)."""
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    chunks: tuple[int, ...] | None
    is_label: bool
    path: str = ""
    """The dataset's path in the file, when it differs from ``name`` (a field)."""
    field: FieldPath | None = None
    """The compound field read, by its path of field names (``("pos", "y")``); None for the whole dataset."""
    small: dict[str, Any] | None = None
    """How a worker reads it as a small dataset (``hdf5_small``), None for the general reader."""
    role: Role | None = None
    """The role of a dataset that is one sample (one group per sample: ``hdf5_roles``)."""
    onehot: bool = False
    """An N×K dataset named like labels: also read as rows of 0/1 labels (one-hot, multi-hot); booleans only so
    (``is_label`` set too: no data to scan)."""
    row_vector: bool = False
    """Labels that HDF5 holds as a 1×N row (a MATLAB column vector): ``shape`` is (N,), read along the second
    axis, one label per sample."""
    read_as: str = ""
    """How a dataset of encoded images or of values that are no numbers is read (``hdf5_nonnumeric``): ``images``,
    one a row (its ``shape`` is then (rows,)); ``image``, a 1-D array of bytes that is one image (its ``shape`` is
    then ()); ``through``, read for damage only; '' for numbers."""
    value_bytes: int = 0
    """Bytes per row of such a dataset, as ``row_size`` measures them."""
    labelled_by: str = ""
    """For encoded images: the path of the label dataset beside them, one class id per image (``image_labels``)."""
    at: int | None = None
    """For one image file's bytes stored contiguous: their file offset (a worker reads them with one ``pread``,
    opening no dataset)."""

    @property
    def row_bytes(self) -> int:
        return self.value_bytes or Rows.row_bytes.fget(self)  # type: ignore[attr-defined]


def file_label(name: str, shape: tuple[int, ...]) -> bool:
    """Whether a dataset named like labels is the label of a whole file: a scalar at the file's root (one file
    per sample, ``case_017.h5`` holding ``/image`` and ``/label``). The files' labels are one label stream, in
    file order; left out, a label beyond --num-classes in one of them passed unseen. (Scalars in groups are the
    labels of per-sample groups, read as their role: ``hdf5_roles``.)"""
    return not shape and name.count("/") == 1


def matlab_row_labels(datasets: list[_Dataset], labels: str | None) -> None:
    """Read a MATLAB file's N×1 label vectors as N labels. MATLAB stores them column-major, so HDF5 holds a 1×N
    row: read as it stands it was a one-hot array of one row, no label check ran, and a label beyond
    --num-classes passed unseen. A 1×N one-hot array is nonsense, so the row is the labels (indices count along
    it, the samples' own order)."""
    for ds in datasets:
        row = ds.field is None and len(ds.shape) == 2 and ds.shape[0] == 1 and ds.shape[1] > 1 and ds.role is None
        if row and ds.dtype.kind in "fiub" and is_label_name(ds.name, labels):
            ds.shape, ds.is_label, ds.onehot, ds.row_vector = (ds.shape[1],), True, False, True
            ds.chunks = (ds.chunks[1],) if ds.chunks else None


def object_name(name: str | bytes) -> str:
    """An HDF5 object's path as text. h5py hands names that are not UTF-8 over as bytes: those keep their
    bytes as surrogate escapes (``Location`` prints them as ``\\xff``), and ``h5_key`` gives them back."""
    return name if isinstance(name, str) else name.decode("utf-8", "surrogateescape")


def h5_key(name: str) -> str | bytes:
    """The key h5py opens ``name`` (from ``object_name``) with: the name, or its original bytes."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape")
    return name


UNSCANNED_SHOWN = 5


def _unscanned_kind(dtype: np.dtype[Any], field: bool = False) -> str | None:
    """What a numeric dataset (or compound field) that is not scanned holds (complex, variable-length
    numbers); None for strings, references and other data that holds no numbers. (A nested compound is no
    field of its own: its fields are, ``leaf_fields``.)"""
    if dtype.kind == "c":
        return f"complex {dtype.name}"
    if field and dtype.subdtype is not None:
        return _unscanned_kind(dtype.subdtype[0], field)
    base = h5py.check_vlen_dtype(dtype)
    if base is not None and np.dtype(base).kind in "fiuc":
        return f"variable-length {np.dtype(base).name}"
    return None


def vds_source_file(vds_file: Path, name: str) -> Path | None:
    """Where HDF5 finds the source file ``name`` of a virtual dataset in ``vds_file``; None when it finds none.

    HDF5's search (H5Pset_virtual): an absolute name as it is, else its last component as a relative name;
    a relative one under each prefix of ``HDF5_VDS_PREFIX`` (``${ORIGIN}`` is the virtual dataset's folder),
    then in the virtual dataset's folder, then in the current directory.
    """
    candidate = Path(name)
    if candidate.is_absolute():
        if candidate.is_file():
            return candidate
        candidate = Path(candidate.name)
    return _search(candidate, vds_file.parent, "HDF5_VDS_PREFIX", beside=True)


def stored_as_read(ds: h5py.Dataset) -> bool:
    """Whether the dataset's stored bytes are its values as numpy reads them: the same type, size and byte
    order. Only then are raw bytes decoded here; HDF5 converts other types (a 2-byte bfloat16 read as
    float32, custom precisions) on the way."""
    try:
        return bool(ds.id.get_type().equal(h5py.h5t.py_create(ds.dtype)))
    except (TypeError, ValueError, RuntimeError):
        return False


def external_file(h5file: Path, name: str) -> Path | None:
    """Where HDF5 finds an external raw data file ``name`` of a dataset in ``h5file`` (H5Pset_efile_prefix): an
    absolute name as it is; a relative one under each prefix of ``HDF5_EXTFILE_PREFIX`` (``${ORIGIN}`` is the
    HDF5 file's folder), else in the current directory. None when it finds none."""
    candidate = Path(name)
    if candidate.is_absolute():
        return candidate if candidate.is_file() else None
    return _search(candidate, h5file.parent, "HDF5_EXTFILE_PREFIX", beside=False)


def _search(relative: Path, origin: Path, variable: str, beside: bool) -> Path | None:
    """HDF5's search for a file a dataset names by a relative path: under each prefix of the environment
    ``variable`` (``${ORIGIN}`` is the HDF5 file's folder), then beside the HDF5 file (``beside``), then in the
    current directory. None when it finds none."""
    prefixes = [p.replace("${ORIGIN}", str(origin)) for p in os.environ.get(variable, "").split(":") if p]
    for base in (*prefixes, *([str(origin)] if beside else []), os.getcwd()):
        found = Path(base) / relative
        if found.is_file():
            return found
    return None


_NUMERIC_TYPES: dict[tuple[int, int, int, int], tuple[np.dtype[Any], Any]] = {}
"""HDF5 integer and float types by class, size, byte order and sign: the numpy type h5py reads them as, and
HDF5's type for that numpy type (a stored type equal to it is read as stored: ``stored_as_read``)."""


def _register_filters(ds: h5py.Dataset) -> None:
    """Make the dataset's filters available to HDF5 (hdf5plugin's, when one is missing). A virtual dataset has
    no filters of its own: its source files may have any, so hdf5plugin is registered for it."""
    if ds.id.get_create_plist().get_layout() == h5py.h5d.VIRTUAL:
        with contextlib.suppress(ImportError):
            importlib.import_module("hdf5plugin")
        return
    missing_filters(_filters(ds))


def _filters(ds: h5py.Dataset) -> list[int]:
    plist = ds.id.get_create_plist()
    return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]


NEVER_WRITTEN_MAX_CHUNKS = 1 << 22
"""Datasets with more chunks than this are not searched for chunks never written (one walk of the index)."""


def never_written(ds: h5py.Dataset) -> list[tuple[int, int]]:
    """Row ranges of ``ds`` whose storage was never written, which HDF5 reads as the fill value without an
    error: the chunk rows that miss a chunk, or every row of contiguous data never allocated. Compact, virtual
    and external storage, and a chunk index that cannot be walked (its damage is reported when read): none."""
    if not ds.shape:
        return []
    rows = int(ds.shape[0])
    plist = ds.id.get_create_plist()
    layout = plist.get_layout()
    with contextlib.suppress(OSError, RuntimeError, ValueError, IndexError):
        if layout == h5py.h5d.CONTIGUOUS and not plist.get_external_count():
            return [(0, rows)] if ds.id.get_offset() is None else []
        if layout != h5py.h5d.CHUNKED or ds.chunks is None or not hasattr(ds.id, "chunk_iter"):
            return []
        chunks = tuple(int(c) for c in ds.chunks)
        grid = [-(-int(s) // c) for s, c in zip(ds.shape, chunks, strict=True)]
        total = math.prod(grid)
        if total > NEVER_WRITTEN_MAX_CHUNKS or ds.id.get_num_chunks() >= total:
            return []
        held = np.zeros(grid[0], np.int64)  # chunks written, per chunk row

        def visit(info: Any) -> None:
            held[info.chunk_offset[0] // chunks[0]] += 1

        ds.id.chunk_iter(visit)
        return _rows_lacking(held, total // grid[0], chunks[0], rows)
    return []


def _rows_lacking(held: np.ndarray[Any, Any], per_row: int, chunk_rows: int, rows: int) -> list[tuple[int, int]]:
    """Row ranges of the chunk rows that hold fewer than ``per_row`` chunks (``held``: chunks per chunk row)."""
    ranges: list[tuple[int, int]] = []
    for i in np.flatnonzero(held < per_row).tolist():
        start, stop = i * chunk_rows, min(rows, (i + 1) * chunk_rows)
        if ranges and ranges[-1][1] == start:
            start = ranges.pop()[0]
        ranges.append((start, stop))
    return ranges


INDEX_CHECK_MAX_CHUNKS = 1 << 16
"""Chunk indexes of up to this many chunks are walked whole at planning (about 0.1 s) for entries no writer makes."""


def chunk_places(ds: h5py.Dataset) -> tuple[str | None, list[tuple[int, int]]] | None:
    """One walk of a chunked dataset's index: (what is wrong with it, the row ranges left without a chunk), which
    HDF5 reads as the fill value without an error. What is wrong: an entry at a place no chunk can be (off the
    chunk grid, outside the dataset, or another chunk's place: a damaged key of the chunk B-tree); None when
    every entry is in its place, and the ranges are then rows never written. None when the index is not walked
    (``never_written`` then tells)."""
    with contextlib.suppress(OSError, RuntimeError, ValueError, IndexError):
        if ds.chunks is None or not ds.shape or not hasattr(ds.id, "chunk_iter"):
            return None
        shape = tuple(int(n) for n in ds.shape)
        chunks = tuple(int(c) for c in ds.chunks)
        grid = [-(-s // c) for s, c in zip(shape, chunks, strict=True)]
        total = math.prod(grid)
        if total > INDEX_CHECK_MAX_CHUNKS or ds.id.get_create_plist().get_layout() != h5py.h5d.CHUNKED:
            return None
        held = np.zeros(grid[0], np.int64)  # chunks in their place, per chunk row
        seen: set[tuple[int, ...]] = set()
        wrong: list[tuple[int, ...]] = []

        def visit(info: Any) -> None:
            offset = tuple(int(o) for o in info.chunk_offset)
            if offset not in seen and all(o % c == 0 and o < n for o, c, n in zip(offset, chunks, shape, strict=True)):
                held[offset[0] // chunks[0]] += 1
                seen.add(offset)
            else:  # off the grid, outside the dataset, or a place named twice
                wrong.append(offset)

        ds.id.chunk_iter(visit)
        ranges = _rows_lacking(held, total // grid[0], chunks[0], shape[0])
        if not wrong:
            return None, ranges
        place = ", ".join(str(o) for o in wrong[0])
        more = f" (and {len(wrong) - 1:,} more)" if len(wrong) > 1 else ""
        size = "×".join(str(n) for n in shape)
        where = "a place it names twice" if wrong[0] in seen else f"where no chunk of a {size} dataset can be"
        return f"its chunk index names a chunk at ({place}){more}, {where}", ranges
    return None


NEVER_WRITTEN_SHOWN = 3


def image_labels(datasets: list[_Dataset]) -> None:
    """Give each dataset of encoded images its label dataset: in its group, as long, one integer class id a row,
    of its split when the group holds several (``X_train`` with ``y_train``); none when that leaves more than one."""
    for images in (d for d in datasets if d.read_as == "images" and d.shape):
        group, split = images.name.rsplit("/", 1)[0], split_of(images.name)
        labels = [
            d
            for d in datasets
            if d.is_label
            and not d.onehot
            and d.role is None
            and d.field is None
            and d.dtype.kind in "iu"
            and d.shape in ((images.rows,), (images.rows, 1))
            and d.name.rsplit("/", 1)[0] == group
        ]
        if len(labels) > 1:
            labels = [d for d in labels if split_of(d.name) == split]
        if len(labels) == 1:
            images.labelled_by = labels[0].path or labels[0].name


SIBLINGS_MIN = 2
"""Datasets of one image each that make the others alike by place images too, at least (and a majority)."""


def images_by_siblings(found: list[_Dataset]) -> list[_Dataset]:
    """Read as an image a dataset that could hold one (bytes, one value; a 1-D array of bytes) where most of
    those alike by place are images, whatever its own first bytes: an error page saved in one sample's place is
    then not-an-image, not text or numbers. Alike are the datasets of one name in other samples' groups
    (``/000123/image``), and those of one group whose names claim an image format (``/train/0042.jpg``); a
    ``caption_tokens`` or ``license`` beside images is neither. Returns those made images."""

    def image(d: _Dataset) -> bool:
        return d.read_as == "image" or (d.read_as == "images" and d.rows == 1)

    def could_be(d: _Dataset) -> bool:
        if d.is_label or d.field is not None or d.role is not None:
            return False
        if d.read_as == "through":
            return bytes_type(d.dtype) and math.prod(d.shape) == 1
        return not d.read_as and d.dtype.kind in "iu" and d.dtype.itemsize == 1 and len(d.shape) == 1

    def by_name(d: _Dataset) -> Any:
        return d.name.rsplit("/", 2)[0], d.name.rsplit("/", 1)[1]

    def by_group(d: _Dataset) -> Any:
        group, leaf = d.name.rsplit("/", 1)
        return group if claimed_format(leaf) is not None else None

    made: list[_Dataset] = []
    for place in (by_name, by_group):
        alike: dict[Any, list[_Dataset]] = {}
        for d in found:
            if image(d) or could_be(d):
                alike.setdefault(place(d), []).append(d)
        alike.pop(None, None)
        for members in alike.values():
            images = sum(map(image, members))
            if images < SIBLINGS_MIN or 2 * images <= len(members):
                continue
            for d in members:
                if image(d):
                    continue
                if d.read_as == "through":
                    d.read_as, d.shape = "images", (1,)
                else:  # a 1-D array of bytes: one image file's
                    d.read_as, d.value_bytes, d.shape, d.small, d.chunks = "image", d.shape[0], (), None, None
                made.append(d)
    return made


def _plain_storage(ds: h5py.Dataset, shape: tuple[int, ...]) -> bool:
    """Whether a dataset read for damage only is read so: values, in the file's own chunks or contiguous space
    (virtual and external storage are checked for the numbers they hold)."""
    if (shape and not math.prod(shape)) or ds.is_virtual:
        return False
    return not ds.id.get_create_plist().get_external_count()


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    """``rows 7-13, 21-29`` (``row 5`` for one row), the first few ranges."""
    spans = [f"{a}-{b - 1}" if b - a > 1 else f"{a}" for a, b in ranges[:NEVER_WRITTEN_SHOWN]]
    more = len(ranges) - NEVER_WRITTEN_SHOWN
    word = "row" if len(ranges) == 1 and ranges[0][1] - ranges[0][0] == 1 else "rows"
    return f"{word} {', '.join(spans)}" + (f" and {more} more ranges" if more > 0 else "")


def _fill_text(ds: h5py.Dataset) -> str:
    """`` (fill value nan)``; '' for a fill value that is no number (a table's record)."""
    with contextlib.suppress(*ATTRIBUTE_ERRORS):
        fill = ds.fillvalue
        if isinstance(fill, np.number | np.bool_):
            return f" (fill value {fill})"
    return ""


BISECT_READS = 8192
"""Reads spent halving one failed row range of an unchunked dataset: enough to isolate a few damaged runs down
to the row; a range bad throughout is reported in coarser pieces once they are spent."""


def _lacks(fh: h5py.File, gap: Gap) -> bool:
    """Whether the group of ``gap`` holds no object of the member's name at all (the walk lists no dataset it
    does not scan: text, empty or filtered ones); a group it cannot look into lacks nothing."""
    try:
        group = fh.get(h5_key(gap.group))
        return isinstance(group, h5py.Group) and h5_key(gap.member) not in group
    except (OSError, RuntimeError, ValueError, KeyError, TypeError):
        return False


def _gap_location(gap: Gap) -> dict[str, Any]:
    """The location fields of a sample group without a member: at the group, naming the member."""
    holds = f"{gap.holding:,} of the {gap.groups:,} sample groups of {gap.parent} hold one ({gap.role.name})"
    detail = f"no {gap.member} in this group, though {holds}: group['{gap.member}'] raises KeyError here"
    if gap.role.labels:
        detail += f", and the label stream {gap.role.name} has no label for this sample"
    return {"dataset": gap.group, "detail": detail}


def _chunk_label(offset: tuple[int, ...], chunks: tuple[int, ...]) -> str:
    return ",".join(str(o // c) for o, c in zip(offset, chunks, strict=True))


def _one_chunk(seg: dict[str, Any]) -> bool:
    """Whether a segment's rows lie in one chunk along the first axis (rows of unchunked data: one row)."""
    step = seg.get("chunk_rows", 1)
    return bool(seg["start"] // step == (seg["stop"] - 1) // step)


def _reason(exc: BaseException) -> str:
    """What HDF5 (or h5py) said of a failed read, or the error's type when it said nothing."""
    return str(exc).strip() or type(exc).__name__


def _rows_text(start: int, stop: int) -> str:
    return f"rows {start}-{stop - 1}" if stop - start > 1 else f"row {start}"


def enum_classes(dtype: np.dtype[Any]) -> list[str]:
    """The class names of an HDF5 enum label type (``h5py.enum_dtype({"cat": 0, "dog": 1})``) by value, when its
    values are the class ids 0..K-1; else none (an enum of other values names no class ids)."""
    mapping = h5py.check_enum_dtype(dtype)
    if not mapping:
        return []
    by_value = {int(value): str(name) for name, value in mapping.items()}
    if sorted(by_value) != list(range(len(by_value))):
        return []
    return [by_value[i] for i in range(len(by_value))]


_NO_LINK = object()
"""What ``_TolerantWalk`` asks h5py to answer for a link it cannot describe (a damaged group's B-tree or heap):
not a soft link to skip, but an object to open, or to report as lost."""


class _TolerantWalk:
    """``visititems`` opening object by object, for a file where HDF5's own visit stops at an object it
    cannot describe: an object that cannot be opened is ``lost`` (an unreadable-file finding), the rest is
    visited. Hard links to one object are visited once; soft and external links are not followed."""

    def __init__(self, fh: h5py.File, rel: str, line: int | None) -> None:
        self.fh, self.rel, self.line = fh, rel, line
        self.lost: list[Location] = []
        self.seen: set[int] = set()

    def __call__(self, visit: Any) -> None:
        self._walk(self.fh, "", visit)

    def _walk(self, group: h5py.Group, prefix: str, visit: Any) -> None:
        try:
            names = list(group.keys())
        except (OSError, RuntimeError, ValueError, KeyError) as exc:  # a damaged link table: its members are lost
            where = Location(path=self.rel, line=self.line, dataset=printable("/" + prefix.rstrip("/")))
            self.lost.append(where.model_copy(update={"detail": f"this group's links cannot be read: {exc}"}))
            return
        for name in names:
            full = f"{prefix}{name}"
            try:
                link = group.get(name, _NO_LINK, getlink=True)  # (h5py answers the default when it cannot tell)
                if link is not _NO_LINK and not isinstance(link, h5py.HardLink):
                    continue  # a soft or external link: not followed
                obj = group[name]  # a link it cannot tell: opened, or lost with HDF5's reason
                key = hash(obj.id)
            except (OSError, RuntimeError, ValueError, KeyError) as exc:
                where = Location(path=self.rel, line=self.line, dataset=printable("/" + full))
                self.lost.append(where.model_copy(update={"detail": f"this object cannot be opened: {exc}"}))
                continue
            if key in self.seen:
                continue
            self.seen.add(key)
            if isinstance(obj, h5py.Group):
                self._walk(obj, full + "/", visit)
                continue
            try:
                visit(full, obj)
            except (OSError, RuntimeError, ValueError, KeyError) as exc:  # a damaged object header or message
                where = Location(path=self.rel, line=self.line, dataset=printable("/" + full))
                self.lost.append(where.model_copy(update={"detail": f"this dataset cannot be described: {exc}"}))


def numpy_note(arrays: list[str], relative: Callable[[Path], str]) -> str:
    """The note naming the NumPy files of an HDF5 folder: a dataset of their own, and how to scan one."""
    n = len(arrays)
    shown = ", ".join(printable(relative(Path(p))) for p in arrays[:UNSCANNED_SHOWN])
    more = f" and {n - UNSCANNED_SHOWN} more" if n > UNSCANNED_SHOWN else ""
    own = "a NumPy dataset of its own: scan it" if n == 1 else "NumPy datasets of their own: scan each"
    command = shlex.quote(printable(Path(arrays[0]).as_posix()))
    return f"{n} NumPy file{'s' if n > 1 else ''}, not scanned: {shown}{more} ({own} with dscan scan {command})"


NOT_REGULAR = "not a regular file (a named pipe, socket or device): not read"


class Hdf5Source(Source):
    """A ``.h5``/``.hdf5`` file, or a folder holding them (searched recursively)."""

    kind = "hdf5"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return is_hdf5_source(path, outside)

    # -- planning -------------------------------------------------------------------------------

    def list_files(self, partial: Partial) -> list[tuple[Path, int | None]]:
        """The HDF5 files to scan, in storage order, with their list line when they come from a list."""
        if self.path.is_file():
            return [(self.path, None)]
        contents = folder_contents(self.path, self.fenced)  # folder links followed, as for images
        for link in contents.links_out:
            partial.add("S001", Location(path=self.relative(Path(link)), detail=LINK_OUT))
        for folder in contents.unlistable:
            partial.add("S001", Location(path=self.relative(Path(folder)), detail=UNLISTABLE))
        other: list[str] = []
        for path in contents.other_versions:
            what, damaged = other_version(path)
            if damaged:
                partial.add("S001", Location(path=self.relative(Path(path)), detail=what))
            else:
                other.append(f"{self.relative(Path(path))} ({what})")
        notes: list[str] = []
        if other:
            shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
            count = f"{len(other)} file{'s' if len(other) > 1 else ''}"
            notes.append(f"{count} of a version that is no HDF5, not scanned: {shown}")
        if contents.arrays:
            notes.append(numpy_note(sorted(contents.arrays, key=lambda p: Path(p).parts), self.relative))
        if notes:
            partial.info["hdf5.other_formats"] = "; ".join(notes)
        images = len(contents.images)
        if images:
            partial.info["hdf5.images_not_scanned"] = (
                f"{images} image file{'s' if images > 1 else ''} below this folder not scanned (it was read as an "
                "HDF5 dataset): scan an image folder on its own"
            )
        files: list[tuple[Path, int | None]] = []
        for p in contents.hdf5:
            if os.path.isfile(p):
                files.append((Path(p), None))
            elif os.path.islink(p) and not os.path.exists(p):  # a dangling link: a file the dataset lost
                detail = f"a link to {os.readlink(p)}, which does not exist"
                partial.add("S004", Location(path=self.relative(Path(p)), detail=detail))
            elif os.path.exists(p):  # a named pipe, socket or device named like an HDF5 file
                partial.add("S001", Location(path=self.relative(Path(p)), detail=NOT_REGULAR))
        return files

    def plan(self) -> Plan:
        partial = Partial(cap=self.config.max_locations)
        self._unscanned: list[str] = []
        self._text_labels: list[str] = []
        self._matlab: list[str] = []
        self._unwritten: list[str] = []
        self._coordinates: list[str] = []
        self._roles: list[str] = []
        files = self.list_files(partial)
        segments: list[dict[str, Any]] = []
        total_bytes = total_items = 0
        parts = self._plan_files(files, segments)
        files_of: dict[str, int] = {}  # a stream's files: one names it, several their split folder or '.'
        for part in parts:
            for stream in part.labels:
                files_of[stream] = files_of.get(stream, 0) + 1
        partial = merge([partial, *parts])
        for seg in segments:
            total_bytes += seg["bytes"]
            total_items += seg["stop"] - seg["start"]
        if self.config.labels and not partial.labels and segments and self._text_labels:
            raise ConfigError(
                f"labels {self.config.labels!r}: {self._text_labels[0]} holds class names as text; the label checks "
                "need integer class ids (store the index of each name, and the names in an attribute)"
            )
        if self.config.labels and not partial.labels and segments:
            raise ConfigError(
                f"labels {self.config.labels!r}: no dataset of that name with one label per sample (shape N, "
                f"N×1, or N×K one-hot) in {self.path.name}; the label checks would not run (check the name with "
                "h5ls -r)"
            )
        for stream, tally in partial.labels.items():
            if files_of.get(stream, 0) > 1:
                tally.path = split_folder(tally.path) or "."
        if self._matlab:
            shown = ", ".join(self._matlab[:UNSCANNED_SHOWN]) + (" ..." if len(self._matlab) > UNSCANNED_SHOWN else "")
            partial.info["hdf5.matlab"] = (
                f"MATLAB v7.3 file{'s' if len(self._matlab) > 1 else ''} ({shown}): MATLAB stores arrays "
                "column-major, so HDF5 and this report see them transposed: an index counts along MATLAB's last "
                "dimension (for a samples × features matrix, the index is the feature); a column vector of labels, "
                "a 1×N row in HDF5, is read as N labels, its index the sample"
            )
        if self._unscanned:
            count, listed = len(self._unscanned), listed_names(self._unscanned)
            partial.info["hdf5.not_scanned"] = f"{count} dataset{'s' if count > 1 else ''} not scanned: {listed}"
        if self._unwritten:
            count = len(self._unwritten)
            partial.info["hdf5.never_written"] = (
                f"{count} dataset{'s hold' if count > 1 else ' holds'} rows never written, which HDF5 reads as the "
                f"dataset's fill value without an error (a writer that stopped early?): {listed_names(self._unwritten)}"
            )
        if self._coordinates:
            count = len(self._coordinates)
            partial.info["hdf5.coordinates"] = (
                f"{count} dataset{'s' if count > 1 else ''} named like labels read as coordinates along an axis of "
                f"the data beside {'them' if count > 1 else 'it'}, not as labels: {listed_names(self._coordinates)}. "
                "Name labels with --labels to check them as labels"
            )
        if self._roles:
            count = len(self._roles)
            more = f" and {count - ROLES_SHOWN} more" if count > ROLES_SHOWN else ""
            shown = ", ".join(self._roles[:ROLES_SHOWN]) + more
            partial.info["hdf5.per_sample"] = (
                f"datasets read as one sample each (one group per sample, or numbered datasets of one group): {shown}. "
                "Each such dataset is one sample of its role: constant-sample judges the whole dataset, "
                "constant-feature a channel (the last axis of H×W×C images, each element of vectors) across every "
                "sample of the role, and the statistics are the role's"
            )
        shards = pack_segments(segments, self.config.shard_bytes)
        info = SourceInfo(
            kind=self.kind,
            path=str(self.path),
            root=str(self.root),
            files=len(files),
            items=total_items,
            bytes=total_bytes,
        )
        return Plan(source=info, shards=shards, partial=partial)

    def _plan_files(self, files: list[tuple[Path, int | None]], segments: list[dict[str, Any]]) -> list[Partial]:
        """Plan every file in a forked child (HDF5 crashes on some damaged files: a segfault there costs that
        file, an unreadable-file finding, not the scan); their segments go to ``segments``, in file order."""
        from ..forked import Died, each

        offsets: dict[str, int] = {}

        def plan_one(i: int) -> _FilePlan:
            path, line = files[i]
            self._unscanned, self._text_labels, self._matlab, self._unwritten = [], [], [], []
            self._coordinates, self._roles = [], []
            part = Partial(cap=self.config.max_locations)
            found = self._plan_file(path, self.relative(path), line, part, offsets)
            notes = (self._unscanned, self._text_labels, self._matlab)
            return _FilePlan(found, part, *notes, dict(offsets), self._unwritten, self._coordinates, self._roles)

        unscanned: list[str] = []
        text_labels: list[str] = []
        matlab: list[str] = []
        unwritten: list[str] = []
        coords: list[str] = []
        roles: list[str] = []
        parts: list[Partial] = []
        for i, done in each(len(files), plan_one):
            if isinstance(done, Died):
                path, line = files[i]
                where = Location(path=self.relative(path), line=line)
                parts.append(Partial(cap=self.config.max_locations))
                detail = f"not a readable HDF5 file: {done.reason} while reading its structure"
                parts[-1].add("S001", where.model_copy(update={"detail": detail}))
                continue
            segments.extend(done.segments)
            parts.append(done.partial)
            unscanned += done.unscanned
            text_labels += done.text_labels
            matlab += done.matlab
            unwritten += done.unwritten
            coords += done.coordinates
            roles += done.roles
            offsets.clear()  # the label streams' next offsets, as the child left them (a new child goes on)
            offsets.update(done.offsets)
        self._unscanned, self._text_labels, self._matlab, self._unwritten = unscanned, text_labels, matlab, unwritten
        self._coordinates, self._roles = coords, roles
        return parts

    def _plan_file(
        self, path: Path, rel: str, line: int | None, partial: Partial, stream_offsets: dict[str, int]
    ) -> list[dict[str, Any]]:
        where = Location(path=rel, line=line)
        refused = self.outside(path)
        if refused is not None:
            partial.add("S001", where.model_copy(update={"detail": refused}))
            return []
        try:
            if path.stat().st_size == 0:
                partial.add("S001", where.model_copy(update={"detail": "empty file (0 bytes)"}))
                return []
            with open_h5(path) as fh:
                if fh.swmr_mode:
                    detail = (
                        "the file is marked open for writing (SWMR): h5py.File(path, 'r'), as a training loader "
                        "opens it, fails; it was read as a SWMR reader reads it. If no writer is running (one "
                        "that died), clear the mark: h5clear -s FILE"
                    )
                    partial.add("S001", where.model_copy(update={"detail": detail}))
                found = self._walk(fh, path, rel, line, partial)
                for d in images_by_siblings(found):  # (no longer a dataset not scanned)
                    self._unscanned = [u for u in self._unscanned if not u.startswith(f"{rel}:{d.name} (")]
                through = [d for d in found if d.read_as == "through"]  # no samples: read for damage only
                datasets = [d for d in found if d.read_as != "through"]
                self._coordinates.extend(coordinates(fh, datasets, rel, self.config.labels))
                if fh.userblock_size and is_matlab(path):
                    self._matlab.append(rel)
                    matlab_row_labels(datasets, self.config.labels)
                roles = find_roles([d for d in datasets if not d.read_as], self.config.labels)
                gaps = [gap for gap in member_gaps(datasets, roles) if _lacks(fh, gap)]
        except (OSError, RuntimeError, ValueError, KeyError) as exc:
            partial.add("S001", where.model_copy(update={"detail": f"not a readable HDF5 file: {exc}"}))
            return []
        for gap in gaps:
            partial.add("L001" if gap.role.labels else "S007", where.model_copy(update=_gap_location(gap)))
        for ds in datasets:
            ds.role = roles.get(ds.name)
            if ds.role is not None:
                ds.is_label, ds.onehot = ds.role.labels, False
        self._roles.extend(roles_text(rel, roles))
        image_labels(datasets)
        self._check_lengths([d for d in datasets if d.role is None], rel, line, partial)
        segments: list[dict[str, Any]] = []
        for ds in [*datasets, *through]:
            stream = None
            if ds.is_label or ds.onehot:
                name = ds.name if ds.role is None else ds.role.name
                stream = split_stream(rel, name)
                width = ds.shape[1] if ds.onehot else None
                tally = label_tally(partial, stream, ds.dtype.kind, self.config.run_threshold, width)
                tally.path, tally.dataset = rel, name
                names = enum_classes(ds.dtype)
                if len(names) > len(tally.classes):  # an HDF5 enum names the classes, and says how many
                    tally.classes = names
                start = stream_offsets.get(stream, 0)
                stream_offsets[stream] = start + ds.rows
            else:
                start = 0
            segments.extend(self._segments(ds, rel, line, start, stream))
        if segments:
            segments[0]["opens"] = True  # the one segment that reports the file when it cannot be opened
        return segments

    def _walk(self, fh: h5py.File, path: Path, rel: str, line: int | None, partial: Partial) -> list[_Dataset]:
        """The file's numeric datasets. HDF5's own visit stops at the first object it cannot describe (a
        damaged chunk index): then the file is walked again link by link, and only that object is lost."""
        noted = len(self._unwritten)
        try:
            found, scratch, unscanned, seen = self._visit(fh, path, rel, line, None)
        except (OSError, RuntimeError, ValueError, KeyError):
            del self._unwritten[noted:]  # the walk starts again
            found, scratch, unscanned, seen = self._visit(fh, path, rel, line, _TolerantWalk(fh, rel, line))
        for code, tally in scratch.findings.items():
            partial.add_many(code, tally.count, tally.values, tally.locations)
        self._unscanned.extend(unscanned)
        if not seen and not scratch.findings:  # groups and attributes only
            detail = "the file holds no data: no dataset (only groups, attributes or empty placeholders)"
            partial.add("S006", Location(path=rel, line=line, detail=detail))
        with contextlib.suppress(OSError, RuntimeError, ValueError, KeyError):  # notes only: damage is reported above
            fh.id.links.visit(lambda name, info: self._note_external(fh, name, info, rel), info=True)
        return found

    def _visit(
        self, fh: h5py.File, path: Path, rel: str, line: int | None, visit_items: Any
    ) -> tuple[list[_Dataset], Partial, list[str], bool]:
        """The datasets to scan, findings, datasets named as not scanned, and whether any dataset was met."""
        found: list[_Dataset] = []
        partial = Partial(cap=self.config.max_locations)
        not_scanned: list[str] = []
        seen: list[str] = []

        def visit(name: str | bytes, obj: Any) -> None:
            if not isinstance(obj, h5py.Dataset):
                return
            seen.append(object_name(name))
            full = "/" + object_name(name)
            shown = printable(full)  # the name reports use; ``path`` keeps the one to open when they differ
            where = full if shown != full else ""
            own = writer_bookkeeping(full, obj)
            if own is not None:
                not_scanned.append(f"{rel}:{shown} ({own})")
                return
            try:
                dtype = obj.dtype
            except TypeError as exc:  # an HDF5 type NumPy has no equivalent for (24-bit integers, H5T_TIME)
                not_scanned.append(f"{rel}:{shown} (a type h5py cannot read into NumPy: {exc})")
                return
            leaves = list(leaf_fields(dtype)) if dtype.names else []  # nested compounds: their fields, by path
            numeric_fields = [f for f, sub in leaves if sub.base.kind in "fiu"]
            for f, sub in leaves:
                unscanned = _unscanned_kind(sub.base, field=True)
                if unscanned is not None:
                    not_scanned.append(f"{rel}:{shown}{field_text(f)} ({unscanned})")
            array = dtype.subdtype is not None and dtype.subdtype[0].kind in "fiu"  # ('f4', (4,)) elements
            shape = tuple(int(n) for n in obj.shape) if obj.shape is not None else None
            if (
                dtype.kind == "b"
                and shape
                and len(shape) <= 2
                and shape[1:] in ((), (1,))
                and is_label_name(shown, self.config.labels)
            ):  # binary labels stored as HDF5 booleans (other booleans are read through, below)
                found.append(_Dataset(shown, shape, dtype, obj.chunks, True, where))
                return
            if dtype.kind == "b" and shape and is_onehot_shape(shape) and is_label_name(shown, self.config.labels):
                found.append(_Dataset(shown, shape, dtype, obj.chunks, True, where, onehot=True))  # one-hot booleans
                return
            if dtype.kind == "c" and dtype.itemsize in (8, 16) and shape is not None and math.prod(shape):
                found.append(_Dataset(shown, (*(shape or (1,)), 2), complex_parts(dtype), None, False, where))
                return
            sample = None
            if bytes_type(dtype) and one_per_row(shape):
                _register_filters(obj)  # (hdf5plugin's, before a value is read)
                sample = sampled_rows(obj)
                if holds_images(sample):  # encoded images, one a row: judged by the image checks
                    rows = (shape or (1,))[:1]
                    size = row_size(obj, sample)
                    found.append(
                        _Dataset(shown, rows, dtype, obj.chunks, False, where, read_as="images", value_bytes=size)
                    )
                    return
            if dtype.kind not in "fiu" and not numeric_fields and not array:
                unscanned = _unscanned_kind(dtype)
                if unscanned is None and dtype.kind == "V" and not dtype.names and dtype.subdtype is None:
                    unscanned = f"opaque bytes, {dtype.itemsize} each"  # h5py's np.void: binary blobs
                if unscanned is None and is_label_name(shown, self.config.labels) and _is_text(dtype):
                    unscanned = "class names as text: the label checks need integer class ids"
                    self._text_labels.append(f"{rel}:{shown}")
                if unscanned is not None:
                    not_scanned.append(f"{rel}:{shown} ({unscanned})")
                if (
                    shape is not None
                    and _plain_storage(obj, shape)
                    and self._filters_available(obj, rel, line, shown, partial)
                ):
                    through = _Dataset(shown, shape, dtype, obj.chunks, False, where, read_as="through")
                    through.value_bytes = row_size(obj, sample)
                    found.append(through)
                return
            if not self._filters_available(obj, rel, line, shown, partial):
                return
            if shape is None:  # a null dataspace (h5py.Empty): a placeholder that holds no value, by design
                seen.pop()  # (a file of placeholders only holds no data: empty-dataset, as one of groups only)
                return
            here = Location(path=rel, line=line, dataset=shown)
            if math.prod(shape) == 0 if shape else False:
                partial.add("S006", here.model_copy(update={"detail": f"shape {shape}"}))
                return
            if obj.is_virtual and not self._virtual_sources_readable(obj, path, here, partial):
                return
            if obj.id.get_create_plist().get_external_count() and not self._external_storage(obj, path, here, partial):
                return
            places = chunk_places(obj)
            if places is not None and places[0] is not None:
                why, ranges = places
                fill = f"the {_fill_text(obj).strip(' ()') or 'fill value'}"
                for start, stop in ranges or [(0, 0)]:
                    lost = f": {_ranges_text([(start, stop)])} have no chunk and read as {fill}" if stop else ""
                    detail = f"{why} (a damaged chunk B-tree){lost}, without an error"
                    partial.add("S002", here.model_copy(update={"index": start if stop else None, "detail": detail}))
            unwritten = never_written(obj) if places is None else [] if places[0] is not None else places[1]
            if unwritten:
                self._unwritten.append(f"{rel}:{shown} {_ranges_text(unwritten)}{_fill_text(obj)}")
            if numeric_fields:  # a table (pandas' format="table", PyTables): every numeric column
                for f in numeric_fields:
                    sub = field_dtype(dtype, f)
                    named = f"{shown}{field_text(f)}"
                    one = len(shape) == 1 and sub.shape == ()
                    chosen = self._label_field(named, f)
                    rows = (*(shape or (1,)), *sub.shape)
                    found.append(_Dataset(named, rows, sub.base, None, one and chosen, full, f))
                return
            if array:  # read as HDF5 hands them over: (N, ...) elements of shape S are (N, ..., *S) values
                base, inner = dtype.subdtype
                found.append(_Dataset(shown, (*(shape or (1,)), *inner), base, None, False, where))
                return
            if dtype.kind not in "fiu":
                return
            if (
                len(shape) == 1
                and dtype.itemsize == 1
                and not is_label_name(shown, self.config.labels)
                and file_image(obj)
            ):
                whole = _Dataset(shown, (), dtype, None, False, where, read_as="image")  # a file's bytes
                whole.value_bytes = shape[0]
                found.append(whole)
                return
            is_label = (
                is_label_name(shown, self.config.labels)
                and (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1) or file_label(shown, shape))
                and (bool(self.config.labels) or not is_coordinate(obj))
            )
            onehot = is_onehot_shape(shape) and is_label_name(shown, self.config.labels)
            found.append(_Dataset(shown, shape, dtype, obj.chunks, is_label, where, onehot=onehot))

        if visit_items is None:
            self._lean_visit(fh, visit, found, seen)
        else:
            visit_items(visit)
        for lost in getattr(visit_items, "lost", []):
            partial.add("S001", lost)
        return found, partial, not_scanned, bool(seen)

    @staticmethod
    def _filters_available(obj: h5py.Dataset, rel: str, line: int | None, shown: str, partial: Partial) -> bool:
        """Whether HDF5 has every filter of the dataset's pipeline; ``missing-filter`` when not."""
        unavailable = missing_filters(_filters(obj))
        if not unavailable:
            return True
        fid = unavailable[0]
        fname, package = FILTER_PACKAGES.get(fid, ("", "the filter's HDF5 plugin"))
        named = f"filter {fname} (id {fid})" if fname else f"filter id {fid}"
        detail = f"{named} is not available: install {package}"
        partial.add("S003", Location(path=rel, line=line, dataset=shown, detail=detail))
        return False

    def _label_field(self, named: str, f: FieldPath) -> bool:
        """Whether the compound field ``f`` (``named`` as reports name it) is named as labels: a field of the
        table itself, by the rule of datasets (``label``, ``y`` ...; or ``--labels``). A field of a nested compound
        is data whatever its name: ``pos['y']`` beside ``pos['x']`` is a coordinate, and read as class ids its
        values were label findings, its NaN no ``nan-value``."""
        if len(f) != 1:
            return False
        labels = self.config.labels
        return (is_label_name(named, labels) or f[0] == labels) if labels else f[0].lower() in LABEL_NAMES

    def _lean_visit(self, fh: h5py.File, visit: Any, found: list[_Dataset], seen: list[str]) -> None:
        """``fh.visititems(visit)``, where a small numeric dataset without attributes is described from its
        low-level handle (a few HDF5 calls: nothing else of it needs a look) and every other object is handed
        to ``visit``, as ``visititems`` hands it."""
        netcdf = "_NCProperties" in fh.attrs  # netCDF's default fill makes a float without attributes missing
        labels = self.config.labels
        fid = fh.id

        def each(raw: bytes, info: Any) -> None:
            if info.type != h5py.h5o.TYPE_DATASET:
                return
            if info.num_attrs == 0 and not netcdf:
                try:
                    small = self._small_dataset(fid, raw, labels)
                except (OSError, RuntimeError, ValueError, KeyError, TypeError):
                    small = None  # a type NumPy cannot hold, a damaged header: the general walk tells
                if small is not None:
                    seen.append(small.name[1:])
                    found.append(small)
                    return
            try:
                name: str | bytes = raw.decode("utf-8")
            except UnicodeDecodeError:
                name = raw
            visit(name, fh[name])

        h5py.h5o.visit(fid, each, info=True)

    @staticmethod
    def _small_dataset(fid: Any, raw: bytes, labels: str | None) -> _Dataset | None:
        """A small numeric dataset without attributes, read many at a time by the workers; None for any
        other (the general walk judges it)."""
        try:
            full = "/" + raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not full.isprintable() or "/_i_" in full:
            return None
        dsid = h5py.h5d.open(fid, raw)
        tid = dsid.get_type()
        kind = tid.get_class()
        if kind == h5py.h5t.INTEGER:
            key = (kind, tid.get_size(), tid.get_order(), tid.get_sign())
        elif kind == h5py.h5t.FLOAT:
            key = (kind, tid.get_size(), tid.get_order(), -1)
        elif kind == h5py.h5t.OPAQUE:
            return _opaque_image(fid, dsid, full, tid.get_size())
        else:
            return None
        known = _NUMERIC_TYPES.get(key)
        if known is None:
            dtype = tid.dtype
            known = _NUMERIC_TYPES[key] = (dtype, h5py.h5t.py_create(dtype))
        dtype, stored = known
        if dtype.kind not in "fiu" or not tid.equal(stored):  # (a 2-byte bfloat16 is no float16)
            return None
        space = dsid.get_space()
        if space.get_simple_extent_type() not in (h5py.h5s.SIMPLE, h5py.h5s.SCALAR):
            return None
        shape: tuple[int, ...] = space.shape
        if (len(shape) in (1, 2) or file_label(full, shape)) and is_label_name(full, labels):
            return None  # labels (class ids, one-hot rows), maybe: the general walk decides
        if len(shape) == 1 and dtype.itemsize == 1 and starts_like_image(dsid, shape[0], dtype):
            at = dsid.get_offset()  # an image file's bytes: where they lie, when contiguous
            if at is None:
                return None  # (chunked, compact: the general walk describes it)
            return _Dataset(full, (), dtype, None, False, read_as="image", value_bytes=shape[0], at=at)
        spec = small_spec(dsid, shape, dtype)
        if spec is None:
            return None
        return _Dataset(full, shape, dtype, spec[1], False, small=spec[0])

    def _note_external(self, fh: h5py.File, name: bytes, info: Any, rel: str) -> None:
        """External links are not followed (the linked file may lie anywhere): they are named as not scanned."""
        if info.type == h5py.h5l.TYPE_EXTERNAL:
            filename, target = fh.id.links.get_val(name)
            shown = printable("/" + object_name(name))
            self._unscanned.append(
                f"{rel}:{shown} (external link to {printable(object_name(filename))}:{printable(object_name(target))})"
            )

    def _virtual_sources_readable(self, obj: h5py.Dataset, path: Path, where: Location, partial: Partial) -> bool:
        """Check the files a virtual dataset maps: a missing one is S004 (HDF5 silently reads its part as the
        fill value, so the dataset is still scanned); one outside the data roots of a confined scan is S001, and
        the dataset is not read at all."""
        readable = True
        mapped: dict[str, set[str]] = {}
        for src in obj.virtual_sources():
            mapped.setdefault(src.file_name, set()).add(src.dset_name)
        for name in sorted(mapped):
            shown = printable(name)
            if name == ".":
                self._source_datasets(obj.file, path, sorted(mapped[name]), obj.fillvalue, where, partial)
                continue
            if "%b" in name:  # a file-name pattern of an unlimited virtual dataset: where it leads is not known
                if self.config.confine:
                    detail = f"virtual dataset maps files named {shown}, which may lie outside the data roots: not read"
                    partial.add("S001", where.model_copy(update={"detail": detail}))
                    readable = False
                continue
            found = vds_source_file(path, name)
            if found is None:
                detail = (
                    f"virtual dataset maps {shown}, which does not exist: "
                    f"HDF5 reads that part as the fill value ({obj.fillvalue})"
                )
                partial.add("S004", where.model_copy(update={"detail": detail}))
                continue
            refused = self.outside(found)
            if refused is not None:
                partial.add("S001", where.model_copy(update={"detail": f"virtual dataset maps {shown}: {refused}"}))
                readable = False
                continue
            try:
                with open_h5(found) as source:
                    self._source_datasets(source, found, sorted(mapped[name]), obj.fillvalue, where, partial)
            except OSError:
                continue  # an unreadable source file: reading the virtual dataset reports it
        return readable

    @staticmethod
    def _source_datasets(
        fh: h5py.File, path: Path, names: list[str], fill: Any, where: Location, partial: Partial
    ) -> None:
        """Source datasets a virtual dataset maps that are not in their file: HDF5 reads their part as the fill
        value, without a word (S004)."""
        for dset in names:
            try:
                present = isinstance(fh.get(h5_key(dset)), h5py.Dataset)
            except (OSError, RuntimeError, ValueError, KeyError):
                present = True  # a damaged object: reading it reports it
            if not present:
                detail = (
                    f"virtual dataset maps dataset {printable(dset)} of {printable(path.name)}, which has no such "
                    f"dataset: HDF5 reads that part as the fill value ({fill})"
                )
                partial.add("S004", where.model_copy(update={"detail": detail}))

    def _external_storage(self, obj: h5py.Dataset, path: Path, where: Location, partial: Partial) -> bool:
        """Check the external raw data files of a dataset; False when it must not be read. One shorter than the
        part of the dataset it holds: HDF5 reads the missing bytes as zeros, without a word (S002 for those
        rows). A missing one is missing-file naming it, and the dataset is not read. One outside the data roots
        of a confined scan is S001, and the dataset is not read at all (HDF5 would read whatever file it names)."""
        plist = obj.id.get_create_plist()
        rows = int(obj.shape[0]) if obj.shape else 1
        row_bytes = int(math.prod(obj.shape[1:])) * obj.dtype.itemsize
        at = 0
        for i in range(plist.get_external_count()):
            name, offset, size = plist.get_external(i)
            if size >= h5py.h5f.UNLIMITED:  # the last file holds the rest of the dataset
                size = max(0, rows * row_bytes - at)
            found = external_file(path, object_name(name))
            refused = self.outside(found) if found is not None else None
            if refused is not None:
                detail = f"external raw data file {printable(object_name(name))}: {refused}"
                partial.add("S001", where.model_copy(update={"detail": detail}))
                return False
            if found is None and size:  # the read would fail with HDF5's generic "can't open external raw data file"
                shown = printable(object_name(name))
                beside = not Path(object_name(name)).is_absolute() and (path.parent / object_name(name)).is_file()
                where_not = (
                    f"is not in the current folder ({printable(os.getcwd())}) nor under HDF5_EXTFILE_PREFIX, where "
                    "HDF5 looks; one lies beside the HDF5 file, read only from that folder or with "
                    "HDF5_EXTFILE_PREFIX='${ORIGIN}'"
                    if beside
                    else "does not exist (HDF5 looks under HDF5_EXTFILE_PREFIX, else in the current folder)"
                )
                detail = f"the external raw data file {shown} that holds this dataset's values {where_not}: not read"
                partial.add("S004", where.model_copy(update={"detail": detail}))
                return False
            if found is not None:
                held = max(0, min(size, found.stat().st_size - offset))
                if held < size and row_bytes:
                    first, last = (at + held) // row_bytes, min(rows, -(-(at + size) // row_bytes))
                    if first < last:
                        detail = (
                            f"{_rows_text(first, last)}: the external raw data file {printable(found.name)} holds "
                            f"{held:,} of its {size:,} bytes: HDF5 reads the rest as zeros (truncated?)"
                        )
                        partial.add("S002", where.model_copy(update={"index": first, "detail": detail}))
            at += size
        return True

    def _check_lengths(self, datasets: list[_Dataset], rel: str, line: int | None, partial: Partial) -> None:
        """Labels against the data beside them: the datasets of their group within a factor of 2 of their
        length, or named as the samples (``X``, ``features``: ``naming.lengths_differ``). Others further off are
        other tables (a mean image, class weights), not the samples these labels belong to; so are those named
        for another split (``X_test`` beside ``y_train``)."""
        for label in (d for d in datasets if (d.is_label or d.onehot) and d.shape):  # (a file's own label: none)
            group = label.name.rsplit("/", 1)[0]
            split = split_of(label.name)
            for data in datasets:
                if data.is_label or data.onehot or data.name.rsplit("/", 1)[0] != group or not data.shape:
                    continue
                other = split_of(data.name)
                if split is not None and other is not None and other != split:
                    continue
                if label.row_vector and label.rows == data.shape[-1]:  # MATLAB's samples × features, transposed
                    continue
                if lengths_differ(data.name, data.rows, label.name, label.rows):
                    partial.add(
                        "L001",
                        Location(
                            path=rel,
                            line=line,
                            dataset=data.name,
                            detail=f"{data.rows} samples but {label.name} has {label.rows} labels",
                        ),
                    )

    def _segments(
        self, ds: _Dataset, rel: str, line: int | None, stream_start: int, stream: str | None = None
    ) -> list[dict[str, Any]]:
        step = ds.chunks[0] if ds.chunks else 1
        per = shard_rows(ds.row_bytes, self.config.shard_bytes, self.config.block_bytes, step)
        if ds.role is not None:  # one sample (at most ROLE_MAX_BYTES): one segment, V005 judges it whole
            per = max(1, ds.rows)
        out = []
        for start in range(0, ds.rows, per):
            stop = min(ds.rows, start + per)
            out.append(
                {
                    "file": rel,
                    "line": line,
                    "dataset": ds.name,
                    "start": start,
                    "stop": stop,
                    "labels": ds.is_label,
                    "stream_start": stream_start + start,
                    "bytes": (stop - start) * ds.row_bytes,
                    **({"path": ds.path} if ds.path else {}),
                    **({"field": list(ds.field)} if ds.field is not None else {}),
                    **({"chunk_rows": step} if step > 1 else {}),
                    **({"small": ds.small} if ds.small is not None else {}),
                    **({"role": ds.role.spec()} if ds.role is not None else {}),
                    **({"onehot": True} if ds.onehot else {}),
                    **({"row_vector": True} if ds.row_vector else {}),
                    **({"read_as": ds.read_as} if ds.read_as else {}),
                    **({"labelled_by": ds.labelled_by} if ds.labelled_by else {}),
                    **({"at": ds.at} if ds.at is not None else {}),
                    **({"stream": stream} if stream is not None else {}),
                }
            )
        return out

    def split(self, shard: Shard) -> list[Shard]:
        segments = shard.spec["segments"]
        if len(segments) > 1:
            return [segment_shard(shard.id, [s]) for s in segments]
        seg = segments[0]
        if seg["stop"] - seg["start"] <= 1:
            return []
        mid = (seg["start"] + seg["stop"]) // 2
        images = seg.get("read_as") == "images"  # each decoded alone: a crash on one is found row by row
        if _one_chunk(seg) and not images:  # a chunk is decoded whole: its rows are not split further
            return []
        step = 1 if images else seg.get("chunk_rows", 1)
        mid = max(mid // step * step, (seg["start"] // step + 1) * step)
        halves = []
        for a, b in ((seg["start"], mid), (mid, seg["stop"])):
            part = dict(seg, start=a, stop=b, stream_start=seg["stream_start"] + a - seg["start"])
            if a != seg["start"]:
                part.pop("opens", None)
            part["bytes"] = seg["bytes"] * (b - a) // (seg["stop"] - seg["start"])
            halves.append(segment_shard(shard.id, [part]))
        return halves

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        seg = shard.spec["segments"][0]
        if seg.get("read_as") in ("images", "image") and seg["stop"] - seg["start"] == 1:
            why = reason if stalled(reason) else f"reading or decoding this image crashed the reader: {reason}"
            index = seg["start"] if seg["read_as"] == "images" else None
            place = Location(path=seg["file"], line=seg["line"], dataset=seg["dataset"], index=index)
            return "I003", place.model_copy(update={"detail": why})
        rows = _rows_text(seg["start"], seg["stop"])
        if _one_chunk(seg) and seg.get("chunk_rows", 1) > 1:
            rows += f" (one chunk of {seg['chunk_rows']:,} rows, decoded whole)"
        return "S002", Location(
            path=seg["file"],
            line=seg["line"],
            dataset=seg["dataset"],
            index=seg["start"],
            detail=f"{rows}: {reason}",
        )

    # -- reading --------------------------------------------------------------------------------

    def read(self, shard: Shard) -> Iterator[Any]:
        segments = shard.spec["segments"]
        scratch = Scratch()
        for rel, group in itertools.groupby(segments, key=lambda s: s["file"]):
            path = self.root / rel if not Path(rel).is_absolute() else Path(rel)
            try:
                fh = open_h5(path)
                fd = os.open(path, os.O_RDONLY)
            except (OSError, RuntimeError, ValueError) as exc:
                # once per file, whatever the number of its segments and of the shards they are in
                first = next((seg for seg in group if seg.get("opens")), None)
                if first is not None:
                    gone = isinstance(exc, FileNotFoundError) and not path.exists()
                    where = Location(path=rel, line=first["line"])
                    if gone:
                        yield ReadFailure("S004", where.model_copy(update={"detail": "the file no longer exists"}))
                    else:
                        yield ReadFailure("S001", where.model_copy(update={"detail": str(exc)}))
                continue
            try:
                small: list[dict[str, Any]] = []  # read many at a time, whatever lies between them
                held = 0
                for seg in group:
                    if "at" in seg:  # one image file's bytes, stored contiguous
                        yield _image_at(fd, seg)
                        continue
                    if not is_small(seg):
                        yield from _SegmentReader(self, fh, fd, seg).blocks()
                        continue
                    small.append(seg)
                    held += seg["bytes"]
                    if len(small) == BATCH_DATASETS or held >= BATCH_BYTES:
                        yield from read_small(fh, fd, small, self._reader(fh, fd), scratch)
                        small, held = [], 0
                if small:
                    yield from read_small(fh, fd, small, self._reader(fh, fd), scratch)
            finally:
                os.close(fd)
                fh.close()

    def _reader(self, fh: h5py.File, fd: int) -> Any:
        """The general reader of one segment of an open file."""
        return lambda seg: _SegmentReader(self, fh, fd, seg).blocks()


def _opaque_image(fid: Any, dsid: Any, full: str, size: int) -> _Dataset | None:
    """One image file's bytes as one opaque value stored contiguous (``np.void(f.read())``, h5py's way with
    binary data), for a worker to read at their offset; None for any other (the general walk judges it). Only
    its first bytes are read here (from the file: HDF5 reads an opaque value whole, and a blob may be large)."""
    space = dsid.get_space()
    at = dsid.get_offset()
    if space.get_simple_extent_type() != h5py.h5s.SCALAR or at is None or size < IMAGE_MIN_BYTES:
        return None
    head = os.pread(fid.get_vfd_handle(), IMAGE_MIN_BYTES, at)
    if image_kind(head, size, size) is None:
        return None
    return _Dataset(full, (), np.dtype(f"V{size}"), None, False, read_as="image", value_bytes=size, at=at)


def _image_at(fd: int, seg: dict[str, Any]) -> Any:
    """The image whose bytes lie at ``seg["at"]`` in the open file, as an item (``_SegmentReader._file_image``
    without opening the dataset)."""
    where = Location(path=seg["file"], line=seg["line"], dataset=seg["dataset"])
    data = os.pread(fd, seg["bytes"], seg["at"])
    if len(data) < seg["bytes"]:
        detail = f"unreadable: the file ends {len(data):,} bytes into the dataset's {seg['bytes']:,}"
        return ReadFailure("S002", where.model_copy(update={"detail": detail}), items=1)
    return EncodedImage(data=data, location=where, nbytes=len(data))


class _SegmentReader:
    """Reads one row range of one dataset as blocks, choosing the fastest faithful path."""

    def __init__(self, source: Hdf5Source, fh: h5py.File, fd: int, seg: dict[str, Any]) -> None:
        self.source = source
        self.fd = fd
        self.seg = seg
        self.rel: str = seg["file"]
        self.name: str = seg["dataset"]
        self.ds: h5py.Dataset = fh[h5_key(seg.get("path", self.name))]
        self.field: FieldPath | None = tuple(seg["field"]) if "field" in seg else None
        self.shape: tuple[int, ...] = tuple(int(n) for n in self.ds.shape) or (1,)
        self.dtype: np.dtype[Any] = self.ds.dtype
        if self.field is not None:
            column = field_dtype(self.ds.dtype, self.field)
            self.shape, self.dtype = (*self.shape, *column.shape), column.base
        elif self.ds.dtype.kind == "c":  # complex numbers: their real and imaginary parts, a last axis of 2
            self.shape, self.dtype = (*self.shape, 2), complex_parts(self.ds.dtype)
        elif self.ds.dtype.subdtype is not None:  # array elements: values of the element's shape
            base, inner = self.ds.dtype.subdtype
            self.shape, self.dtype = (*self.shape, *inner), base
        if seg.get("row_vector"):  # a MATLAB column vector of labels: HDF5's 1×N row
            self.shape = self.shape[1:]
        self.block_bytes = source.config.block_bytes
        self.index: ChunkIndex | None = None
        self.chunks: tuple[int, ...] | None = self.ds.chunks
        self.raw = aligned_buffer(0)
        """The stored (compressed) bytes of the chunk being decoded."""
        axis, channels = channel_layout(self.shape, channels_last=True)
        self.role: dict[str, Any] | None = seg.get("role")
        missing = declared_missing(self.ds, self.dtype) if self.field is None else ()
        self.meta = DatasetMeta(
            stats_key=f"{self.rel}::{self.name}",
            path=self.rel,
            dataset=self.name,
            dtype=str(self.dtype),
            shape=self.shape,
            channel_axis=axis,
            channels=channels,
            missing=missing,
        )
        if self.role is not None:  # one sample of a role: the role's statistics, its channels
            self.meta = role_meta(self.rel, self.role, str(self.dtype), self.shape if self.ds.shape else (), missing)

    def locate(self, start: int) -> Any:
        rel, name, line = self.rel, self.name, self.seg["line"]
        scalar = self.ds.shape == ()  # one value, no index (h5py refuses ``ds[0]`` on a scalar dataspace)

        def at(i: int) -> Location:
            return Location(path=rel, line=line, dataset=name, index=None if scalar else start + i)

        return at

    @property
    def row_bytes(self) -> int:
        return int(math.prod(self.shape[1:])) * self.dtype.itemsize

    def blocks(self) -> Iterator[Any]:
        for item in self._blocks():
            yield from self._bounded(item)
        if self.seg.get("onehot") and not self.seg["labels"]:  # one-hot rows: data, then labels (damage told once)
            yield from (item for item in self._label_blocks() if not isinstance(item, ReadFailure))

    def _bounded(self, item: Any) -> Iterator[Any]:
        """``item``, or a numeric block far larger than ``block_bytes`` in row slices of about that size: a
        compressed chunk is decoded whole (as HDF5 decodes it), and one of 400 MB took 1.8 GB as one block,
        where the checks' masks and float64 copies grow with the block. A dataset that is one sample stays
        whole (constant-sample judges it whole)."""
        if (
            not isinstance(item, NumericBlock)
            or self.role is not None
            or item.nbytes <= 2 * self.block_bytes
            or item.data.ndim == 0
            or item.data.shape[0] < 2
        ):
            yield item
            return
        rows = item.data.shape[0]
        step = max(1, self.block_bytes // max(1, item.nbytes // rows))
        start, rest = item.offset[0], item.offset[1:]
        for a in range(0, rows, step):
            part = item.data[a : a + step]
            yield NumericBlock(
                meta=item.meta,
                data=part,
                offset=(start + a, *rest),
                locate=self.locate(start + a),
                items=part.shape[0] if item.items else 0,
                nbytes=part.nbytes,
                chunk=item.chunk,
            )

    def _blocks(self) -> Iterator[Any]:
        _register_filters(self.ds)  # a fresh worker process registers plugin filters before any read
        if self.seg.get("read_as") == "images":
            yield from self._images()
            return
        if self.seg.get("read_as") == "image":
            yield from self._file_image()
            return
        if self.seg.get("read_as") == "through":
            yield from self._through()
            return
        if self.seg["labels"]:
            yield from self._label_blocks()
            return
        if self.field is not None:
            yield from self._sliced_blocks(self._column)
            return
        if self.ds.dtype.subdtype is not None:
            yield from self._sliced_blocks(lambda key: self.ds[key])
            return
        if self.ds.dtype.kind == "c":
            yield from self._sliced_blocks(lambda key: np.ascontiguousarray(self.ds[key]).view(self.dtype))
            return
        if self.role is not None:  # one sample: read whole, in one block (V005 judges it whole)
            yield from self._h5py_blocks()
            return
        plist = self.ds.id.get_create_plist()
        layout = plist.get_layout()
        chunks = self.ds.chunks
        if not stored_as_read(self.ds):  # a custom float (bfloat16 ...) that HDF5 converts: only HDF5 reads it
            yield from self._h5py_blocks()
            return
        if layout == h5py.h5d.CHUNKED and chunks is not None:
            chunk_bytes = math.prod(chunks) * self.dtype.itemsize
            if chunk_bytes >= OWN_CHUNK_MIN_BYTES and tuple(_filters(self.ds)) in OWN_PIPELINES:
                yield from self._own_chunks(tuple(chunks))
                return
        elif layout == h5py.h5d.CONTIGUOUS and plist.get_external_count() == 0 and self.ds.shape:
            yield from self._contiguous()
            return
        yield from self._h5py_blocks()

    def _column(self, key: Any) -> Any:
        """``key`` of the compound field read: h5py reads the top field alone (``fields``), a nested one is
        picked from it (``block['pos']['y']``: h5py names top fields only)."""
        assert self.field is not None
        return pick(self.ds.fields(self.field[0])[key], self.field[1:])

    # values that are no numbers (``hdf5_nonnumeric``) -----------------------------------------------

    def _images(self) -> Iterator[Any]:
        """Encoded images, one a row: each row's bytes go to the image checks."""
        for items in self._value_blocks(self._image_items):
            yield from items

    def _file_image(self) -> Iterator[Any]:
        """A 1-D dataset of bytes that is one encoded image file (``np.frombuffer(f.read(), np.uint8)``)."""
        where = Location(path=self.rel, line=self.seg["line"], dataset=self.name)
        try:
            data = np.asarray(self.ds[()]).tobytes()
        except (OSError, RuntimeError, ValueError) as exc:
            yield ReadFailure("S002", where.model_copy(update={"detail": f"unreadable: {_reason(exc)}"}), items=1)
            return
        yield EncodedImage(data=data, location=where, nbytes=len(data))

    def _through(self) -> Iterator[Any]:
        """Values read for damage only: nothing judges them, the rows count as read."""
        for items in self._value_blocks(lambda block, start: [Note(items=len(block), nbytes=block.nbytes)]):
            yield from items

    def _value_blocks(self, emit: Callable[[np.ndarray[Any, Any], int], list[Any]]) -> Iterator[list[Any]]:
        """The segment's rows a block at a time, as ``emit(block, first row)`` makes them items. A block that
        fails is read again chunk row by chunk row: a damaged chunk is ``corrupt-chunk`` for its rows."""
        start, stop = self.seg["start"], self.seg["stop"]
        per_row = self.seg["bytes"] // max(1, stop - start)  # (planned from sampled rows, for variable ones)
        chunk_rows = self.ds.chunks[0] if self.ds.chunks else 1
        variable = self.ds.dtype.kind == "O"  # sizes known once read: blocks of few rows, the largest seen
        most = stop
        if variable:  # (whole chunks where they fit)
            most = IMAGE_BLOCK_ROWS if self.seg.get("read_as") == "images" else VALUE_BLOCK_ROWS
            most = max(most // chunk_rows * chunk_rows, min(most, chunk_rows))
        values_per_row = math.prod(self.ds.shape[1:]) if self.ds.shape else 1
        r = start
        while r < stop:
            n = min(most, stop - r, block_rows(per_row, self.block_bytes, 1 if variable else chunk_rows))
            try:
                block = self._value_rows(r, r + n)
            except (OSError, RuntimeError, ValueError) as exc:  # (to the end of its chunk: one finding a chunk)
                n = min(stop, -(-(r + n) // chunk_rows) * chunk_rows) - r
                for item in self._isolate_rows(r, r + n, self._value_rows, emit, exc):
                    yield [item] if isinstance(item, ReadFailure) else item
                r += n
                continue
            if variable:
                per_row = max(per_row, values_per_row * max(map(value_size, block.reshape(-1)), default=1))
            yield emit(block, r)
            r += n

    def _value_rows(self, a: int, b: int) -> np.ndarray[Any, Any]:
        if self.ds.shape:
            return np.asarray(self.ds[a:b])
        one = np.empty(1, self.ds.dtype)  # a scalar dataset: one row
        one[0] = self.ds[()]
        return one

    def _image_items(self, block: np.ndarray[Any, Any], start: int) -> list[EncodedImage]:
        padded = self.ds.dtype.kind in "SV"  # fixed-size values: zero bytes fill each to the longest
        at = self.locate(start)
        labels = self._image_labels(start, len(block))
        return [
            EncodedImage(
                data=b"" if padded and blank(value) else value,
                location=at(i),
                label=labels[i] if labels else None,
                nbytes=len(value),
                padded=padded,
            )
            for i, value in enumerate(row_values(block, self.ds.dtype))
        ]

    def _image_labels(self, start: int, n: int) -> list[int] | None:
        """The class ids of images start..start+n from their label dataset (duplicate-image tells copies under two
        labels by them); None without one, or when it cannot be read (its own reader reports that)."""
        path = self.seg.get("labelled_by")
        if not path:
            return None
        try:
            values = np.asarray(self.ds.file[h5_key(path)][start : start + n]).reshape(-1)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError):
            return None
        return [int(v) for v in values] if len(values) == n else None

    # numeric data --------------------------------------------------------------------------------

    def _block(self, data: np.ndarray[Any, Any], offset: tuple[int, ...], chunk: str | None = None) -> NumericBlock:
        complete = all(o == 0 for o in offset[1:])
        return NumericBlock(
            meta=self.meta,
            data=data,
            offset=offset,
            locate=self.locate(offset[0]),
            items=data.shape[0] if complete else 0,
            nbytes=data.nbytes,
            chunk=chunk,
        )

    def _row_step(self) -> int:
        if self.role is not None:
            return max(1, self.shape[0])
        return block_rows(self.row_bytes, self.block_bytes, self.ds.chunks[0] if self.ds.chunks else 1)

    def _h5py_blocks(self) -> Iterator[Any]:
        start, stop = self.seg["start"], self.seg["stop"]
        if not self.ds.shape:
            try:
                yield self._block(np.asarray(self.ds[()]).reshape(1), (0,))
            except (OSError, RuntimeError, ValueError) as exc:
                yield self._failure(0, 1, None, exc)
            return
        step = self._row_step()
        buf = np.empty((min(step, stop - start), *self.shape[1:]), self.dtype)
        for r in range(start, stop, step):
            n = min(step, stop - r)
            try:
                self.ds.read_direct(buf, np.s_[r : r + n], np.s_[0:n])
            except (OSError, RuntimeError, ValueError) as exc:
                yield from self._isolate(r, r + n, exc)
                continue
            yield self._block(buf[:n], (r, *([0] * (len(self.shape) - 1))))

    def _sliced_blocks(self, read: Any) -> Iterator[Any]:
        """Rows read through HDF5 by slicing (a column of a compound dataset, array elements): ``read(key)``
        reads ``self.ds[key]`` as values of ``self.shape[1:]`` per row."""
        rest = (0,) * (len(self.shape) - 1)
        if not self.ds.shape:
            try:
                yield self._block(np.asarray(read(())).reshape(self.shape), (0, *rest))
            except (OSError, RuntimeError, ValueError) as exc:
                yield self._failure(0, 1, None, exc)
            return
        start, stop = self.seg["start"], self.seg["stop"]
        step = self._row_step()

        def rows(a: int, b: int) -> np.ndarray[Any, Any]:
            return np.asarray(read(np.s_[a:b])).reshape(b - a, *self.shape[1:])

        for r in range(start, stop, step):
            n = min(step, stop - r)
            try:
                data = rows(r, r + n)
            except (OSError, RuntimeError, ValueError) as exc:
                yield from self._isolate_rows(r, r + n, rows, self._row_block, exc, region=read)
                continue
            yield self._block(data, (r, *rest))

    def _row_block(self, data: np.ndarray[Any, Any], start: int) -> NumericBlock:
        return self._block(data, (start, *((0,) * (len(self.shape) - 1))))

    def _isolate_rows(
        self,
        start: int,
        stop: int,
        read: Any,
        emit: Any,
        exc: BaseException | None = None,
        region: Any = None,
    ) -> Iterator[Any]:
        """Re-read a failed row range one chunk row at a time (columns of a table, labels): the rows of a bad
        chunk are reported, the others scanned. ``read(a, b)`` reads rows a..b, ``emit(data, a)`` makes the item.
        With ``region(selection)``, a chunk row of data chunked along other axes too is read chunk by chunk."""
        chunks = self.ds.chunks
        if chunks is None:
            yield from self._bisect(start, stop, read, emit, exc or RuntimeError("read failed"))
            return
        rows = chunks[0]
        split = region is not None and tuple(chunks[1:]) != tuple(self.ds.shape[1:])
        for r in range(start - start % rows, stop, rows):
            a, b = max(r, start), min(r + rows, stop)
            try:
                data = read(a, b)
            except (OSError, RuntimeError, ValueError) as exc:
                if split:
                    yield from self._chunk_row(a, b, tuple(chunks), region)
                    continue
                yield self._failure(a, b, _chunk_label((r, *((0,) * (len(chunks) - 1))), tuple(chunks)), exc)
                continue
            yield emit(data, a)

    def _chunk_row(self, a: int, b: int, chunks: tuple[int, ...], region: Any) -> Iterator[Any]:
        """Rows a..b of data chunked along other axes too (complex parts, columns of a 2-D table), read chunk by
        chunk: a damaged chunk is named (the rows count once), the readable ones are scanned."""
        inner = self.shape[len(chunks) :]  # the axes the values add (complex parts, a column's shape)
        others = [range(0, s, c) for s, c in zip(self.ds.shape[1:], chunks[1:], strict=True)]
        counted = False
        for rest in itertools.product(*others):
            spans = zip(rest, chunks[1:], self.ds.shape[1:], strict=True)
            sel = (slice(a, b), *(slice(o, min(o + c, n)) for o, c, n in spans))
            try:
                data = np.asarray(region(sel))
            except (OSError, RuntimeError, ValueError) as exc:
                failure = self._failure(a, b, _chunk_label((a - a % chunks[0], *rest), chunks), exc)
                failure.items = 0 if counted else b - a  # the rows count once, whatever the number of bad chunks
                counted = True
                yield failure
                continue
            part = self._block(data.reshape(b - a, *(s.stop - s.start for s in sel[1:]), *inner), (a, *rest))
            part.items = 0  # counted with the failure
            yield part

    def _bisect(self, start: int, stop: int, read: Any, emit: Any, exc: BaseException) -> Iterator[Any]:
        """A failed row range of a dataset without chunks (virtual datasets, external or compact storage):
        halves are read again, down to single rows (within ``BISECT_READS`` reads), so the good rows are scanned
        and the bad ones reported (adjacent bad rows with the same reason as one range), with HDF5's reason."""
        pending: tuple[int, int, BaseException] | None = None  # the failed range not reported yet
        budget = BISECT_READS

        def flush() -> Iterator[Any]:
            nonlocal pending
            if pending is not None:
                yield self._failure(pending[0], pending[1], None, pending[2])
                pending = None

        def halves(a: int, b: int, error: BaseException) -> Iterator[Any]:
            nonlocal pending, budget
            if b - a <= 1 or budget <= 0:
                if pending is not None and pending[1] == a and str(pending[2]) == str(error):
                    pending = (pending[0], b, error)
                else:
                    yield from flush()
                    pending = (a, b, error)
                return
            mid = (a + b) // 2
            for lo, hi in ((a, mid), (mid, b)):
                budget -= 1
                try:
                    data = read(lo, hi)
                except (OSError, RuntimeError, ValueError) as again:
                    yield from halves(lo, hi, again)
                    continue
                yield from flush()
                yield emit(data, lo)

        yield from halves(start, stop, exc)
        yield from flush()

    def _h5py_rows(self, a: int, b: int) -> np.ndarray[Any, Any]:
        return np.asarray(self.ds[a:b])

    def _isolate(self, start: int, stop: int, exc: BaseException | None = None) -> Iterator[Any]:
        """Re-read a failed row range chunk by chunk: good chunks are scanned, bad ones reported."""
        chunks = self.ds.chunks
        if chunks is None:
            yield from self._bisect(start, stop, self._h5py_rows, self._row_block, exc or RuntimeError("read failed"))
            return
        for offset in self._chunk_offsets(tuple(chunks), start, stop):
            sel = tuple(slice(o, min(o + c, s)) for o, c, s in zip(offset, chunks, self.shape, strict=True))
            try:
                data = self.ds[sel]
            except (OSError, RuntimeError, ValueError) as exc:
                yield self._failure(offset[0], sel[0].stop, _chunk_label(offset, tuple(chunks)), exc)
                continue
            yield self._block(data, offset)

    def _chunk_offsets(self, chunks: tuple[int, ...], start: int, stop: int) -> Iterator[tuple[int, ...]]:
        others = [range(0, s, c) for s, c in zip(self.shape[1:], chunks[1:], strict=True)]
        for r in range(start, stop, chunks[0]):
            for rest in itertools.product(*others):
                yield (r, *rest)

    def _failure(self, start: int, stop: int, chunk: str | None, exc: BaseException) -> ReadFailure:
        return ReadFailure(
            "S002",
            Location(
                path=self.rel,
                line=self.seg["line"],
                dataset=self.name,
                index=start,
                chunk=chunk,
                detail=f"{_rows_text(start, stop)} unreadable: {_reason(exc)}",
            ),
            items=stop - start,
        )

    def _own_chunks(self, chunks: tuple[int, ...]) -> Iterator[Any]:
        """Raw chunks from the chunk index, decoded here (none, shuffle, deflate).

        Chunks that span whole rows are gathered, consecutive along the first axis, into blocks of about
        ``block_bytes``, so the per-block work is paid once per block, not once per chunk. Chunks that split
        rows are assembled into whole rows first (``_own_slabs``).
        """
        self.index = chunk_index(self.ds, self.ds.file.filename)
        if tuple(chunks[1:]) != tuple(self.shape[1:]):
            yield from self._own_slabs(chunks)
            return
        if self.index is not None and not _filters(self.ds):
            yield from self._adjacent_chunks(chunks, self.index)
            return
        yield from self._chunk_blocks(chunks, self.seg["start"], self.seg["stop"])

    def _adjacent_chunks(self, chunks: tuple[int, ...], index: ChunkIndex) -> Iterator[Any]:
        """Uncompressed whole-row chunks: a block of chunks that lie one after the other in the file (as a
        file written in order has them) is read with one ``preadv`` into a reused buffer, where the checks
        then find it in the CPU's cache (as fast as mapping the pages, measured with the statistics' four
        passes); any other block is read chunk by chunk (``_chunk_blocks``), which also isolates a chunk that
        cannot be read."""
        chunk_bytes = math.prod(chunks) * self.dtype.itemsize
        if chunk_bytes > 2 * self.block_bytes:
            yield from self._chunk_slices(chunks, index, chunk_bytes)
            return
        span = max(1, self.block_bytes // chunk_bytes) * chunks[0]
        buf = aligned_buffer(min(span, self.seg["stop"] - self.seg["start"]) * self.row_bytes)
        rest = (0,) * (len(self.shape) - 1)
        for r in range(self.seg["start"], self.seg["stop"], span):
            end = min(self.seg["stop"], r + span)
            where = [index.lookup((q, *rest))[0] for q in range(r, end, chunks[0])]
            first = where[0]
            want = (end - r) * self.row_bytes
            if (
                first is not None
                and all(at == first + k * chunk_bytes for k, at in enumerate(where))
                and os.preadv(self.fd, [buf[:want]], first) == want
            ):
                data = np.frombuffer(buf, self.dtype, count=want // self.dtype.itemsize)
                yield self._block(data.reshape(end - r, *self.shape[1:]), (r, *rest))
            else:
                yield from self._chunk_blocks(chunks, r, end)

    def _chunk_slices(self, chunks: tuple[int, ...], index: ChunkIndex, chunk_bytes: int) -> Iterator[Any]:
        """Uncompressed whole-row chunks of more than two blocks, read a block of rows at a time from where those
        rows lie in the chunk (in order, as in a contiguous dataset): the blocks ``_bounded`` would cut a whole
        chunk into, without holding the chunk (a 1 GB chunk took 1 GB). A chunk that is unwritten or does not
        lie whole in the file is read as a whole chunk (``_chunk_blocks``), which reports what it lacks."""
        step = max(1, self.block_bytes // max(1, self.row_bytes))
        start, stop = self.seg["start"], self.seg["stop"]
        buf = aligned_buffer(min(step, stop - start) * self.row_bytes)
        rest = (0,) * (len(self.shape) - 1)
        size = os.fstat(self.fd).st_size
        for q in range(start, stop, chunks[0]):
            end = min(stop, q + chunks[0])
            at = index.lookup((q, *rest))[0]
            if at is None or at + chunk_bytes > size:
                yield from self._chunk_blocks(chunks, q, end)
                continue
            for r in range(q, end, step):
                want = min(step, end - r) * self.row_bytes
                got = os.preadv(self.fd, [buf[:want]], at + (r - q) * self.row_bytes)
                if got != want:  # (the file shrank while it was read)
                    yield self._failure(r, end, _chunk_label((q, *rest), chunks), OSError("short read"))
                    break
                data = np.frombuffer(buf, self.dtype, count=want // self.dtype.itemsize)
                yield self._block(data.reshape(want // self.row_bytes, *self.shape[1:]), (r, *rest))

    def _chunk_blocks(self, chunks: tuple[int, ...], start: int, stop: int) -> Iterator[Any]:
        """Whole-row chunks of rows ``start``..``stop`` decoded one by one into blocks of about ``block_bytes``."""
        chunk_bytes = math.prod(chunks) * self.dtype.itemsize
        group = max(1, self.block_bytes // chunk_bytes)
        buf = aligned_buffer(group * chunk_bytes)
        filters = _filters(self.ds)
        rest = (0,) * (len(self.shape) - 1)
        filled, block_start = 0, start

        def flush() -> NumericBlock:
            rows = min(filled * chunks[0], self.shape[0] - block_start)
            data = np.frombuffer(buf, self.dtype, count=rows * self.row_bytes // self.dtype.itemsize)
            return self._block(data.reshape(rows, *self.shape[1:]), (block_start, *rest))

        for offset in self._chunk_offsets(chunks, start, stop):
            label = _chunk_label(offset, chunks)
            valid = tuple(slice(0, min(c, s - o)) for o, c, s in zip(offset, chunks, self.shape, strict=True))
            target = buf[filled * chunk_bytes : (filled + 1) * chunk_bytes]
            try:
                self._read_chunk(offset, target, filters, chunk_bytes)
            except (OSError, RuntimeError, ValueError, ZLIB_ERROR) as exc:
                if filled:
                    yield flush()
                yield self._failure(offset[0], offset[0] + valid[0].stop, label, exc)
                filled, block_start = 0, offset[0] + chunks[0]
                continue
            if group == 1:
                data = np.frombuffer(buf, self.dtype).reshape(chunks)
                yield self._block(data[valid], offset)
                block_start = offset[0] + chunks[0]
                continue
            filled += 1
            if filled == group:
                yield flush()
                filled, block_start = 0, offset[0] + chunks[0]
        if filled:
            yield flush()

    def _own_slabs(self, chunks: tuple[int, ...]) -> Iterator[Any]:
        """Chunks that split rows, assembled one chunk-row at a time into whole rows.

        A sample is judged once, whole, so a NaN row that spans several chunks is one sample (as h5py row blocks
        see it). When a chunk of the row range is damaged, the damaged chunks are failures and the readable ones
        are scanned on their own.
        """
        chunk_bytes = math.prod(chunks) * self.dtype.itemsize
        tmp = aligned_buffer(chunk_bytes)
        filters = _filters(self.ds)
        slab = np.empty((chunks[0], *self.shape[1:]), self.dtype)
        rest = (0,) * (len(self.shape) - 1)
        for r in range(self.seg["start"], self.seg["stop"], chunks[0]):
            rows = min(chunks[0], self.shape[0] - r)
            failed: list[tuple[tuple[int, ...], BaseException]] = []
            for offset in self._chunk_offsets(chunks, r, r + 1):
                try:
                    self._read_chunk(offset, tmp, filters, chunk_bytes)
                except (OSError, RuntimeError, ValueError, ZLIB_ERROR) as exc:
                    failed.append((offset, exc))
                    continue
                dst = tuple(slice(o, min(o + c, s)) for o, c, s in zip(offset, chunks, self.shape, strict=True))
                src = tuple(slice(0, d.stop - d.start) for d in dst)
                slab[(slice(0, rows), *dst[1:])] = np.frombuffer(tmp, self.dtype).reshape(chunks)[src]
            if not failed:
                yield self._block(slab[:rows], (r, *rest))
                continue
            bad = {offset for offset, _ in failed}
            for k, (offset, error) in enumerate(failed):
                failure = self._failure(r, r + rows, _chunk_label(offset, chunks), error)
                failure.items = rows if k == 0 else 0  # the rows count once, whatever the number of bad chunks
                yield failure
            for offset in self._chunk_offsets(chunks, r, r + 1):
                if offset in bad:
                    continue
                valid = tuple(slice(0, min(c, s - o)) for o, c, s in zip(offset, chunks, self.shape, strict=True))
                self._read_chunk(offset, tmp, filters, chunk_bytes)
                part = self._block(np.frombuffer(tmp, self.dtype).reshape(chunks)[valid].copy(), offset)
                part.items = 0  # counted with the failure
                yield part

    def _read_chunk(self, offset: tuple[int, ...], target: memoryview, filters: list[int], size: int) -> None:
        """Decode the chunk at ``offset`` into ``target`` (exactly ``size`` bytes); raises on damage."""
        if self.index is not None:
            at, stored, mask = self.index.lookup(offset)
        else:
            info = self.ds.id.get_chunk_info_by_coord(offset)
            at, stored, mask = info.byte_offset, info.size, info.filter_mask
        if at is None:  # never written: the fill value
            np.frombuffer(target, self.dtype)[:] = self.ds.fillvalue
            return
        if not filters:
            got = os.preadv(self.fd, [target], at)
            if got != size:
                raise OSError(f"chunk truncated: {got} of {size} bytes")
            return
        region = self._chunk_region(offset)
        if any(r.stop - r.start < c for r, c in zip(region, self.chunks or (), strict=True)):
            # A partial edge chunk: a writer may have stored it unfiltered (a flag of the dataset's layout,
            # H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS, that h5py does not expose). HDF5 knows: it reads these.
            self._read_chunk_through_hdf5(region, target)
            return
        if len(self.raw) < stored:
            self.raw = aligned_buffer(stored)
        got = os.preadv(self.fd, [self.raw[:stored]], at)  # a reused buffer: no fresh pages per chunk
        if got != stored:
            raise OSError(f"chunk truncated: {got} of {stored} stored bytes")
        try:
            self._decode_chunk(self.raw[:stored], target, filters, mask, size)
        except (ValueError, ZLIB_ERROR):  # HDF5 has the last word on a chunk this decoder cannot undo
            self._read_chunk_through_hdf5(region, target)

    def _chunk_region(self, offset: tuple[int, ...]) -> tuple[slice, ...]:
        """The part of the dataset the chunk at ``offset`` holds."""
        chunks = self.chunks or ()
        return tuple(slice(o, min(o + c, s)) for o, c, s in zip(offset, chunks, self.shape, strict=True))

    def _read_chunk_through_hdf5(self, region: tuple[slice, ...], target: memoryview) -> None:
        """The values of one chunk's region, decoded by HDF5, into the chunk-shaped ``target``."""
        values = self.ds[region]
        out = np.frombuffer(target, self.dtype).reshape(self.chunks or ())
        out[tuple(slice(0, n) for n in values.shape)] = values

    def _decode_chunk(self, data: Any, target: memoryview, filters: list[int], mask: int, size: int) -> None:
        """Undo the filters of one raw chunk into ``target``; raises ValueError or ZLIB_ERROR on damage."""
        shuffled = False
        for i in reversed(range(len(filters))):
            if mask & (1 << i):
                continue
            if filters[i] == FILTER_DEFLATE:
                data = deflate.zlib_decompress(data, size)  # libdeflate: 1.5x ISA-L on float data
            elif filters[i] == FILTER_SHUFFLE:
                shuffled = self.dtype.itemsize > 1
        if len(data) != size:
            raise ValueError(f"chunk decodes to {len(data)} bytes, expected {size}")
        out = np.frombuffer(target, np.uint8)
        if shuffled:  # HDF5's shuffle stores byte 0 of every value, then byte 1 ...: transpose back
            width = self.dtype.itemsize
            out.reshape(-1, width)[:] = np.frombuffer(data, np.uint8).reshape(width, -1).T
        else:
            out[:] = np.frombuffer(data, np.uint8)

    def _contiguous(self) -> Iterator[Any]:
        """Row blocks read with ``preadv`` into one reused buffer at the dataset's file offset; rows past the
        end of a truncated file are a failure."""
        base = self.ds.id.get_offset()
        if base is None:  # never written: every value is the fill value
            yield from self._h5py_blocks()
            return
        start, stop = self.seg["start"], self.seg["stop"]
        step = self._row_step()
        buf = aligned_buffer(min(step, stop - start) * self.row_bytes)
        rest = (0,) * (len(self.shape) - 1)
        for r in range(start, stop, step):
            n = min(step, stop - r)
            want = n * self.row_bytes
            got = os.preadv(self.fd, [buf[:want]], base + r * self.row_bytes)
            whole = got // self.row_bytes
            if whole:
                data = np.frombuffer(buf, self.dtype, count=whole * self.row_bytes // self.dtype.itemsize)
                yield self._block(data.reshape(whole, *self.shape[1:]), (r, *rest))
            if whole < n:
                yield self._failure(r + whole, r + n, None, OSError("beyond the end of the file (truncated?)"))
                return

    # labels -------------------------------------------------------------------------------------

    def _label_blocks(self) -> Iterator[Any]:
        start, stop = self.seg["start"], self.seg["stop"]
        onehot = bool(self.seg.get("onehot"))
        width = self.shape[1] if onehot else 1
        step = max(1, self.block_bytes // max(1, self.dtype.itemsize * width))
        source = self.ds.__getitem__ if self.field is None else self._column  # a table's label column

        def rows(a: int, b: int) -> np.ndarray[Any, Any]:
            if not self.ds.shape:  # one label (one group per sample): a scalar
                return np.asarray(source(())).reshape(1)
            if onehot:
                return np.asarray(source(np.s_[a:b])).reshape(b - a, width)
            if self.seg.get("row_vector"):
                return np.asarray(source(np.s_[0, a:b])).reshape(b - a)
            return np.asarray(source(np.s_[a:b])).reshape(b - a)

        for r in range(start, stop, step):
            n = min(step, stop - r)
            try:
                values = rows(r, r + n)
            except (OSError, RuntimeError, ValueError) as exc:
                yield from self._isolate_rows(r, r + n, rows, self._label_block, exc)
                continue
            yield self._label_block(values, r)

    def _label_block(self, values: np.ndarray[Any, Any], r: int) -> LabelBlock:
        if values.dtype.kind == "b":
            values = values.astype(np.uint8)  # False and True are classes 0 and 1
        return LabelBlock(
            stream=self.seg["stream"],
            labels=values,
            global_start=self.seg["stream_start"] + (r - self.seg["start"]),
            locate=self.locate(r),
            items=len(values) if self.seg["labels"] else 0,  # one-hot rows read as data too count once
            nbytes=values.nbytes if self.seg["labels"] else 0,
            onehot=bool(self.seg.get("onehot")),
        )
