"""NumPy ``.npy`` files and ``.npz`` archives, alone or in a folder (``X_train.npy``, ``y_train.npy``,
``features.npz`` with members ``x`` and ``y``).

Planning reads each array's header only (``numpy.lib.format``: shape, dtype, Fortran order); nothing is ever
unpickled: an array of Python objects is named in a note, not scanned. Reading:

- ``.npy`` in C order: row blocks read with ``preadv`` at the data's offset into one reused buffer; a file split
  into shards by rows. Rows the header announces that the file does not hold (a truncated copy) are a
  ``corrupt-chunk`` finding naming them.
- ``.npy`` in Fortran order (stored column by column): read in file order, as blocks of whole columns (all rows of
  some columns) or, for long arrays, of parts of one column; one shard per array. Such a block holds part of each
  sample, as an HDF5 chunk of some channels does, so ``constant-sample`` does not judge these arrays (a note says
  so); every other check does.
- ``.npz`` members (stored, deflated, bzip2 or LZMA): streamed from their offset in the archive (``npy_zip``),
  one shard per member, and checked against their CRC-32 once read. A damaged member or archive is a finding
  naming the member.

Structured arrays are tables: each numeric field is scanned as a column ``['x']`` (HDF5 compound tables the same
way), and each numeric field of a nested one by its path, ``['pos']['y']`` (``npy_fields``); a field named like
labels is a label stream (a nested one is data: ``pos.y`` is a coordinate, no class). A 1-D array (or N×1) named
like labels (``y``, ``labels``, ``y_train`` ..., ``--labels NAME``) is a label stream, checked against the data
beside it (the same folder, or the same archive) for its length. An N×K one in C order (one-hot or multi-hot
rows of 0/1, ``to_categorical``) is a label stream of rows (``labels.tally_onehot``) and, but booleans, data too.
"""

from __future__ import annotations

import ast
import itertools
import math
import os
import struct
import tokenize
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.lib.format as npformat

from ..buffers import aligned_buffer
from ..errors import ConfigError
from ..items import DatasetMeta, LabelBlock, NumericBlock, ReadFailure
from ..labels import is_onehot_shape, label_tally
from ..location import Location
from ..partial import Partial
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
from .naming import LABEL_NAMES, is_label_name, lengths_differ, split_folder, split_of, split_stream
from .npy_fields import FieldPath, field_dtype, field_text, leaf_fields, pick
from .npy_files import NPY_MAGIC, ZIP_MAGIC, folder_arrays, is_numpy_source
from .npy_zip import METHODS, OTHER_METHODS, Member, MemberStream, listed_members, recovered_members
from .walk import LINK_OUT, UNLISTABLE, Outside

HEADER_MAX = 1 << 20
"""Largest ``.npy`` header read (numpy's own limit is 10,000 bytes unless the reader trusts the file)."""
HEADER_ERRORS = (
    ValueError,
    EOFError,
    SyntaxError,
    TypeError,
    KeyError,
    RecursionError,
    MemoryError,
    struct.error,
    zlib.error,
    tokenize.TokenError,
)
"""What ``numpy.lib.format`` (and a damaged member's stream) raise for a header that cannot be read."""
NOT_REGULAR = "not a regular file (a named pipe, socket or device named like a NumPy file): not read"


class _Reads(Protocol):
    def read(self, n: int, /) -> bytes: ...


