"""Folders of image files: the ImageFolder layout (one sub-folder per class) or a flat folder.

Layout. A folder whose top level holds only folders (and files that are no images: a LICENSE, a README,
which torchvision leaves alone too) is an ImageFolder, as torchvision reads it: the classes are the sorted
names of the top-level folders, every one of them, hidden and empty ones included (a stray
``.ipynb_checkpoints`` becomes class 0, and an empty class folder is a missing class); the images of a class
are the files below its folder, recursively.
Any other folder is flat: every file below it, recursively, without labels.

Splits. A folder whose non-hidden sub-folders are all named for splits (``train``, ``val``, ``test`` ...,
``SPLIT_NAMES``, any case), at least one of which has the ImageFolder layout, holds splits
(``data/train/cat/1.jpg``, ``data/val/cat/2.jpg``): each split is read as the ImageFolder a training script
opens (``ImageFolder("data/train")``), with a label stream of its own named after it, or as a flat, unlabelled
folder when it holds no class folders. The class list of every split is the sorted union of the class
folders of all splits, so a class folder missing or empty in one split is a missing class there (torchvision
would number the classes of that split differently). Hidden folders beside the splits are left alone (no
loader opens them), and named in the note on the splits. Paths stay relative to the scanned folder.

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
storage order a sequential reader sees. Shards are slices of that list, by bytes and by count, and never span
two splits. Labels are yielded once per shard as one label block, so the core label checks run on folder
labels (per split).
"""

from __future__ import annotations

import io
import os
import shlex
import stat
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from ..forked import stalled
from ..head_start import HeadStart
from ..imaging import warm_up_decoders
from ..imaging.sniff import (
    BACKUP_SUFFIXES,
    DOC_NAMES,
    IMAGE_EXTENSIONS,
    JUNK_NAMES,
    NON_IMAGE_EXTENSIONS,
    damaged_png_signature,
    sniff,
)
from ..imaging.verdict import Verdict
from ..items import EncodedImage, LabelBlock, ReadFailure
from ..location import Location
from ..partial import LabelTally, Partial
from ..text import printable
from .base import Plan, Shard, Source, SourceInfo, note_unused_labels
from .walk import LINK_OUT, UNLISTABLE, Outside, link_out

TARGET_SHARDS = 32
"""Aim for at least this many shards, so that workers stay busy to the end."""
MIN_SHARD_BYTES = 1 << 20
MAX_SHARD_FILES = 2048
PER_FILE = ("paths", "sizes", "lines", "labels", "inspected")
"""The lists of a shard's spec that hold one entry per file, in order."""
SPLIT_WAYS = 16
"""A shard that keeps killing its reader is split into this many parts, down to single files."""
WHOLE_FILE_LIMIT = 64 << 20
"""Files above this size are read whole only when their first bytes are an image's."""
HEAD_BYTES = 64 << 10
DETECT_PROBES = 64
"""Extension-less files sniffed, at most, to decide whether a folder holds images."""
SPLIT_NAMES = frozenset({"train", "training", "val", "valid", "validation", "test", "testing", "dev"})
"""Folder names (any case) that name a split of a dataset rather than a class."""
SPLITS_NOTE = "images.splits"
"""The report ``info`` note naming the splits of a split layout."""


@dataclass(slots=True)
class Entry:
    """One image file to scan: where (relative path), how big, its list line and label."""

    path: str
    size: int
    line: int | None = None
    label: int | float | None = None
    split: str | None = None
    """The split folder (``train``, ``val`` ...) of a split layout: its label stream, when it has labels."""


