"""Planning from the B-tree's own pages, read from the file: the key ranges without walking every key.

A cursor walk over the keys costs almost as much as reading the values: LMDB touches each record's overflow
page even when only keys are asked for. The tree itself knows more cheaply: the meta page names the root,
branch pages list their children, and each leaf page's header says how many keys it holds. Reading the
branch pages and one page per leaf (about one page per 150 records of Caffe-sized values) gives exact
record counts and the first and last key of every leaf, so ranges can be cut at leaf boundaries, balanced by
count.

The pages are read with plain file reads and parsed with bounds checks: a damaged or unexpected page can
only make this return None, never crash. Anything it does not fully understand (another format version, a
32-bit build, sorted duplicates, a count that does not add up, a page past the end of the file) also returns
None, and the caller walks the keys with LMDB in a child process instead.

Format (LMDB 0.9, 64-bit): a page starts with its number (8 bytes), 2 pad bytes, flags (2), and ``lower``
and ``upper`` (2 + 2): ``(lower - 16) / 2`` nodes, whose offsets follow the header. A branch node is
``lo, hi, flags, ksize`` (2 bytes each: the child's page number is ``lo | hi << 16 | flags << 32``) then the
key; a leaf node is ``size lo, size hi, flags, ksize`` then the key. The meta pages (0 and 1) hold the
magic, the version, and the free and main databases' roots, depth, page counts and record count; the one
with the larger transaction id is current.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = 0xBEEFC0DE
VERSION = 1
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2, P_SUBP = 0x01, 0x02, 0x04, 0x08, 0x20, 0x40
HEADER = 16
TRANSIENT = 0x10 | 0x4000 | 0x8000
"""Page flags LMDB uses in memory only (dirty, loose, keep): ignored when they linger on disk."""
META = struct.Struct("<IIQQ48s48sQQ")
DB = struct.Struct("<IHHQQQQQ")
DB_ENTRIES = 6
"""md_entries' place in an unpacked ``DB``."""
INVALID = (1 << 64) - 1
PAST_THE_END, NOT_OVERFLOW, BAD_NODE = 1, 2, 3
F_SUBDATA = 0x02
DB_FLAGS = 0x7E
"""Every flag a database record may carry (reverse key, sorted duplicates, integer keys ...)."""
DAMAGE = {
    BAD_NODE: "its node in the leaf page is damaged (offset, key size or flags out of bounds)",
    PAST_THE_END: "its node puts the value past the end of the file (a damaged size or page number)",
    NOT_OVERFLOW: "the page its node names for the value is no overflow page (a damaged page number or page)",
}
MAX_PAGES = 1 << 22
"""Give up (and walk instead) on trees of more branch and leaf pages than this."""


@dataclass(slots=True)
class Leaf:
    pgno: int
    count: int
    first: bytes
    last: bytes
    low: bytes = b""
    """The branch key that leads to this leaf: its keys sort at or after it, and the previous leaf's before."""


@dataclass(slots=True)
class Tree:
    psize: int
    entries: int
    depth: int
    last_pgno: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    leaves: list[Leaf] = field(default_factory=list)

    @property
    def meta(self) -> dict[str, int]:
        """The numbers ``env.stat()`` and ``env.info()`` would give."""
        return {
            "psize": self.psize,
            "entries": self.entries,
            "depth": self.depth,
            "last_pgno": self.last_pgno,
            "branch_pages": self.branch_pages,
            "leaf_pages": self.leaf_pages,
            "overflow_pages": self.overflow_pages,
        }


class _Unreadable(Exception):
    """Something in the file this reader does not vouch for: walk the keys instead."""


def read_tree(path: Path) -> Tree | None:
    """The main database's leaves in key order, or None when the file is not one this reader fully knows."""
    try:
        with path.open("rb") as fh:
            return _Reader(fh.fileno(), os.fstat(fh.fileno()).st_size).tree()
    except (OSError, _Unreadable, struct.error, IndexError, ValueError):
        return None


