"""Folders of image files: the ImageFolder layout (one sub-folder per class) or a flat folder.

Layout. A folder whose top level holds only folders (and files that are no images: a LICENSE, a README,
which torchvision leaves alone too) is an ImageFolder, as torchvision reads it: the classes are the sorted
names of the top-level folders, every one of them, hidden and empty ones included (a stray
``.ipynb_checkpoints`` becomes class 0, and an empty class folder is a missing class); the images of a class
are the files below its folder, recursively.
Any other folder is flat: every file below it, recursively, without labels.

Which files. Every file is inspected by content, whatever its extension: a ``.jpg`` that holds an HTML
error page is a finding, not skipped. Skipped, because no loader reads them as images: hidden files
(``.DS_Store``, unless they carry an image extension, like the ``._photo.jpg`` files macOS leaves, which
loaders do pick up), ``Thumbs.db``/``desktop.ini``, files with extensions of text, code, archives and other
data formats (``.txt``, ``.csv``, ``.json``, ``.npy`` ...), files with any other extension that is no image
format's whose first bytes are no image's either (annotation sidecars: ``.pts``, ``.cat``, ``.xlsx``), and
in hidden folders (``.git``, ``.ipynb_checkpoints``), files without an image extension (torchvision walks
hidden folders too, keeping image extensions only). Files without an extension are otherwise always
inspected. The report's ``info``
counts what was skipped.

Order and shards. Files are in ImageFolder's order (sorted folders, sorted names within each), which is the
storage order a sequential reader sees. Shards are slices of that list, by bytes and by count. Labels are
yielded once per shard as one label block, so the core label checks run on folder labels.
"""

from __future__ import annotations

import os
import stat
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..imaging.sniff import IMAGE_EXTENSIONS, JUNK_NAMES, NON_IMAGE_EXTENSIONS, damaged_png_signature, sniff
from ..items import EncodedImage, LabelBlock, ReadFailure
from ..location import Location
from ..partial import LabelTally, Partial
from ..text import printable
from .base import Plan, Shard, Source, SourceInfo
from .walk import LINK_OUT, UNLISTABLE, Outside, link_out

TARGET_SHARDS = 32
"""Aim for at least this many shards, so that workers stay busy to the end."""
MIN_SHARD_BYTES = 1 << 20
MAX_SHARD_FILES = 2048
SPLIT_WAYS = 16
"""A shard that keeps killing its reader is split into this many parts, down to single files."""
WHOLE_FILE_LIMIT = 64 << 20
"""Files above this size are read whole only when their first bytes are an image's."""
HEAD_BYTES = 64 << 10
DETECT_PROBES = 64
"""Extension-less files sniffed, at most, to decide whether a folder holds images."""


@dataclass(slots=True)
class Entry:
    """One image file to scan: where (relative path), how big, its list line and label."""

    path: str
    size: int
    line: int | None = None
    label: int | float | None = None


def skip_reason(name: str) -> str | None:
    """Why a file is no data for an image folder ('hidden', '.txt' ...), None when it is scanned."""
    lower = name.lower()
    if lower in JUNK_NAMES:
        return name
    ext = os.path.splitext(lower)[1]
    if name.startswith("."):
        return None if ext in IMAGE_EXTENSIONS else "hidden"
    if ext in NON_IMAGE_EXTENSIONS:
        return ext
    return None


def starts_like_image(path: str) -> bool:
    """Whether the file's first bytes are an image's (a damaged PNG signature counts). A file that cannot be
    opened counts as one: the scan then reports why it cannot be read."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return True
    return sniff(head) is not None or damaged_png_signature(head) is not None


Probe = Callable[[str], bool]
"""Whether a file whose name claims no format is scanned: ``starts_like_image``, or a confined source's own."""