def skip_reason(name: str) -> str | None:
    """Why a file is no data for an image folder ('hidden', '.txt' ...), None when it is scanned."""
    lower = name.lower()
    if lower in JUNK_NAMES:
        return name
    if lower in DOC_NAMES:
        return "documentation (LICENSE, README ...)"
    if lower.endswith(BACKUP_SUFFIXES):
        return "backup copy (name~, .bak, .orig ...)"
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
    early_readers = True

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        return False

    @classmethod
    def warm_up(cls) -> None:
        warm_up_decoders()

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
        limit = min(self.config.shard_bytes, max(MIN_SHARD_BYTES, total // TARGET_SHARDS))
        shards: list[Shard] = []
        start = 0
        while start < len(files):
            stop, size = start, 0
            split = files[start].split
            while (
                stop < len(files)
                and stop - start < MAX_SHARD_FILES
                and (stop == start or size < limit)
                and files[stop].split == split  # a shard never spans two splits (two label streams)
            ):
                size += files[stop].size
                stop += 1
            shards.append(self._shard(len(shards), files[start:stop], start, partial))
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

    def _shard(self, index: int, files: list[Entry], start: int, partial: Partial) -> Shard:
        split = files[0].split
        stream = split if split is not None else self.stream
        spec: dict[str, Any] = {
            "file": files[0].path,
            "paths": [e.path for e in files],
            "sizes": [e.size for e in files],
            "start": start,
        }
        if any(e.line is not None for e in files):
            spec["lines"] = [e.line for e in files]
        if split is not None:
            spec["split"] = split
        if stream in partial.labels:
            spec["labels"] = [e.label for e in files]
            spec["stream"] = stream
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
            part: dict[str, Any] = {key: value[a:b] for key, value in spec.items() if key in PER_FILE}
            part.update(file=spec["paths"][a], start=spec["start"] + a)
            part.update({key: spec[key] for key in ("stream", "split") if key in spec})
            pieces.append(Shard(id=shard.id, items=b - a, bytes=sum(part["sizes"]), spec=part))
        return pieces

    def crash_finding(self, shard: Shard, reason: str) -> tuple[str, Location]:
        lines = shard.spec.get("lines")
        return "I003", Location(
            path=shard.spec["paths"][0],
            line=lines[0] if lines else None,
            detail=reason if stalled(reason) else f"the decoder crashed: {reason}",
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
        inspected: list[Any] | None = spec.get("inspected")
        if labels is not None:
            yield from self._label_blocks(spec, paths, lines, labels)
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
                        data = read_again(fh)  # a big image: read it all; big non-images stay a head
            except FileNotFoundError:
                gone = where.model_copy(update={"detail": "the file no longer exists"})
                yield ReadFailure("S004", gone, items=1)
                continue
            except OSError as exc:
                detail = exc.strerror or str(exc)
                yield ReadFailure("S001", where.model_copy(update={"detail": detail}), items=1)
                continue
            verdict = digest = None
            found = inspected[i] if inspected is not None else None
            if found is not None:  # judged by the head start: its verdict stands for these very bytes
                digest = xxhash.xxh3_64_hexdigest(data)
                verdict = Verdict(*found[1]) if digest == found[0] else None
            label = labels[i] if labels is not None else None
            yield EncodedImage(
                data=data,
                location=where,
                name=os.path.basename(rel),
                label=label if isinstance(label, int) else None,
                split=spec.get("split"),
                items=1,
                nbytes=max(len(data), sizes[i]),
                verdict=verdict,
                digest=digest,
            )

    def adopt(self, shards: list[Shard], head_start: HeadStart) -> None:
        found = head_start.collect(self.data_root(), self.config.max_pixels)
        if not found:
            return
        for shard in shards:
            taken = [found.get(rel) for rel in shard.spec["paths"]]
            if any(x is not None for x in taken):
                shard.spec["inspected"] = taken

    def _label_blocks(
        self, spec: dict[str, Any], paths: list[str], lines: list[int | None], labels: list[Any]
    ) -> Iterator[LabelBlock]:
        """The shard's labels, a block for each run of files that have one (a list line whose label is bad
        names an image without one: it is judged, and its label is left out)."""
        floats = any(isinstance(x, float) for x in labels)
        a, n = 0, len(labels)
        while a < n:
            if labels[a] is None:
                a += 1
                continue
            b = next((i for i in range(a, n) if labels[i] is None), n)
            values = np.asarray(labels[a:b], dtype=np.float64 if floats else np.int64)

            def locate(i: int, a: int = a) -> Location:
                return Location(path=paths[a + i], line=lines[a + i])

            yield LabelBlock(stream=spec["stream"], labels=values, global_start=spec["start"] + a, locate=locate)
            a = b


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


EMPTY_CLASS = "the class folder holds no image: torchvision's ImageFolder raises FileNotFoundError"


def _unopenable(path: str) -> str:
    """Why a listed file cannot be stat'ed, for its finding: a link to a file that does not exist (named), or
    the system's reason."""
    try:
        pointee = os.readlink(path)
    except OSError:
        pointee = None
    if pointee is not None and not os.path.exists(path):
        return f"a link to {printable(pointee)}, which does not exist"
    try:
        os.stat(path)
    except OSError as exc:
        return f"cannot be opened: {exc.strerror or exc}"
    return "cannot be opened"


def _cycle_detail(link: str, root: str) -> str:
    """What a folder link back to a folder above it is, for its finding: where it leads, and that a loader
    following links (torchvision's ImageFolder walks with ``os.walk(followlinks=True)``) reads that folder's
    images again below it, under the link's class, at every turn until the path is too long."""
    target = os.path.realpath(link)
    top = os.path.realpath(root)
    inside = os.path.relpath(target, top) if target.startswith(top + os.sep) else None
    shown = "the scanned folder itself" if target == top else printable(inside if inside is not None else target)
    return (
        f"a link back to {shown}, a folder above it: a loader that follows links (torchvision's "
        "ImageFolder) reads the images there again below it, under this folder's class, at every turn of the loop"
    )


SPECIAL = "a named pipe, socket or device named as an image: ImageFolder lists it, and opening it blocks or fails"


def read_again(fh: io.FileIO) -> bytes:
    """The whole file, read again from its start into one buffer of its size: ``head + fh.read()`` held a big
    image twice (2 GB for a 1 GB file)."""
    fh.seek(0)
    return fh.readall()


Walked = tuple[list[str], list[str], list[str], list[tuple[str, str]], list[tuple[str, str]]]
"""What walking a folder meets besides images: (links out of the roots, folders it cannot list, named pipes
named as images, class folders without an image (folder, detail), folder links back to a folder above them
(link, detail))."""


def walk_files(
    folder: str,
    root: str,
    skipped: Counter[str],
    probe: Probe = starts_like_image,
    outside: Outside | None = None,
    links_out: list[str] | None = None,
    unlistable: list[str] | None = None,
    special: list[str] | None = None,
    cycles: list[tuple[str, str]] | None = None,
) -> list[tuple[str, int]]:
    """(path relative to ``root``, size) of the files below ``folder``, in ImageFolder order (sorted
    folders, sorted names within each), skipping non-data. Size -1: the file cannot be stat'ed. Links that
    leave a confined scan's roots (``outside``) are not followed: their paths (relative) go to ``links_out``.
    Named pipes, sockets and devices are never opened; those named as images (which torchvision's ImageFolder
    lists, and whose open blocks or fails) go to ``special``, the others are skipped.

    A file whose extension is neither an image's nor a known non-image one (``.pts`` landmarks, ``.xlsx``)
    is scanned only when ``probe`` says it starts like an image; files without an extension always are.

    A folder link back to a folder above it (a cycle) is not followed: it goes to ``cycles`` with what it
    does to a loader that follows it."""
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
                if cycles is not None:
                    cycles.append((current[prefix:].replace(os.sep, "/"), _cycle_detail(current, root)))
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
                if entry.name in ("data.mdb", "lock.mdb"):  # an LMDB beside the images: a dataset of its own
                    where = printable(current[prefix:].replace(os.sep, "/") or ".")
                    command = shlex.quote(printable(current))
                    reason = f"LMDB files of {where} (a dataset of its own: scan it with dscan scan {command})"
                skipped[reason] += 1
                continue
            try:
                st = entry.stat()
            except OSError:
                size = -1
            else:
                if not stat.S_ISREG(st.st_mode):  # a named pipe, socket or device: opening it may block forever
                    if special is not None and ext in IMAGE_EXTENSIONS:
                        special.append(entry.path[prefix:].replace(os.sep, "/"))
                    else:
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

    def layout(self, folder: str | None = None) -> tuple[list[str] | None, Counter[str]]:
        """The class folder names when ``folder`` (the scanned one by default) has the ImageFolder layout
        (else None), and the top-level files an ImageFolder leaves alone (a LICENSE, a README), by reason."""
        try:
            with os.scandir(self.path if folder is None else folder) as it:
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

    def splits(self, folders: list[str]) -> dict[str, list[str] | None] | None:
        """The splits of a split layout (the scanned folder's top-level ``folders``, all named for splits, at
        least one an ImageFolder): each split's class folders (None: a flat split, or a link a confined scan
        does not follow). None when the folder holds no splits."""
        visible = [name for name in folders if not name.startswith(".")]
        if not visible or any(name.lower() not in SPLIT_NAMES for name in visible):
            return None
        found: dict[str, list[str] | None] = {}
        for name in visible:
            folder = os.path.join(self.path, name)
            found[name] = None if link_out(folder, self.fenced) else self.layout(folder)[0]
        return found if any(classes is not None for classes in found.values()) else None

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
        special: list[str] = []
        empty: list[tuple[str, str]] = []
        cycles: list[tuple[str, str]] = []
        walked = (links_out, unlistable, special, empty, cycles)
        splits = self.splits(classes) if classes is not None else None
        if splits is not None:
            out = self._split_entries(splits, partial, skipped, walked)
            hidden = [name for name in classes or () if name not in splits]
            partial.info["images.layout"] = f"splits: {', '.join(splits)}"
            refused = [name for name in splits if link_out(os.path.join(root, name), self.fenced)]
            partial.info[SPLITS_NOTE] = _splits_note(splits, hidden, refused)
        elif classes is None:
            found = walk_files(root, root, skipped, self.probe, self.fenced, links_out, unlistable, special, cycles)
            out = [Entry(rel, size) for rel, size in found]
            partial.info["images.layout"] = "flat folder (no class sub-folders: no labels)"
        else:
            partial.labels[self.stream] = LabelTally(
                path=".", classes=classes, dtype_kind="i", run_threshold=self.config.run_threshold
            )
            out = self._class_entries(root, "", classes, classes, None, skipped, walked)
            partial.info["images.layout"] = f"ImageFolder: {len(classes)} class folders"
        note_unused_labels(partial, self.config, "an image folder's labels are its class folders")
        if skipped:
            listed = ", ".join(f"{n} {what}" for what, n in sorted(skipped.items()))
            n = sum(skipped.values())
            partial.info["images.skipped"] = f"{n} file{'s' if n != 1 else ''} not scanned as images: {listed}"
        for link in links_out:
            partial.add("S001", Location(path=link, detail=LINK_OUT))
        for folder in unlistable:
            partial.add("S001", Location(path=folder, detail=UNLISTABLE))
        for path in special:
            partial.add("S001", Location(path=path, detail=SPECIAL))
        for folder, holds in empty:
            partial.add("I014", Location(path=folder, detail=holds))
        for link, detail in cycles:
            partial.add("S009", Location(path=link, detail=detail))
        for e in out:
            if e.size < 0:
                partial.add("S001", Location(path=e.path, detail=_unopenable(os.path.join(root, e.path))))
        return [e for e in out if e.size >= 0]

    def _class_entries(
        self,
        root: str,
        prefix: str,
        present: list[str],
        classes: list[str],
        split: str | None,
        skipped: Counter[str],
        walked: Walked,
    ) -> list[Entry]:
        """The files of the class folders ``present`` below ``root/prefix``, labelled by their place in
        ``classes``. ``walked``: what the walks meet besides images (``entries``), class folders without an
        image among them."""
        links_out, unlistable, special, empty, cycles = walked
        out: list[Entry] = []
        have = set(present)
        for label, name in enumerate(classes):
            if name not in have:
                continue
            folder = os.path.join(root, prefix, name)
            if link_out(folder, self.fenced):  # a class all the same (the numbering)
                links_out.append(prefix + name)
                continue
            before = (len(special), len(unlistable))
            found = walk_files(folder, root, skipped, self.probe, self.fenced, links_out, unlistable, special, cycles)
            out += [Entry(rel, size, None, label, split) for rel, size in found]
            if not found and (len(special), len(unlistable)) == before:  # (one it cannot list is S001 already)
                empty.append((prefix + name, EMPTY_CLASS))
        return out

    def _split_entries(
        self,
        splits: dict[str, list[str] | None],
        partial: Partial,
        skipped: Counter[str],
        walked: Walked,
    ) -> list[Entry]:
        """The files of every split, in order; a label stream per split with class folders, whose classes
        are the class folders of all splits."""
        links_out, unlistable, special, _, cycles = walked
        root = os.fspath(self.path)
        union = sorted({name for classes in splits.values() for name in classes or ()})
        out: list[Entry] = []
        for split, present in splits.items():
            folder = os.path.join(root, split)
            if link_out(folder, self.fenced):
                links_out.append(split)
                continue
            if present is None:
                found = walk_files(
                    folder, root, skipped, self.probe, self.fenced, links_out, unlistable, special, cycles
                )
                out += [Entry(rel, size, split=split) for rel, size in found]
                continue
            skipped.update(self.layout(folder)[1])  # a split's LICENSE, README
            partial.labels[split] = LabelTally(
                path=split, classes=union, dtype_kind="i", run_threshold=self.config.run_threshold
            )
            out += self._class_entries(root, split + "/", present, union, split, skipped, walked)
        return out


class ImageFileSource(ImageFilesSource):
    """One image file: a dataset of one image (``dscan scan photo.jpg``). A file named as an image is one,
    whatever it holds: an empty ``.jpg`` or a web page saved as ``.png`` is a finding, not 'no dataset'."""

    kind = "image-file"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        try:
            regular = path.is_file()  # (links followed; a named pipe is no file: its open would block)
        except OSError:
            return False
        if not regular:
            return False
        return path.suffix.lower() in IMAGE_EXTENSIONS or (
            (outside is None or not outside(os.fspath(path))) and starts_like_image(os.fspath(path))
        )

    def entries(self, partial: Partial) -> list[Entry]:
        partial.info["images.layout"] = "one image file (no labels)"
        note_unused_labels(partial, self.config, "one image file has no labels")
        try:
            size = os.stat(self.path).st_size
        except OSError as exc:
            partial.add("S001", Location(path=self.path.name, detail=exc.strerror or str(exc)))
            return []
        return [Entry(self.path.name, size)]


def _splits_note(splits: dict[str, list[str] | None], hidden: list[str], refused: list[str]) -> str:
    """The report's note on a split layout: the splits, the shared class list, the flat splits (not those a
    confined scan does not follow: ``refused``, findings of their own)."""
    union = {name for classes in splits.values() for name in classes or ()}
    flat = [name for name, classes in splits.items() if classes is None and name not in refused]
    text = (
        f"split layout: {', '.join(splits)}, each scanned as a dataset of its own (one label table per split, "
        f"its classes numbered by the {len(union)} class folders of all splits together)"
    )
    if flat:
        text += f"; {', '.join(flat)} {'holds' if len(flat) == 1 else 'hold'} no class folders: no labels"
    if hidden:
        text += f"; {', '.join(hidden)} beside the splits: not scanned"
    return text