def overlooked_meta(path: Path) -> tuple[int, int, int] | None:
    """(txnid of the meta page LMDB uses, txnid and record count of the other one) when the one in use
    describes an empty database and the other one records: a damaged transaction id makes LMDB open the
    stale, empty state, and the records look gone. None otherwise (or when the meta pages cannot be read)."""
    try:
        with path.open("rb") as fh:
            reader = _Reader(fh.fileno(), os.fstat(fh.fileno()).st_size)
            metas = reader.metas()
    except (OSError, _Unreadable, struct.error):
        return None
    if len(metas) != 2:
        return None
    # LMDB writes transaction t to meta page t & 1: (txnid, free, main, last page, meta page index)
    chosen = picked(metas)
    used, other = (*metas[chosen], chosen), (*metas[1 - chosen], 1 - chosen)
    if used[2][DB_ENTRIES] != 0 or other[2][DB_ENTRIES] == 0 or (other[3] + 1) * reader.psize > reader.size:
        return None
    if used[0] - other[0] == 1 and used[0] & 1 == used[4]:
        return None  # the newest transaction emptied the database: a real deletion, not damage
    return used[0], other[0], other[2][DB_ENTRIES]


def damaged_meta(path: Path) -> str | None:
    """Why LMDB refuses the environment when its second meta page is damaged (``mdb_env_read_header`` checks
    both pages: MDB_INVALID), None when both read as meta pages (or the first does not: LMDB's own error then
    says why). dscan then reads the state the first meta page records, an older transaction's."""
    try:
        with path.open("rb") as fh:
            reader = _Reader(fh.fileno(), os.fstat(fh.fileno()).st_size)
            metas = reader.metas()
            if len(metas) == 2 or reader.size < 2 * reader.psize:
                return None
            txnid = metas[0][0]
    except (OSError, _Unreadable, struct.error):
        return None
    return (
        f"damaged meta page: page 1 is no LMDB meta page, and LMDB refuses the environment (MDB_INVALID); "
        f"the records scanned are those of page 0's transaction {txnid:,}, an older state"
    )


def main_flags(path: Path) -> int | None:
    """The main database's flags in the meta page LMDB opens (0: keys in bytewise order, no duplicates), or
    None when the meta pages cannot be read."""
    try:
        with path.open("rb") as fh:
            metas = _Reader(fh.fileno(), os.fstat(fh.fileno()).st_size).metas()
    except (OSError, _Unreadable, struct.error):
        return None
    return int(metas[picked(metas)][2][1])


def picked(metas: list[Any]) -> int:
    """The meta page LMDB opens (``mdb_env_pick_meta``): page 1 only when its transaction id is higher, so
    page 0 when the two are equal."""
    return 1 if len(metas) == 2 and metas[0][0] < metas[1][0] else 0