def read_header(fp: _Reads) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """(shape, Fortran order, dtype) of the ``.npy`` that ``fp`` starts with; ``fp`` is left at its data."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a Python 2 header (``(20L, 4L)``): read, nothing to say
        return _read_header(fp)


def _read_header(fp: _Reads) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    version = npformat.read_magic(fp)  # type: ignore[arg-type]
    if version == (1, 0):
        shape, fortran, dtype = npformat.read_array_header_1_0(fp, max_header_size=HEADER_MAX)  # type: ignore[arg-type]
    elif version == (2, 0):
        shape, fortran, dtype = npformat.read_array_header_2_0(fp, max_header_size=HEADER_MAX)  # type: ignore[arg-type]
    elif version == (3, 0):  # version 2.0 with a UTF-8 header (field names beyond Latin-1)
        raw = fp.read(4)
        (length,) = struct.unpack("<I", raw) if len(raw) == 4 else (-1,)
        text = fp.read(length) if 0 <= length <= HEADER_MAX else b""
        if length < 0 or len(text) != length:
            raise ValueError("the header is cut short")
        header = ast.literal_eval(text.decode("utf-8"))
        if not isinstance(header, dict) or {"descr", "fortran_order", "shape"} - header.keys():
            raise ValueError(f"header is not a dict with descr, fortran_order and shape: {text[:80]!r}")
        shape, fortran, dtype = header["shape"], header["fortran_order"], npformat.descr_to_dtype(header["descr"])
    else:
        raise ValueError(f"unknown .npy format version {version[0]}.{version[1]}")
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"shape {shape!r} is no shape")
    return tuple(int(n) for n in shape), bool(fortran), np.dtype(dtype)


class _At:
    """A file read from an offset with ``pread`` (no shared file position between readers)."""

    def __init__(self, fd: int, pos: int = 0) -> None:
        self.fd, self.pos = fd, pos

    def read(self, n: int) -> bytes:
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data


@dataclass(frozen=True, slots=True)
class _Column:
    """What is scanned of an array: the whole of it (``field`` None) or one leaf field of a structured array,
    by its path (``("pos", "y")``; one name for a flat field)."""

    field: FieldPath | None
    label: bool
    onehot: bool = False
    """An N×K array named like labels: also read as rows of 0/1 labels (one-hot, multi-hot), besides as data."""


def _unscanned(dtype: np.dtype[Any]) -> str | None:
    """Why values of ``dtype`` hold no number to scan (None when they do)."""
    if dtype.hasobject:
        return "Python objects, stored as a pickle: not unpickled (unpickling runs code), not scanned"
    if dtype.kind in "fiucb":
        return None
    kinds = {"S": "bytes", "U": "text", "M": "dates", "m": "time deltas"}
    if dtype.kind in kinds:
        return kinds[dtype.kind]
    return f"opaque bytes, {dtype.itemsize} each" if dtype.kind == "V" and not dtype.names else f"type {dtype}"


def labels_option(labels: str | None) -> str | None:
    """``--labels`` for arrays: a file's name may keep its ``.npy`` (``y_train.npy`` names ``y_train``)."""
    return labels[:-4] if labels is not None and labels.lower().endswith(".npy") else labels


def columns(
    dtype: np.dtype[Any], shape: tuple[int, ...], name: str, labels: str | None, fortran: bool = False
) -> list[_Column]:
    """The columns scanned of an array named ``name`` (its path in the dataset, without ``.npy``): the array
    itself, or each numeric leaf field of a structured one (nested fields included); which of them are labels
    (an N×K array in C order named like labels: rows of 0/1 labels, and data). Empty: nothing to scan."""
    one = len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)
    if dtype.names:
        found = []
        for path, sub in leaf_fields(dtype):
            boolean = sub.base.kind == "b" and sub.shape == ()
            if (sub.base.kind not in "fiuc" or sub.hasobject) and not boolean:
                continue
            label = len(shape) == 1 and sub.shape == () and sub.base.kind in "fiub" and _label_field(name, path, labels)
            if sub.base.kind == "b" and not label:
                continue
            found.append(_Column(path, label))
        return found
    if _unscanned(dtype) is not None:
        return []
    label = one and dtype.kind in "fiub" and is_label_name(name, labels_option(labels))
    onehot = (
        is_onehot_shape(shape) and not fortran and dtype.kind in "fiub" and is_label_name(name, labels_option(labels))
    )
    if dtype.kind == "b" and not label and not onehot:
        return []  # booleans hold no NaN, no Inf, no overflow
    return [_Column(None, label, onehot)]


def _label_field(name: str, path: FieldPath, labels: str | None) -> bool:
    """Whether the field ``path`` of the table ``name`` is named as labels: a field of the table itself, by the
    rule of arrays (``label``, ``y`` ...; or ``--labels``, its name or the table's path and field). A field of a
    nested table is data whatever its name: ``pos['y']`` beside ``pos['x']`` is a coordinate, and read as class
    ids its values were label findings, its NaN no ``nan-value``."""
    if len(path) != 1:
        return False
    f = path[0]
    if labels:
        return is_label_name(f"{name}['{f}']", labels_option(labels)) or f == labels
    return f.lower() in LABEL_NAMES


@dataclass(slots=True)
class _Array(Rows):
    """One array, as planning found it."""

    rel: str
    member: str | None
    """The member's name in a ``.npz`` archive (without ``.npy``); None for a ``.npy`` file."""
    name: str
    """Its path in the dataset for the label rule: ``train/y_train`` (file), ``features/y`` (archive member)."""
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran: bool
    data_offset: int
    """Where the data starts: in the file, or in the member's bytes."""
    zipped: Member | None = None
    cols: list[_Column] = field(default_factory=list)

    @property
    def group(self) -> str:
        """The arrays beside it: its archive's members, or the files of its folder."""
        return self.rel if self.member is not None else self.rel.rsplit("/", 1)[0] if "/" in self.rel else ""

    @property
    def shown(self) -> str:
        return f"{self.rel}:{self.member}" if self.member is not None else self.rel

    @property
    def is_label(self) -> bool:
        return any(c.label for c in self.cols) and not self.dtype.names

    @property
    def is_onehot(self) -> bool:
        return any(c.onehot for c in self.cols)

    @property
    def base(self) -> str:
        """Its own name: the file's stem or the member's name (``y_train``)."""
        return self.name.rsplit("/", 1)[-1]

    @property
    def stream(self) -> str:
        """Its label stream: its name, after its split folder (``val/y``; see ``naming``)."""
        return split_stream(self.rel, self.base)


