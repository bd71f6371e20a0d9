"""Small HDF5 datasets, read many at a time (one group per sample, thousands of datasets per file).

Planning gives each such dataset's type, shape and, where its values lie in order in the file (contiguous
storage, one unfiltered chunk), their file offset: a worker reads those with ``preadv`` (datasets that follow
each other in the file in one read) without opening them in HDF5, the others (compact storage, several
chunks) with one low-level HDF5 read each, and yields them stacked by type and shape as ``NumericBatch``
items (``stacked`` judges them). A dataset that cannot be read this way (a short read, an HDF5 error) is
read again by the general reader, which reports the damage.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import h5py
import numpy as np

from ..buffers import ALIGN, aligned_buffer
from ..items import DatasetMeta, LabelBlock, Locate, NumericBatch
from ..location import Location
from ..statistics import channel_layout
from .hdf5_roles import role_meta

SMALL_BYTES = 1 << 20
"""Datasets up to this size are planned as small: read whole, many at a time."""
BATCH_DATASETS = 1024
"""Datasets per batch at most (the stacks of one type and shape are judged together)..."""
BATCH_BYTES = 32 << 20
"""... and bytes (their float copy for the statistics is up to 4 times this)."""
RUN_BYTES = 8 << 20
"""Bytes read with one ``preadv`` at most (datasets that follow each other in the file)."""
IOV_MAX = 1024
"""Buffers one ``preadv`` fills at most (Linux's limit)."""


def is_small(seg: dict[str, Any]) -> bool:
    """A segment planned as a small dataset and covering all of it (a split shard's half is not)."""
    small = seg.get("small")
    return small is not None and seg["start"] == 0 and seg["stop"] == (small["shape"][0] if small["shape"] else 1)


def _locate(rel: str, line: int | None, name: str, scalar: bool) -> Locate:
    def at(i: int) -> Location:
        return Location(path=rel, line=line, dataset=name, index=None if scalar else i)

    return at


class Scratch:
    """The page-aligned memory the stacks of one batch are read into, reused by the next batch (the engine
    holds no item while the source reads the next: fresh memory would cost a page fault every 4 KB)."""

    def __init__(self) -> None:
        self.buf = aligned_buffer(0)

    def take(self, nbytes: int) -> memoryview:
        if len(self.buf) < nbytes:
            self.buf = aligned_buffer(nbytes)
        return self.buf[:nbytes]


def read_small(
    fh: h5py.File,
    fd: int,
    segments: list[dict[str, Any]],
    fallback: Callable[[dict[str, Any]], Iterator[Any]],
    scratch: Scratch,
) -> Iterator[Any]:
    """The datasets of ``segments`` (small, of one file) as ``NumericBatch`` items; ``fallback(seg)`` reads a
    dataset this way cannot. Each dataset is read straight into its place in the stack of its type and shape
    (in ``scratch``): datasets that follow each other in the file with one ``preadv`` into their places."""
    groups: dict[tuple[str, tuple[int, ...], str], list[dict[str, Any]]] = {}
    for seg in segments:  # stacks of one type, shape and role (labels of one group per sample apart)
        small = seg["small"]
        role = seg.get("role")
        key = (small["dtype"], tuple(small["shape"]) or (1,), "" if role is None else role["name"])
        groups.setdefault(key, []).append(seg)
    failed: list[dict[str, Any]] = []
    places: list[tuple[int, memoryview, dict[str, Any], list[bool], int]] = []  # (at, place, seg, ok, index)
    stacks = []
    sizes = [len(group) * math.prod(shape) * np.dtype(dtype).itemsize for (dtype, shape, _), group in groups.items()]
    memory, used = scratch.take(sum(-(-n // ALIGN) * ALIGN for n in sizes)), 0
    for ((dtype, shape, _), members), size in zip(groups.items(), sizes, strict=True):
        stack = np.frombuffer(memory[used : used + size], dtype).reshape(len(members), *shape)
        used += -(-size // ALIGN) * ALIGN  # every stack page aligned: fast copies in
        ok = [True] * len(members)
        stacks.append((stack, members, ok))
        raw = stack.reshape(len(members), -1).view(np.uint8)
        for j, seg in enumerate(members):
            at = seg["small"]["at"]
            if at is None:  # compact, or chunks: HDF5 reads it
                try:
                    dsid = h5py.h5d.open(fh.id, seg["dataset"].encode("utf-8", "surrogateescape"))
                    dsid.read(h5py.h5s.ALL, h5py.h5s.ALL, stack[j].reshape(seg["small"]["shape"]))
                except (OSError, RuntimeError, ValueError, KeyError):
                    ok[j] = False
                continue
            places.append((at, raw[j].data, seg, ok, j))
    places.sort(key=lambda p: p[0])
    run: list[tuple[int, memoryview, dict[str, Any], list[bool], int]] = []
    run_bytes = 0

    def read_run() -> None:
        try:
            got = os.preadv(fd, [p[1] for p in run], run[0][0])
        except OSError:
            got = 0
        end = run[0][0] + got
        for at, place, _, ok, j in run:
            if at + len(place) > end:  # a short read (a truncated file): the general reader reports it
                ok[j] = False

    for place in places:
        if run and (place[0] != run[-1][0] + len(run[-1][1]) or run_bytes >= RUN_BYTES or len(run) >= IOV_MAX):
            read_run()
            run, run_bytes = [], 0
        run.append(place)
        run_bytes += len(place[1])
    if run:
        read_run()
    for stack, members, ok in stacks:
        if not all(ok):
            failed.extend(seg for seg, good in zip(members, ok, strict=True) if not good)
            keep = [j for j, good in enumerate(ok) if good]
            stack, members = stack[keep], [members[j] for j in keep]
        if members and members[0]["labels"]:
            yield from _label_blocks(stack, members)
        elif members:
            yield _batch(stack, members)
    for seg in failed:
        yield from fallback(seg)


def _follows(first: dict[str, Any], then: dict[str, Any]) -> bool:
    """Whether the label of ``then`` is the next one of ``first``'s stream."""
    return bool(then["stream"] == first["stream"] and then["stream_start"] == first["stream_start"] + 1)


def _label_blocks(stack: np.ndarray[Any, Any], members: list[dict[str, Any]]) -> Iterator[LabelBlock]:
    """The labels of one group per sample (a scalar ``label`` in every group), as blocks of consecutive
    positions of their stream; ``locate(i)`` names the dataset of the i-th."""
    values = stack.reshape(len(members))
    if values.dtype.kind == "b":
        values = values.astype(np.uint8)  # False and True are classes 0 and 1
    a = 0
    for b in range(1, len(members) + 1):
        if b < len(members) and _follows(members[b - 1], members[b]):
            continue
        run = members[a:b]

        def at(i: int, run: list[dict[str, Any]] = run) -> Location:
            return Location(path=run[i]["file"], line=run[i]["line"], dataset=run[i]["dataset"])

        yield LabelBlock(
            stream=run[0]["stream"],
            labels=values[a:b].copy(),
            global_start=run[0]["stream_start"],
            locate=at,
            items=b - a,
            nbytes=int(values[a:b].nbytes),
        )
        a = b


def _batch(stack: np.ndarray[Any, Any], members: list[dict[str, Any]]) -> NumericBatch:
    """The datasets of one type and shape, stacked."""
    shape = stack.shape[1:]
    axis, channels = channel_layout(shape, channels_last=True)
    dtype = str(stack.dtype)
    metas: list[DatasetMeta] = []
    locates: list[Locate] = []
    for seg in members:
        rel, name = seg["file"], seg["dataset"]
        locates.append(_locate(rel, seg["line"], name, not seg["small"]["shape"]))
        role = seg.get("role")
        if role is not None:  # one sample of a role
            metas.append(role_meta(rel, role, dtype, tuple(seg["small"]["shape"])))
            continue
        metas.append(
            DatasetMeta(
                stats_key=f"{rel}::{name}",
                path=rel,
                dataset=name,
                dtype=dtype,
                shape=shape,
                channel_axis=axis,
                channels=channels,
            )
        )
    return NumericBatch(metas=metas, data=stack, locates=locates, items=len(members) * shape[0], nbytes=stack.nbytes)


def small_spec(
    dsid: Any, shape: tuple[int, ...], dtype: np.dtype[Any]
) -> tuple[dict[str, Any], tuple[int, ...] | None] | None:
    """What a worker needs to read a small dataset without opening it (the file offset of its values when
    they are stored in order: contiguous data, one unfiltered chunk; else None: HDF5 reads it) and its chunk
    shape; None when it is not read as small: larger
    than ``SMALL_BYTES``, empty, or stored in a way the general reader judges (filters, external or virtual
    storage, storage never written)."""
    count = math.prod(shape)
    if not count or count * dtype.itemsize > SMALL_BYTES:
        return None
    at = dsid.get_offset()
    chunks = None
    if at is None:
        plist = dsid.get_create_plist()
        layout = plist.get_layout()
        if layout == h5py.h5d.CHUNKED:
            chunks = tuple(int(c) for c in plist.get_chunk())
            if plist.get_nfilters() or dsid.get_num_chunks() != math.prod(
                -(-n // c) for n, c in zip(shape, chunks, strict=True)
            ):
                return None
            if chunks == shape:  # one chunk holding the values in order: read like contiguous data
                info = dsid.get_chunk_info(0)
                if info.byte_offset is not None and info.size == count * dtype.itemsize:
                    at = info.byte_offset
        elif layout != h5py.h5d.COMPACT:
            return None
    elif dsid.get_storage_size() < count * dtype.itemsize:
        return None
    return {"at": at, "dtype": dtype.str, "shape": list(shape)}, chunks