class _Reader:
    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.psize = 0
        self.pages = 0

    def _meta(self, data: bytes) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
        flags = struct.unpack_from("<H", data, 10)[0]
        magic, version, _addr, _mapsize, free, main, last_pgno, txnid = META.unpack_from(data, HEADER)
        if not flags & P_META or magic != MAGIC or version != VERSION:
            raise _Unreadable("not an LMDB 0.9 meta page")
        return txnid, DB.unpack(free), DB.unpack(main), last_pgno

    def metas(self) -> list[tuple[int, tuple[int, ...], tuple[int, ...], int]]:
        """The meta pages that read as such, in page order (the first must); sets ``psize``."""
        first = os.pread(self.fd, HEADER + META.size, 0)
        if len(first) < HEADER + META.size:
            raise _Unreadable("too short")
        metas = [self._meta(first)]
        psize = metas[0][1][0]  # the free database's md_pad holds the page size
        if psize < 512 or psize > 1 << 16 or psize & (psize - 1):
            raise _Unreadable("page size")
        self.psize = psize
        second = os.pread(self.fd, HEADER + META.size, psize)
        if len(second) == HEADER + META.size:
            with contextlib.suppress(_Unreadable):
                metas.append(self._meta(second))
        return metas

    def tree(self) -> Tree:
        metas = self.metas()
        psize = self.psize
        _txnid, _free, main, last_pgno = metas[picked(metas)]
        _pad, flags, depth, branch_pages, leaf_pages, overflow_pages, entries, root = main
        if flags != 0:
            raise _Unreadable("database flags (sorted duplicates, reverse or integer keys)")
        if (last_pgno + 1) * psize > self.size:
            raise _Unreadable("truncated")
        tree = Tree(psize, entries, depth, last_pgno, branch_pages, leaf_pages, overflow_pages)
        if root == INVALID:
            if entries:
                raise _Unreadable("records but no root")
            return tree
        if branch_pages + leaf_pages > MAX_PAGES:
            raise _Unreadable("too many pages")
        self._visit(root, depth, tree.leaves)
        if sum(leaf.count for leaf in tree.leaves) != entries or len(tree.leaves) != leaf_pages:
            raise _Unreadable("counts do not add up")
        return tree

    def _page(self, pgno: int) -> tuple[bytes, int, int]:
        """A page's bytes, flags and node count, after checking that it says it is that page."""
        self.pages += 1
        if self.pages > MAX_PAGES or pgno < 2 or (pgno + 1) * self.psize > self.size:
            raise _Unreadable("page out of range")
        data = os.pread(self.fd, self.psize, pgno * self.psize)
        number, _pad, flags, lower, upper = struct.unpack_from("<QHHHH", data, 0)
        if number != pgno or lower < HEADER or lower > upper or upper > self.psize or lower & 1:
            raise _Unreadable("page header")
        return data, flags, (lower - HEADER) >> 1

    def _node(self, data: bytes, i: int) -> tuple[int, int, int, int, bytes]:
        (offset,) = struct.unpack_from("<H", data, HEADER + 2 * i)
        lo, hi, flags, ksize = struct.unpack_from("<HHHH", data, offset)
        if offset + 8 + ksize > len(data):
            raise _Unreadable("node past the page")
        return lo, hi, flags, ksize, data[offset + 8 : offset + 8 + ksize]

    def _visit(self, pgno: int, depth: int, leaves: list[Leaf], low: bytes = b"") -> None:
        data, flags, n = self._page(pgno)
        if n == 0:
            raise _Unreadable("empty page")
        if depth == 1:
            if flags & (P_BRANCH | P_LEAF2 | P_SUBP | P_OVERFLOW) or not flags & P_LEAF:
                raise _Unreadable("not a leaf where a leaf belongs")
            leaves.append(Leaf(pgno, n, self._node(data, 0)[4], self._node(data, n - 1)[4], low))
            return
        if flags & (P_LEAF | P_LEAF2 | P_SUBP | P_OVERFLOW) or not flags & P_BRANCH:
            raise _Unreadable("not a branch where a branch belongs")
        for i in range(n):
            lo, hi, high, _ksize, key = self._node(data, i)
            self._visit(lo | hi << 16 | high << 32, depth - 1, leaves, key if i else low)  # node 0's key is empty


def out_of_order(leaves: list[Leaf]) -> tuple[int, Leaf, Leaf] | None:
    """The first leaf whose keys do not sort after the previous leaf's, or before the branch key that leads to
    it, with its position and the previous leaf; None when every leaf is in its place. A damaged child page
    number that names another leaf of the tree, or a damaged branch key, leaves every count as it was, and
    LMDB reads on without an error: only the order of the keys tells."""
    pos = 0
    for prev, leaf in pairwise(leaves):
        pos += prev.count
        if not prev.last < leaf.low <= leaf.first <= leaf.last:
            return pos, prev, leaf
    return None


def cut(leaves: list[Leaf], per: int) -> list[tuple[tuple[int, int, bytes, bytes], list[int]]]:
    """Ranges of about ``per`` records at leaf boundaries: ((position, count, first key, last key), leaf pages)."""
    ranges: list[tuple[tuple[int, int, bytes, bytes], list[int]]] = []
    pos = count = 0
    first = b""
    pages: list[int] = []
    for leaf in leaves:
        if count == 0:
            first, pages = leaf.first, []
        count += leaf.count
        pages.append(leaf.pgno)
        if count >= per:
            ranges.append(((pos, count, first, leaf.last), pages))
            pos, count = pos + count, 0
    if count:
        ranges.append(((pos, count, first, leaves[-1].last), pages))
    return ranges


# -- reading records straight from the pages ----------------------------------------------------------------


@dataclass(slots=True)
class Records:
    """The records of a run of leaf pages: keys (offsets into the leaf pages read) and values (file offsets)."""

    key_at: np.ndarray[Any, Any]
    key_len: np.ndarray[Any, Any]
    value_at: np.ndarray[Any, Any]
    value_len: np.ndarray[Any, Any]
    overflow: np.ndarray[Any, Any]
    """The first overflow page of each value (0 for values stored in the leaf)."""
    damaged: np.ndarray[Any, Any]
    """Per record: 0, or why its value cannot be read (BAD_NODE, PAST_THE_END, NOT_OVERFLOW)."""

    def __len__(self) -> int:
        return int(self.key_at.size)