def stream_name(stream: str, column: FieldPath | None) -> str:
    """The label stream of an array's labels (its name: ``y_train``, ``y``) or of a label field (``t['y']``)."""
    return stream if column is None else stream + field_text(column)


def dataset_name(member: str | None, column: FieldPath | None) -> str | None:
    """What locations name as the dataset: the archive member, the field (``x['a']``, ``['a']`` in a
    ``.npy``, ``['pos']['y']`` nested), None for a ``.npy`` file's array."""
    return ((member or "") + (field_text(column) if column is not None else "")) or None


def _rows_text(start: int, stop: int) -> str:
    return f"rows {start}-{stop - 1}" if stop - start > 1 else f"row {start}"


class NumpySource(Source):
    """A ``.npy`` file, a ``.npz`` archive, or a folder holding them (searched recursively)."""

    kind = "numpy"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return is_numpy_source(path, outside)

    # -- planning -------------------------------------------------------------------------------

    def list_files(self, partial: Partial) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        found = folder_arrays(self.path, self.fenced)
        for link in found.links_out:
            partial.add("S001", Location(path=self.relative(Path(link)), detail=LINK_OUT))
        for folder in found.unlistable:
            partial.add("S001", Location(path=self.relative(Path(folder)), detail=UNLISTABLE))
        others = [(what, paths) for what, paths in (("HDF5", found.hdf5), ("image", found.images)) if paths]
        if others:
            counts = " and ".join(f"{len(paths)} {what}" for what, paths in others)
            named = "; ".join(listed_names([printable(self.relative(Path(p))) for p in paths]) for _, paths in others)
            partial.info["numpy.other_files"] = (
                f"{counts} file(s) below this folder not scanned ({named}; it was read as a folder of NumPy "
                "arrays): scan them on their own"
            )
        files: list[Path] = []
        for p in found.arrays:
            if os.path.isfile(p):
                files.append(Path(p))
            elif os.path.islink(p) and not os.path.exists(p):
                detail = f"a link to {os.readlink(p)}, which does not exist"
                partial.add("S004", Location(path=self.relative(Path(p)), detail=detail))
            elif os.path.exists(p):
                partial.add("S001", Location(path=self.relative(Path(p)), detail=NOT_REGULAR))
        return files

    def plan(self) -> Plan:
        partial = Partial(cap=self.config.max_locations)
        self._notes: dict[str, list[str]] = {"not_scanned": [], "fortran": [], "trailing": []}
        files = self.list_files(partial)
        arrays: list[_Array] = []
        for path in files:
            arrays.extend(self._describe(path, partial))
        labels = self.config.labels
        if labels and arrays and not any(c.label or c.onehot for a in arrays for c in a.cols):
            raise ConfigError(
                f"labels {labels!r}: no array of that name with one label per sample (shape N, N×1, or N×K one-hot) in "
                f"{self.path.name}; the label checks would not run"
            )
        self._check_lengths(arrays, partial)
        segments: list[dict[str, Any]] = []
        offsets: dict[str, int] = {}
        streams: dict[str, list[tuple[_Array, _Column]]] = {}
        for a in arrays:
            start = 0
            chosen = [c for c in a.cols if c.label or c.onehot]
            if chosen:
                start = offsets.get(a.stream, 0)
                offsets[a.stream] = start + a.rows
            for c in chosen:
                streams.setdefault(stream_name(a.stream, c.field), []).append((a, c))
            segments.extend(self._segments(a, start))
        for stream, parts in streams.items():
            first, col = parts[0]
            kind = (first.dtype if col.field is None else field_dtype(first.dtype, col.field)).kind
            width = first.shape[1] if col.onehot else None
            tally = label_tally(partial, stream, kind, self.config.run_threshold, width)
            if len({a.rel for a, _ in parts}) == 1:
                tally.path, tally.dataset = first.rel, dataset_name(first.member, col.field)
            else:  # arrays of one name in several files: their split folder's stream, or the dataset's
                tally.path, tally.dataset = split_folder(first.rel) or ".", stream_name(first.base, col.field)
        for key, text in (
            ("not_scanned", "{n} array(s) not scanned: {shown}"),
            (
                "fortran",
                "{n} array(s) stored in Fortran order (column by column), read column by column: "
                "constant-sample does not judge their samples: {shown}",
            ),
            ("trailing", "{n} file(s) hold bytes after the array's data, which numpy ignores: {shown}"),
        ):
            found = self._notes[key]
            if found:
                partial.info[f"numpy.{key}"] = text.format(n=len(found), shown=listed_names(found))
        shards = pack_segments(segments, self.config.shard_bytes)
        info = SourceInfo(
            kind=self.kind,
            path=str(self.path),
            root=str(self.root),
            files=len(files),
            items=sum(s["stop"] - s["start"] for s in segments),
            bytes=sum(s["bytes"] for s in segments),
        )
        return Plan(source=info, shards=shards, partial=partial)

    def _describe(self, path: Path, partial: Partial) -> list[_Array]:
        """The arrays of one file, findings for what cannot be read of it."""
        rel = self.relative(path)
        where = Location(path=rel)
        refused = self.outside(path)
        if refused is not None:
            partial.add("S001", where.model_copy(update={"detail": refused}))
            return []
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            partial.add("S001", where.model_copy(update={"detail": f"cannot be opened: {exc.strerror or exc}"}))
            return []
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                partial.add("S001", where.model_copy(update={"detail": "empty file (0 bytes)"}))
                return []
            first = os.pread(fd, 8, 0)
            if first.startswith(ZIP_MAGIC) or (path.suffix.lower() == ".npz" and not first.startswith(NPY_MAGIC)):
                return self._archive(path, rel, fd, size, partial)
            return self._npy(rel, fd, size, partial)
        except OSError as exc:
            partial.add("S001", where.model_copy(update={"detail": f"cannot be read: {exc.strerror or exc}"}))
            return []
        finally:
            os.close(fd)

    def _npy(self, rel: str, fd: int, size: int, partial: Partial) -> list[_Array]:
        where = Location(path=rel)
        reader = _At(fd)
        name = rel[:-4] if rel.lower().endswith(".npy") else rel
        try:
            shape, fortran, dtype = read_header(reader)
        except HEADER_ERRORS as exc:
            detail = f"not a readable .npy file: damaged header: {exc}"
            if not os.pread(fd, 6, 0).startswith(NPY_MAGIC):
                detail = f"not a .npy file: no NumPy signature (first bytes {os.pread(fd, 8, 0).hex(' ')})"
            partial.add("S001", where.model_copy(update={"detail": detail}))
            return []
        array = _Array(rel, None, name, shape, dtype, fortran, reader.pos)
        needed = math.prod(shape) * dtype.itemsize
        held = size - reader.pos
        if not dtype.hasobject:  # (text, dates and opaque bytes too: np.load fails on a short file of any type)
            if held > needed:
                self._notes["trailing"].append(f"{rel} ({held - needed:,} bytes)")
            elif held < needed:
                self._truncated(array, held, needed, partial)
        if not self._usable(array, partial):
            return []
        array.cols = columns(dtype, shape, name, self.config.labels, fortran)
        self._nothing_to_scan(array)
        return [array] if array.cols else []

    def _archive(self, path: Path, rel: str, fd: int, size: int, partial: Partial) -> list[_Array]:
        where = Location(path=rel)
        try:
            listed = listed_members(os.fspath(path), fd)
        except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as exc:
            recovered, stop = recovered_members(fd, size)
            found = (
                f"{len(recovered)} member(s) found by their local headers were scanned ({stop})"
                if recovered
                else f"no member could be found ({stop})"
            )
            detail = f"not a readable zip archive ({exc}; truncated?): {found}"
            partial.add("S001", where.model_copy(update={"detail": detail}))
            listed = list(recovered)
        else:
            if not listed:  # np.savez() with no array: np.load gives an empty mapping
                partial.add("S006", where.model_copy(update={"detail": "the archive holds no array"}))
        stem = rel[:-4] if rel.lower().endswith(".npz") else rel
        arrays: list[_Array] = []
        for member in self._read_by_numpy(rel, listed):
            if isinstance(member, tuple):
                partial.add("S001", Location(path=rel, dataset=member[0], detail=member[1]))
                continue
            shown = member.name[:-4] if member.name.endswith(".npy") else member.name
            here = Location(path=rel, dataset=shown)
            if member.encrypted:
                partial.add("S001", here.model_copy(update={"detail": "an encrypted member: numpy cannot read it"}))
                continue
            if member.method not in METHODS:  # np.load raises on it: a damaged field, or a writer numpy cannot read
                known = OTHER_METHODS.get(member.method)
                what = (
                    f"{member.method} ({known})"
                    if known
                    else f"{member.method}, which no zip writer uses (a damaged field?)"
                )
                detail = f"zip compression method {what}: numpy cannot read this member"
                partial.add("S001", here.model_copy(update={"detail": detail}))
                continue
            stream = MemberStream(fd, member, size)
            try:
                shape, fortran, dtype = read_header(stream)
            except HEADER_ERRORS as exc:
                if not member.name.endswith(".npy"):
                    self._notes["not_scanned"].append(f"{rel}:{member.name} (not a .npy member)")
                    continue
                detail = f"not a readable .npy member: damaged header: {exc}"
                partial.add("S001", here.model_copy(update={"detail": detail}))
                continue
            array = _Array(rel, shown, f"{stem}/{shown}", shape, dtype, fortran, stream.done, member)
            if not self._usable(array, partial):
                self._check_whole(stream, here, partial)  # (np.load fails on a damaged member of any type)
                continue
            # (a member shorter than its header says is reported by the reader, where its data ends)
            array.cols = columns(dtype, shape, array.name, self.config.labels, fortran)
            self._nothing_to_scan(array)
            if array.cols:
                arrays.append(array)
        return arrays

    def _read_by_numpy(self, rel: str, listed: list[Member | tuple[str, str]]) -> list[Member | tuple[str, str]]:
        """The members ``np.load`` reads: of several of one name (``zipfile`` writes a name twice, with a
        warning), the last, as ``np.load(...)['x']`` does; a member ``x`` before a member ``x.npy``. The others
        are named in a note."""
        chosen: dict[str, Member] = {}
        for member in listed:
            if isinstance(member, Member):
                key = member.name[:-4] if member.name.endswith(".npy") else member.name
                held = chosen.get(key)
                if held is None or held.name == member.name or member.name == key:
                    chosen[key] = member
        kept = {id(m) for m in chosen.values()}
        for member in listed:
            if isinstance(member, Member) and id(member) not in kept:
                key = member.name[:-4] if member.name.endswith(".npy") else member.name
                self._notes["not_scanned"].append(
                    f"{rel}:{key} (a member of the same name as another, {member.name!r} at byte "
                    f"{member.data_offset:,}: numpy reads only {chosen[key].name!r} at byte "
                    f"{chosen[key].data_offset:,})"
                )
        return [m for m in listed if not isinstance(m, Member) or id(m) in kept]

    def _usable(self, array: _Array, partial: Partial) -> bool:
        """Whether the array holds numbers to scan; notes or findings for those that do not."""
        dtype = array.dtype
        why = _unscanned(dtype) if dtype.hasobject or not dtype.names else None
        if dtype.names and why is None:
            skipped = [
                f"{field_text(path)} ({_unscanned(sub.base)})"
                for path, sub in leaf_fields(dtype)
                if sub.base.kind not in "fiucb"
            ]
            if skipped:
                self._notes["not_scanned"].append(f"{array.shown} fields {', '.join(skipped)}")
        if why is not None:
            self._notes["not_scanned"].append(f"{array.shown} ({why})")
            return False
        if math.prod(array.shape) == 0 and array.shape:
            where = Location(path=array.rel, dataset=array.member, detail=f"shape {array.shape}")
            partial.add("S006", where)
            return False
        if array.fortran and len(array.shape) >= 2:
            self._notes["fortran"].append(array.shown)
        return True

    def _check_whole(self, stream: MemberStream, here: Location, partial: Partial) -> None:
        """A member whose values are not scanned, read to its end all the same: cut short, or failing its CRC-32,
        it is a finding (``np.load`` raises on it), as a scanned member's damage is."""
        try:
            problem = stream.finish(self.config.block_bytes)
        except zlib.error as exc:
            problem = f"unreadable: damaged compressed data ({exc})"
        except OSError as exc:
            problem = f"unreadable: {exc.strerror or exc}"
        if problem is not None:
            partial.add("S002", here.model_copy(update={"detail": problem}))

    def _nothing_to_scan(self, array: _Array) -> None:
        """A note for an array of booleans (no label) or a table with no field left to scan: no silent 0."""
        if not array.cols:
            why = "booleans: no NaN, Inf or overflow to find" if not array.dtype.names else "no numeric field"
            self._notes["not_scanned"].append(f"{array.shown} ({why})")

    def _truncated(self, array: _Array, held: int, needed: int, partial: Partial) -> None:
        """A ``.npy`` file shorter than its header says: the rows it lacks are a finding, the others planned."""
        ends = "the file ends"
        held = max(0, held)
        if array.fortran and len(array.shape) >= 2:
            kept = held // max(1, array.rows * array.dtype.itemsize)
            detail = (
                f"{ends} after {held:,} of the {needed:,} data bytes its header announces (truncated?): stored column "
                f"by column (Fortran order), so every row misses its values from column {kept:,} on (columns "
                "counted in Fortran order); the whole columns before were scanned"
            )
            partial.add("S002", Location(path=array.rel, dataset=array.member, detail=detail))
            return
        whole = held // array.row_bytes
        detail = (
            f"{_rows_text(whole, array.rows)} missing: {ends} after {held:,} of the {needed:,} data bytes its "
            "header announces (truncated?)"
        )
        partial.add("S002", Location(path=array.rel, dataset=array.member, index=whole, detail=detail))
        array.shape = (whole, *array.shape[1:])  # only the rows the file holds are planned

    def _check_lengths(self, arrays: list[_Array], partial: Partial) -> None:
        """Labels against the arrays beside them (their archive's members, or their folder's files) within a
        factor of 2 of their length or named as the samples, and not named for another split, as for HDF5."""
        for label in (a for a in arrays if a.is_label or a.is_onehot):
            split = split_of(label.base)
            for data in arrays:
                if data.is_label or data.is_onehot or data.group != label.group or not data.shape:
                    continue
                other = split_of(data.base)
                if split is not None and other is not None and other != split:
                    continue
                if lengths_differ(data.base, data.rows, label.base, label.rows):
                    detail = f"{data.rows} samples but {label.shown} has {label.rows} labels"
                    partial.add("L001", Location(path=data.rel, dataset=data.member, detail=detail))

    def _segments(self, a: _Array, stream_start: int) -> list[dict[str, Any]]:
        base = {
            "file": a.rel,
            "member": a.member,
            "labels": a.is_label,
            "stream": a.stream,
            "shape": list(a.shape),
            **({"zip": a.zipped.spec()} if a.zipped is not None else {}),
        }
        whole = a.zipped is not None or (a.fortran and len(a.shape) >= 2)
        per = a.rows if whole else shard_rows(a.row_bytes, self.config.shard_bytes, self.config.block_bytes)
        out = []
        for start in range(0, a.rows, per):
            stop = min(a.rows, start + per)
            out.append(
                dict(
                    base, start=start, stop=stop, stream_start=stream_start + start, bytes=(stop - start) * a.row_bytes
                )
            )
        return out

    def split(self, shard: Shard) -> list[Shard]:
        segments = shard.spec["segments"]
        if len(segments) > 1:
            return [segment_shard(shard.id, [s]) for s in segments]
        seg = segments[0]
        if seg.get("zip") or seg["stop"] - seg["start"] <= 1 or (len(seg["shape"]) >= 2 and seg.get("fortran")):
            return []
        mid = (seg["start"] + seg["stop"]) // 2
        halves = []
        for a, b in ((seg["start"], mid), (mid, seg["stop"])):
            part = dict(seg, start=a, stop=b, stream_start=seg["stream_start"] + a - seg["start"])
            part["bytes"] = seg["bytes"] * (b - a) // (seg["stop"] - seg["start"])
            halves.append(segment_shard(shard.id, [part]))
        return halves

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        seg = shard.spec["segments"][0]
        rows = _rows_text(seg["start"], seg["stop"])
        return "S002", Location(path=seg["file"], dataset=seg["member"], index=seg["start"], detail=f"{rows}: {reason}")

    # -- reading --------------------------------------------------------------------------------

    def read(self, shard: Shard) -> Iterator[Any]:
        for rel, group in itertools.groupby(shard.spec["segments"], key=lambda s: s["file"]):
            path = self.root / rel
            segs = list(group)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                where = Location(path=rel, index=segs[0]["start"])
                if isinstance(exc, FileNotFoundError):
                    yield ReadFailure("S004", where.model_copy(update={"detail": "the file no longer exists"}))
                else:
                    yield ReadFailure("S001", where.model_copy(update={"detail": str(exc)}))
                continue
            try:
                size = os.fstat(fd).st_size
                for seg in segs:
                    yield from _SegmentReader(self, fd, size, seg).blocks()
            finally:
                os.close(fd)