def _has_images(folder: Path, outside: Outside | None = None) -> bool:
    """Whether a folder holds at least one image file (by extension, else by content), searching down; links
    that leave a confined scan's roots are not followed."""
    probes = 0
    stack = [folder]
    seen: set[tuple[int, int]] = set()
    while stack:
        current = stack.pop()
        try:
            st = os.stat(current)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        if current == folder and any(e.name == "data.mdb" for e in entries):
            return False  # an LMDB environment
        for entry in entries:
            if entry.name.startswith(".") and not entry.name.lower().endswith(tuple(IMAGE_EXTENSIONS)):
                continue
            if outside is not None and entry.is_symlink() and outside(entry.path):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                stack.append(Path(entry.path))
                continue
            ext = os.path.splitext(entry.name.lower())[1]
            if ext in IMAGE_EXTENSIONS:
                return True
            if ext in NON_IMAGE_EXTENSIONS or probes >= DETECT_PROBES:
                continue
            probes += 1
            try:
                if not entry.is_file():  # a named pipe would block the open
                    continue
                with open(entry.path, "rb") as fh:
                    if sniff(fh.read(64)) is not None:
                        return True
            except OSError:
                continue
    return False


class ImageFilesSource(Source):
    """What image folders and image lists share: plan slices of a file list, read files as images."""

    kind = "image-files"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return False

    @property
    def stream(self) -> str:
        """Name of the label stream (the folder, or the list file)."""
        return "."

    @abstractmethod
    def entries(self, partial: Partial) -> list[Entry]:
        """The files to scan in storage order; sets up the label stream in ``partial``."""

    # -- planning -------------------------------------------------------------------------------

    def plan(self) -> Plan:
        partial = Partial(cap=self.config.max_locations)
        files = self.entries(partial)
        total = sum(e.size for e in files)
        labelled = self.stream in partial.labels
        limit = min(self.config.shard_bytes, max(MIN_SHARD_BYTES, total // TARGET_SHARDS))
        shards: list[Shard] = []
        start = 0
        while start < len(files):
            stop, size = start, 0
            while stop < len(files) and stop - start < MAX_SHARD_FILES and (stop == start or size < limit):
                size += files[stop].size
                stop += 1
            shards.append(self._shard(len(shards), files[start:stop], start, labelled))
            start = stop
        info = SourceInfo(
            kind=self.kind,
            path=str(self.path),
            root=str(self.root),
            files=len(files),
            items=len(files),
            bytes=total,
        )
        return Plan(source=info, shards=shards, partial=partial)

    def _shard(self, index: int, files: list[Entry], start: int, labelled: bool) -> Shard:
        spec: dict[str, Any] = {
            "file": files[0].path,
            "paths": [e.path for e in files],
            "sizes": [e.size for e in files],
            "start": start,
        }
        if any(e.line is not None for e in files):
            spec["lines"] = [e.line for e in files]
        if labelled:
            spec["labels"] = [e.label for e in files]
            spec["stream"] = self.stream
        return Shard(id=index, items=len(files), bytes=sum(e.size for e in files), spec=spec)

    def split(self, shard: Shard) -> list[Shard]:
        spec = shard.spec
        n = len(spec["paths"])
        if n <= 1:
            return []
        step = -(-n // SPLIT_WAYS)
        pieces = []
        for a in range(0, n, step):
            b = min(n, a + step)
            part: dict[str, Any] = {
                key: value[a:b] for key, value in spec.items() if key in ("paths", "sizes", "lines", "labels")
            }
            part.update(file=spec["paths"][a], start=spec["start"] + a)
            if "stream" in spec:
                part["stream"] = spec["stream"]
            pieces.append(Shard(id=shard.id, items=b - a, bytes=sum(part["sizes"]), spec=part))
        return pieces

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        lines = shard.spec.get("lines")
        return "I003", Location(
            path=shard.spec["paths"][0],
            line=lines[0] if lines else None,
            detail=f"the decoder crashed: {reason}",
        )

    # -- reading --------------------------------------------------------------------------------

    def data_root(self) -> str:
        """The folder that entry paths are relative to."""
        return str(self.root)

    def read(self, shard: Shard) -> Iterator[Any]:
        spec = shard.spec
        paths: list[str] = spec["paths"]
        sizes: list[int] = spec["sizes"]
        lines: list[int | None] = spec.get("lines") or [None] * len(paths)
        labels: list[Any] | None = spec.get("labels")
        if labels is not None:
            yield self._label_block(spec, paths, lines, labels)
        root = self.data_root()
        for i, rel in enumerate(paths):
            line = lines[i]
            where = Location(path=rel, line=line)
            full = os.path.join(root, rel)
            refused = self.outside(full)
            if refused is not None:
                yield ReadFailure("S001", where.model_copy(update={"detail": refused}), items=1)
                continue
            try:
                with open(full, "rb", buffering=0) as fh:
                    data = fh.read(HEAD_BYTES) if sizes[i] > WHOLE_FILE_LIMIT else fh.read()
                    if len(data) == HEAD_BYTES and sniff(data) is not None:
                        data += fh.read()  # a big image: read it all; big non-images stay a head
            except FileNotFoundError:
                gone = where.model_copy(update={"detail": "the file no longer exists"})
                yield ReadFailure("S004", gone, items=1)
                continue
            except OSError as exc:
                detail = exc.strerror or str(exc)
                yield ReadFailure("S001", where.model_copy(update={"detail": detail}), items=1)
                continue
            label = labels[i] if labels is not None else None
            yield EncodedImage(
                data=data,
                location=where,
                name=os.path.basename(rel),
                label=label if isinstance(label, int) else None,
                items=1,
                nbytes=max(len(data), sizes[i]),
            )

    def _label_block(
        self, spec: dict[str, Any], paths: list[str], lines: list[int | None], labels: list[Any]
    ) -> LabelBlock:
        floats = any(isinstance(x, float) for x in labels)
        values = np.asarray(labels, dtype=np.float64 if floats else np.int64)

        def locate(i: int) -> Location:
            return Location(path=paths[i], line=lines[i])

        return LabelBlock(stream=spec["stream"], labels=values, global_start=spec["start"], locate=locate)


def _folders_above(folder: str, root: str) -> frozenset[tuple[int, int]]:
    """(device, inode) of the folders from ``root`` down to ``folder``'s parent: a link inside a class folder
    back to the dataset's root is a cycle too."""
    found: set[tuple[int, int]] = set()
    here, top = os.path.abspath(folder), os.path.abspath(root)
    while here != top and here.startswith(top + os.sep):
        here = os.path.dirname(here)
        try:
            st = os.stat(here)
        except OSError:
            break
        found.add((st.st_dev, st.st_ino))
    return frozenset(found)


def walk_files(
    folder: str,
    root: str,
    skipped: Counter[str],
    probe: Probe = starts_like_image,
    outside: Outside | None = None,
    links_out: list[str] | None = None,
    unlistable: list[str] | None = None,
) -> list[tuple[str, int]]:
    """(path relative to ``root``, size) of the files below ``folder``, in ImageFolder order (sorted
    folders, sorted names within each), skipping non-data. Size -1: the file cannot be stat'ed. Links that
    leave a confined scan's roots (``outside``) are not followed: their paths (relative) go to ``links_out``.

    A file whose extension is neither an image's nor a known non-image one (``.pts`` landmarks, ``.xlsx``)
    is scanned only when ``probe`` says it starts like an image; files without an extension always are."""
    by_folder: dict[str, list[tuple[str, int]]] = {}
    prefix = len(root.rstrip(os.sep)) + 1
    # folder links are followed, as torchvision's os.walk(followlinks=True) does: a folder reached twice is
    # read twice (as the loader reads it), but a link back to a folder above it (a cycle) is not followed
    start_hidden = os.path.abspath(folder) != os.path.abspath(root) and os.path.basename(folder).startswith(".")
    stack: list[tuple[str, frozenset[tuple[int, int]], bool]] = [(folder, _folders_above(folder, root), start_hidden)]
    while stack:
        current, above, hidden = stack.pop()
        try:
            st = os.stat(current)
            here = (st.st_dev, st.st_ino)
            if here in above:
                skipped["folder link cycle"] += 1
                continue
            with os.scandir(current) as it:
                entries = list(it)
        except OSError:
            if unlistable is not None and os.path.lexists(current):  # (gone since it was listed: nothing to read)
                unlistable.append(current[prefix:].replace(os.sep, "/") or ".")
            continue
        found: list[tuple[str, int]] = []
        for entry in entries:
            if outside is not None and entry.is_symlink() and outside(entry.path):
                if links_out is not None:
                    links_out.append(entry.path[prefix:].replace(os.sep, "/"))
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                stack.append((entry.path, above | {here}, hidden or entry.name.startswith(".")))
                continue
            ext = os.path.splitext(entry.name)[1].lower()
            if hidden and ext not in IMAGE_EXTENSIONS:
                skipped["in a hidden folder, no image extension"] += 1  # (.git objects, caches ...)
                continue
            reason = skip_reason(entry.name)
            if reason is not None:
                skipped[reason] += 1
                continue
            try:
                st = entry.stat()
            except OSError:
                size = -1
            else:
                if not stat.S_ISREG(st.st_mode):  # a named pipe, socket or device: opening it may block forever
                    skipped["not a regular file"] += 1
                    continue
                size = st.st_size
                if ext and ext not in IMAGE_EXTENSIONS and not probe(entry.path):
                    skipped[printable(ext)] += 1  # a sidecar file (annotations, landmarks ...): no loader reads it
                    continue
            found.append((entry.path[prefix:].replace(os.sep, "/"), size))
        found.sort()
        by_folder[current] = found
    return [f for key in sorted(by_folder) for f in by_folder[key]]


class ImageFolderSource(ImageFilesSource):
    """A folder of images: ImageFolder (class sub-folders) or flat (no labels)."""

    kind = "images"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return path.is_dir() and _has_images(path, outside)

    @property
    def stream(self) -> str:
        return "."

    def probe(self, path: str) -> bool:
        """``starts_like_image``, without opening what a confined scan may not read (the scan reports it)."""
        return self.outside(path) is not None or starts_like_image(path)

    def layout(self) -> tuple[list[str] | None, Counter[str]]:
        """The class folder names when the folder has the ImageFolder layout (else None), and the top-level
        files an ImageFolder leaves alone (a LICENSE, a README), by reason."""
        try:
            with os.scandir(self.path) as it:
                top = list(it)
        except OSError:
            return None, Counter()
        folders: list[str] = []
        ignored: Counter[str] = Counter()
        for entry in top:
            try:
                if entry.is_dir():
                    folders.append(entry.name)
                    continue
            except OSError:
                pass
            reason = skip_reason(entry.name)
            if reason is None:
                if self._top_image(entry):
                    return None, Counter()  # images at the top: a flat folder
                reason = "at the top level, no image"
            ignored[reason] += 1
        return (sorted(folders) or None), ignored

    def _top_image(self, entry: os.DirEntry[str]) -> bool:
        if os.path.splitext(entry.name)[1].lower() in IMAGE_EXTENSIONS:
            return True
        try:
            regular = entry.is_file()  # a named pipe would block the probe's open
        except OSError:
            return False
        return regular and self.probe(entry.path)

    def entries(self, partial: Partial) -> list[Entry]:
        classes, skipped = self.layout()
        root = os.fspath(self.path)
        out: list[Entry] = []
        links_out: list[str] = []
        unlistable: list[str] = []
        if classes is None:
            found = walk_files(root, root, skipped, self.probe, self.fenced, links_out, unlistable)
            out = [Entry(rel, size) for rel, size in found]
            partial.info["images.layout"] = "flat folder (no class sub-folders: no labels)"
        else:
            partial.labels[self.stream] = LabelTally(
                path=".", classes=classes, dtype_kind="i", run_threshold=self.config.run_threshold
            )
            for label, name in enumerate(classes):
                if link_out(os.path.join(root, name), self.fenced):  # a class all the same (the numbering)
                    links_out.append(name)
                    continue
                found = walk_files(
                    os.path.join(root, name), root, skipped, self.probe, self.fenced, links_out, unlistable
                )
                out += [Entry(rel, size, None, label) for rel, size in found]
            partial.info["images.layout"] = f"ImageFolder: {len(classes)} class folders"
        if skipped:
            listed = ", ".join(f"{n} {what}" for what, n in sorted(skipped.items()))
            partial.info["images.skipped"] = f"{sum(skipped.values())} files not scanned as images: {listed}"
        for link in links_out:
            partial.add("S001", Location(path=link, detail=LINK_OUT))
        for folder in unlistable:
            partial.add("S001", Location(path=folder, detail=UNLISTABLE))
        for e in out:
            if e.size < 0:
                partial.add("S001", Location(path=e.path, detail="cannot be opened (a broken link?)"))
        return [e for e in out if e.size >= 0]