MAX_KEY_COMPARE = 64
"""Keys up to this length are compared as rows of a byte matrix; longer or unequal ones one pair at a time."""


def unsorted_in_pages(leaves: np.ndarray[Any, Any], records: Records, psize: int) -> np.ndarray[Any, Any]:
    """Offsets of the records whose key does not sort after the key before it in the same leaf page (LMDB keeps
    each page's keys in bytewise order; across pages ``out_of_order`` tells). A damaged key there is read in
    key order as any other, but a lookup by key (``txn.get``) goes astray in the page and finds nothing."""
    n = len(records)
    if n < 2:
        return np.zeros(0, np.int64)
    at, length = records.key_at, records.key_len
    pairs = (
        (at[1:] // psize == at[:-1] // psize) & (records.damaged[1:] != BAD_NODE) & (records.damaged[:-1] != BAD_NODE)
    )
    width = int(length[0])
    if (length == width).all() and 0 < width <= MAX_KEY_COMPARE:
        rows = leaves[at[:, None] + np.arange(width)]
        differ = rows[1:] != rows[:-1]
        first = differ.argmax(axis=1)
        index = np.arange(n - 1)
        after = differ.any(axis=1) & (rows[1:][index, first] > rows[:-1][index, first])
    else:
        data = leaves.tobytes()
        keys = [data[a : a + k] for a, k in zip(at.tolist(), length.tolist(), strict=True)]
        after = np.fromiter((b > a for a, b in itertools.pairwise(keys)), bool, n - 1)
    return np.flatnonzero(pairs & ~after) + 1


def _u16(view: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out: np.ndarray[Any, Any] = view[at].astype(np.int64) | (view[at + 1].astype(np.int64) << 8)
    return out


def _u48(view: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.zeros(at.shape, np.int64)
    for i in range(6):
        out |= view[at + i].astype(np.int64) << (8 * i)
    return out


def read_leaves(fd: int, psize: int, pgnos: list[int]) -> np.ndarray[Any, Any] | None:
    """The leaf pages, read one after the other into one buffer (None when the file is shorter)."""
    buf = bytearray(len(pgnos) * psize)
    view = memoryview(buf)
    for i, pgno in enumerate(pgnos):
        if os.preadv(fd, [view[i * psize : (i + 1) * psize]], pgno * psize) != psize:
            return None
    return np.frombuffer(buf, np.uint8)


def leaf_records(leaves: np.ndarray[Any, Any], psize: int, pgnos: list[int], size: int) -> Records | None:
    """The records of these leaf pages (``leaves``: their bytes, one page after the other), vectorised.

    Every page header and node is checked (page numbers, flags, bounds). A damaged page header or a named
    sub-database gives None (the caller reads the shard through LMDB instead); a damaged node, or a value that
    would run past the end of the file (``size`` bytes), marks that record alone (``damaged``). Overflow page
    headers are checked later, by ``check_overflow``, when the values are read.
    """
    pages = np.asarray(pgnos, np.int64)
    if pages.size == 0 or pages.min() < 2 or (pages.max() + 1) * psize > size:
        return None
    base = np.arange(pages.size, dtype=np.int64) * psize
    if not (_u48(leaves, base) == pages).all() or not (_u16(leaves, base + 6) == 0).all():
        return None  # the page number the page's header gives (8 bytes) is its own
    if not ((_u16(leaves, base + 10) & ~TRANSIENT) == P_LEAF).all():
        return None
    lower, upper = _u16(leaves, base + 12), _u16(leaves, base + 14)
    if ((lower < HEADER + 2) | (lower > upper) | (upper > psize) | (lower & 1).astype(bool)).any():
        return None
    counts = (lower - HEADER) >> 1
    total = int(counts.sum())
    leaf = np.repeat(np.arange(pages.size), counts)
    index = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    page_at = base[leaf]
    offset = _u16(leaves, page_at + HEADER + 2 * index)
    good = (offset >= upper[leaf]) & (offset + 8 <= psize)
    node = page_at + np.where(good, offset, psize - 8)  # bad nodes are read harmlessly, then ignored
    key_len = _u16(leaves, node + 6)
    key_at = node + 8
    good &= key_at + key_len <= page_at + psize
    flags = _u16(leaves, node + 4)
    value_len = _u16(leaves, node) | (_u16(leaves, node + 2) << 16)
    if (good & (flags == F_SUBDATA) & (value_len == DB.size)).any():
        return None  # a named sub-database: LMDB's own record, for the cursor reader to report
    big = good & (flags == 1)
    good &= big | (flags == 0)
    good &= key_at + key_len + np.where(big, 8, value_len) <= page_at + psize
    big &= good
    overflow = np.where(big, _u48(leaves, np.where(big, key_at + key_len, 0)), 0)
    high = np.where(big, _u16(leaves, np.where(big, key_at + key_len + 6, 0)), 0)  # a page number's top 16 bits
    past = big & ((overflow < 2) | (high != 0) | (overflow * psize + HEADER + value_len > size))
    damaged = np.where(~good, BAD_NODE, np.where(past, PAST_THE_END, 0))
    inline_at = pages[leaf] * psize + (key_at + key_len - page_at)  # file offset of a value kept in the leaf
    value_at = np.where(damaged != 0, 0, np.where(big, overflow * psize + HEADER, inline_at))
    return Records(
        key_at,
        np.where(good, key_len, 0),
        value_at,
        np.where(damaged != 0, 0, value_len),
        np.where(damaged != 0, 0, overflow),
        damaged,
    )


def check_overflow(records: Records, window: np.ndarray[Any, Any], base: int, psize: int, i: int, j: int) -> None:
    """Mark records i..j whose overflow page (read into ``window``, at file offset ``base``) is not that page."""
    overflow = records.overflow[i:j]
    big = np.flatnonzero((overflow != 0) & (records.damaged[i:j] == 0))
    if not big.size:
        return
    head = overflow[big] * psize - base
    wrong = (_u48(window, head) != overflow[big]) | ((_u16(window, head + 10) & ~TRANSIENT) != P_OVERFLOW)
    records.damaged[i + big[wrong]] = NOT_OVERFLOW


def sample_values(path: Path, tree: Tree, count: int, limit: int = 16 << 20) -> list[bytes] | None:
    """About ``count`` values, half from the first records and half spread over the leaves, read with pread.

    A value that is not where the tree says (past the end of the file, an overflow page that is none) is left
    out; None when the leaf pages themselves are not what the tree says (the caller samples through LMDB).
    """
    if not tree.leaves:
        return []
    step = max(1, len(tree.leaves) // max(1, count // 2))
    chosen = [tree.leaves[0], *tree.leaves[1::step][: count // 2]]
    values: list[bytes] = []
    try:
        with path.open("rb") as fh:
            fd = fh.fileno()
            size = os.fstat(fd).st_size
            pgnos = [leaf.pgno for leaf in chosen]
            leaves = read_leaves(fd, tree.psize, pgnos)
            if leaves is None:
                return None
            records = leaf_records(leaves, tree.psize, pgnos, size)
            if records is None:
                return None
            ends = np.cumsum([leaf.count for leaf in chosen])
            picks = list(range(min(len(records), (count + 1) // 2)))
            picks += [int(e) for e in (ends[:-1])][: count // 2]  # the first record of each spread leaf
            total = 0
            for i in sorted(set(picks)):
                if records.damaged[i]:
                    continue
                at, length = int(records.value_at[i]), int(records.value_len[i])
                if total + length > limit:
                    break
                data = os.pread(fd, length, at)
                if len(data) != length:
                    continue
                if records.overflow[i]:
                    head = os.pread(fd, HEADER, at - HEADER)
                    number, _pad, flags = struct.unpack_from("<QHH", head)
                    if number != records.overflow[i] or (flags & ~TRANSIENT) != P_OVERFLOW:
                        continue
                values.append(data)
                total += length
    except OSError:
        return None
    return values


def is_database_record(value: bytes | memoryview) -> bool:
    """Whether a main-database value is LMDB's record of a named database (an MDB_db: flags, depth, page
    counts, entries, root), as ``env.open_db(name)`` leaves in the main database."""
    if len(value) != DB.size:
        return False
    _pad, flags, depth, branch, leaf, overflow, entries, root = DB.unpack(bytes(value))
    if flags & ~DB_FLAGS or depth > 64 or max(branch, leaf, overflow) >= 1 << 40:
        return False
    empty = root == INVALID and depth == 0 and entries == 0
    return bool(empty or (depth > 0 and root < 1 << 48 and leaf > 0))