class _SegmentReader:
    """Reads one row range of one array (a file, or an archive member) as blocks."""

    def __init__(self, source: NumpySource, fd: int, size: int, seg: dict[str, Any]) -> None:
        self.fd = fd
        self.seg = seg
        self.rel: str = seg["file"]
        self.member: str | None = seg["member"]
        self.block_bytes = source.config.block_bytes
        self.labels_option = source.config.labels
        self.size = size
        self.stream: MemberStream | None = None
        self.pos = 0
        self.error: str | None = None
        self.cut_reported = False
        try:
            if seg.get("zip"):
                self.stream = MemberStream(fd, Member.from_spec(seg["zip"]), size)
                self.shape, self.fortran, self.dtype = read_header(self.stream)
            else:
                at = _At(fd)
                self.shape, self.fortran, self.dtype = read_header(at)
                self.pos = at.pos
        except HEADER_ERRORS as exc:
            self.error = f"the header can no longer be read: {exc}"
            return
        planned = tuple(seg["shape"])
        if self.shape[1:] != planned[1:] or (self.shape[:1] < planned[:1]):
            self.error = f"the array changed since the scan started (shape {self.shape}, planned {planned})"

    def _where(self, start: int, stop: int, detail: str) -> ReadFailure:
        return ReadFailure(
            "S002",
            Location(path=self.rel, dataset=self.member, index=start, detail=f"{_rows_text(start, stop)} {detail}"),
            items=stop - start,
        )

    def blocks(self) -> Iterator[Any]:
        if self.error is not None:
            yield ReadFailure("S001", Location(path=self.rel, dataset=self.member, detail=self.error))
            return
        name = self.rel[:-4] if self.member is None else f"{self.rel[:-4]}/{self.member}"
        self.cols = columns(self.dtype, self.shape, name, self.labels_option, self.fortran)
        self.metas = {c.field: self._meta(c) for c in self.cols if not c.label and self.dtype.kind != "b"}
        self.row_shape = self.shape[1:] if self.shape else ()
        self.per_row = int(math.prod(self.row_shape))
        self.row_bytes = self.per_row * self.dtype.itemsize
        try:
            if self.fortran and len(self.shape) >= 2:
                yield from self._fortran()
            else:
                yield from self._rows()
        except zlib.error as exc:
            yield self._where(self.seg["start"], self.seg["stop"], f"unreadable: damaged compressed data ({exc})")
            return
        except OSError as exc:
            yield self._where(self.seg["start"], self.seg["stop"], f"unreadable: {exc.strerror or exc}")
            return
        if self.stream is not None and not self.cut_reported:  # a member is read whole: its CRC can be checked
            problem = self.stream.finish(self.block_bytes)
            if problem is not None:
                yield ReadFailure("S002", Location(path=self.rel, dataset=self.member, detail=problem))

    def _meta(self, col: _Column) -> DatasetMeta:
        dtype = self.dtype if col.field is None else field_dtype(self.dtype, col.field)
        base = dtype.base if col.field is not None else dtype
        inner = dtype.shape if col.field is not None else ()
        shape = (*(self.shape or (1,)), *inner)
        if base.kind == "c":
            shape, base = (*shape, 2), complex_parts(base)
        axis, channels = channel_layout(shape, channels_last=True)
        dataset = dataset_name(self.member, col.field) or ""
        return DatasetMeta(
            stats_key=f"{self.rel}::{dataset}",
            path=self.rel,
            dataset=dataset,
            dtype=str(base),
            shape=shape,
            channel_axis=axis,
            channels=channels,
        )

    def locate(self, start: int, col: FieldPath | None = None) -> Any:
        rel, scalar, dataset = self.rel, not self.shape, dataset_name(self.member, col)

        def at(i: int) -> Location:
            return Location(path=rel, dataset=dataset, index=None if scalar else start + i)

        return at

    def _items(self, records: np.ndarray[Any, Any], offset: tuple[int, ...], nbytes: int) -> Iterator[Any]:
        """The items of a block of the array: one per scanned column. Only the first counts the block's samples
        and bytes (progress), and only when it starts at the first column."""
        items = records.shape[0] if all(o == 0 for o in offset[1:]) else 0
        for col in self.cols:
            data = records if col.field is None else pick(records, col.field)
            if col.onehot:  # whole rows (C order): the rows as labels, then (but booleans) as data
                yield LabelBlock(
                    stream=self.seg["stream"],
                    labels=data,
                    global_start=self.seg["stream_start"] + offset[0] - self.seg["start"],
                    locate=self.locate(offset[0]),
                    items=items,
                    nbytes=nbytes,
                    onehot=True,
                )
                items = nbytes = 0
                if data.dtype.kind == "b":
                    continue
            if col.label:
                values = np.ascontiguousarray(data).reshape(-1)
                if values.dtype.kind == "b":
                    values = values.astype(np.uint8)  # False and True are classes 0 and 1
                yield LabelBlock(
                    stream=stream_name(self.seg["stream"], col.field),
                    labels=values,
                    global_start=self.seg["stream_start"] + offset[0] - self.seg["start"],
                    locate=self.locate(offset[0], col.field),
                    items=items,
                    nbytes=nbytes,
                )
            else:
                meta = self.metas[col.field]
                if data.dtype.kind == "c":
                    data = np.ascontiguousarray(data).view(complex_parts(data.dtype)).reshape(*data.shape, 2)
                elif col.field is not None or not data.flags.c_contiguous:
                    data = np.ascontiguousarray(data)
                full = (*offset, *((0,) * (len(meta.shape) - len(offset))))
                yield NumericBlock(
                    meta=meta,
                    data=data,
                    offset=full,
                    locate=self.locate(offset[0], col.field),
                    items=items,
                    nbytes=nbytes,
                )
            items = nbytes = 0

    def _rows(self) -> Iterator[Any]:
        start, stop = self.seg["start"], self.seg["stop"]
        step = block_rows(self.row_bytes, self.block_bytes)
        rest = (0,) * max(0, len(self.shape) - 1)
        # a member is one segment, read from its start; a file's rows are read at their offset
        buf = None if self.stream is not None else aligned_buffer(min(step, stop - start) * self.row_bytes)
        for r in range(start, stop, step):
            n = min(step, stop - r)
            want = n * self.row_bytes
            if buf is not None:
                got = os.preadv(self.fd, [buf[:want]], self.pos + r * self.row_bytes)
                raw: bytes | memoryview = buf
            else:
                assert self.stream is not None
                raw = self.stream.read(want)
                got = len(raw)
            whole = got // self.row_bytes if self.row_bytes else n
            if whole:
                records = np.frombuffer(raw, self.dtype, count=whole * self.per_row)
                yield from self._items(records.reshape(whole, *self.row_shape), (r, *rest), whole * self.row_bytes)
            if whole < n:
                yield self._cut(r + whole, stop)
                return

    def _cut(self, start: int, stop: int) -> ReadFailure:
        if self.stream is None:
            return self._where(start, stop, "missing: beyond the end of the file (truncated?)")
        self.cut_reported = True
        why = "the archive ends inside this member (truncated?)" if self.stream.cut else DATA_ENDS_EARLY
        return self._where(start, stop, f"missing: {why}")

    def _fortran(self) -> Iterator[Any]:
        """Blocks in file order of an array stored column by column: whole leading axes where they fit in a
        block, else parts of one column; each block is contiguous in the file."""
        shape, itemsize = self.shape, self.dtype.itemsize
        available = (self.size - self.pos) if self.stream is None else None
        block = self.block_bytes
        if available is not None and available < math.prod(shape) * itemsize:
            block = min(block, shape[0] * itemsize)  # a truncated file: each whole column it holds is scanned
        pos = 0
        for offset, extent in fortran_blocks(shape, itemsize, block):
            count = int(math.prod(extent))
            want = count * itemsize
            if available is not None and pos + want > available:
                return  # the plan reported the truncation
            raw = os.pread(self.fd, want, self.pos + pos) if self.stream is None else self.stream.read(want)
            pos += want
            if len(raw) < want:
                if self.stream is not None:
                    self.cut_reported = True
                    why = "the archive ends inside this member" if self.stream.cut else DATA_ENDS_EARLY
                    yield ReadFailure(
                        "S002",
                        Location(
                            path=self.rel,
                            dataset=self.member,
                            detail=f"{why} (Fortran order: every row misses its last values)",
                        ),
                    )
                return
            values = np.frombuffer(raw, self.dtype, count=count).reshape(extent, order="F")
            yield from self._items(values, offset, want)


DATA_ENDS_EARLY = (
    "the member's compressed data is damaged: it decodes to less than its size (np.load fails on its CRC-32, and "
    "the rows before the end may hold damaged values too)"
)
"""Why a member whose archive is whole decodes short: its compressed data ends early, damaged."""


def fortran_blocks(
    shape: tuple[int, ...], itemsize: int, block_bytes: int
) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(offset, extent) of the blocks of a Fortran-order array in file order, each at most ``block_bytes``
    (or one value) and contiguous in the file: the leading axes that fit whole, a range along the next one,
    single indices along the rest."""
    cover, m = 1, 0
    while m < len(shape) and cover * shape[m] * itemsize <= block_bytes:
        cover *= shape[m]
        m += 1
    if m == len(shape):
        yield (0,) * len(shape), shape
        return
    step = max(1, block_bytes // (cover * itemsize))
    later = shape[m + 1 :]
    for idx in itertools.product(*(range(n) for n in reversed(later))):
        rest = tuple(reversed(idx))
        for a in range(0, shape[m], step):
            n = min(step, shape[m] - a)
            yield (*((0,) * m), a, *rest), (*shape[:m], n, *((1,) * len(rest)))


__all__ = ["NumpySource", "columns", "fortran_blocks", "read_header"]
