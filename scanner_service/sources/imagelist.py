"""Image list files: Caffe's convert_imageset lists and CSV files naming the images and their labels.

A list (``.txt``, ``.lst``, ``.list``): one image per line, ``relative/path label``. As in Caffe, the label
is the last space-separated token, so paths may contain spaces; a list in which no line has a label is an
unlabelled list. A CSV (``.csv``, ``.tsv``): a header row naming the path column (path, file, filename,
image, filepath ...) and the label column (label, class, target, y ...). Labels are integers, or class
names (sorted names become class ids, as for folders).

Paths are relative to the list file's folder, or to ``--root`` (``config.root``); absolute paths are kept.
Every listed file must exist (``missing-file``, with the line) and every line must parse (``list-syntax``,
with the line). Storage order is list order, the order Caffe and sequential readers see.

A ``.txt`` whose lines name HDF5 files is an HDF5 list (``hdf5list.py``), never an image list.
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
from pathlib import Path

from ..imaging.sniff import IMAGE_EXTENSIONS
from ..location import Location
from ..partial import LabelTally, Partial
from .hdf5_files import LIST_SUFFIXES, SNIFF_LINES, is_binary, looks_like_hdf5_list
from .images import Entry, ImageFilesSource

CSV_SUFFIXES = frozenset({".csv", ".tsv"})
PATH_COLUMNS = ("path", "filepath", "file_path", "filename", "file_name", "file", "image", "image_path",
                "imagepath", "img", "img_path", "image_file", "fname")  # fmt: skip
LABEL_COLUMNS = ("label", "labels", "class", "class_id", "classid", "target", "y", "category", "category_id")


def _head_lines(path: Path) -> list[str]:
    try:
        with path.open("rb") as fh:
            head = fh.read(64 << 10)
    except OSError:
        return []
    if is_binary(head):
        return []
    return [ln for ln in head.decode("utf-8-sig", "replace").splitlines() if ln.strip()][:SNIFF_LINES]


def _is_image_path(text: str) -> bool:
    return os.path.splitext(text.strip().lower())[1] in IMAGE_EXTENSIONS


def split_line(line: str) -> tuple[str, str | None]:
    """(path, label token) of a list line: the label is the last whitespace-separated token."""
    parts = line.strip().rsplit(None, 1)
    if len(parts) == 2 and not _is_image_path(line.strip()):
        return parts[0], parts[1]
    return line.strip(), None


def _dialect(path: Path, header: str) -> str:
    if path.suffix.lower() == ".tsv" or ("\t" in header and "," not in header):
        return "\t"
    if ";" in header and "," not in header:
        return ";"
    return ","


def _columns(header: list[str]) -> tuple[int | None, int | None]:
    names = [h.strip().lower() for h in header]
    path_col = next((names.index(c) for c in PATH_COLUMNS if c in names), None)
    label_col = next((names.index(c) for c in LABEL_COLUMNS if c in names), None)
    return path_col, label_col


INTEGER = re.compile(r"[+-]?[0-9]+")
DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
"""Numbers as a list file writes them: ASCII digits only (Python's int() also takes ``1_0`` and other scripts'
digits, which no C++ or pandas reader does)."""


def _number(token: str) -> int | float | None:
    """The label a token holds: an int, a float (also for integers beyond 64 bits: no class id, and the
    label checks report them as invalid), or None when it is no number."""
    if INTEGER.fullmatch(token):
        value = int(token)
        return value if -(1 << 63) <= value < 1 << 63 else float(value)
    if DECIMAL.fullmatch(token):
        return float(token)
    return None


class ImageListSource(ImageFilesSource):
    """A Caffe-style image list or a CSV of image paths and labels."""

    kind = "image-list"

    @classmethod
    def detect(cls, path: Path) -> bool:
        if not path.is_file():
            return False
        suffix = path.suffix.lower()
        lines = _head_lines(path)
        if not lines:
            return False
        if suffix in CSV_SUFFIXES:
            header = next(csv.reader([lines[0]], delimiter=_dialect(path, lines[0])))
            path_col, _ = _columns(header)
            if path_col is not None:
                return True
            rows = list(csv.reader(lines[1:], delimiter=_dialect(path, lines[0])))
            return any(_is_image_path(field) for row in rows[:5] for field in row)
        if suffix not in LIST_SUFFIXES or looks_like_hdf5_list(path):
            return False
        hits = sum(1 for ln in lines if _is_image_path(split_line(ln)[0]))
        labelled = sum(1 for ln in lines if isinstance(_number(split_line(ln)[1] or "x"), int))
        return hits * 2 > len(lines) or labelled * 2 > len(lines)

    @property
    def is_csv(self) -> bool:
        return self.path.suffix.lower() in CSV_SUFFIXES

    @property
    def root(self) -> Path:
        return Path(self.config.root).absolute() if self.config.root else self.path.parent

    @property
    def stream(self) -> str:
        return self.path.name

    @property
    def list_name(self) -> str:
        """The list file as locations name it (relative to the root when it lies below it)."""
        return self.relative(self.path)

    def listed_files(self) -> list[Path]:
        root = self.data_root()
        return [Path(os.path.join(root, e.path)) for e in self.entries(Partial())]

    def entries(self, partial: Partial) -> list[Entry]:
        rows = self._csv_rows(partial) if self.is_csv else self._list_rows(partial)
        labels = [label for _, _, label in rows if label is not None]
        names = sorted({x for x in labels if isinstance(x, str)})
        index = {n: i for i, n in enumerate(names)}
        out: list[Entry] = []
        root = self.root
        for line, entry, raw in rows:
            label = index[raw] if isinstance(raw, str) else raw
            if "\0" in entry:
                self._syntax(partial, line, f"the path holds a NUL byte: {entry!r}")
                continue
            target = Path(entry) if os.path.isabs(entry) else root / entry
            refused = self.outside(target)
            if refused is not None:
                partial.add("S001", Location(path=entry, line=line, detail=refused))
                continue
            try:
                st = target.stat()
            except FileNotFoundError:
                missing = Location(path=self.list_name, line=line, detail=f"{entry} does not exist")
                partial.add("S004", missing)
                continue
            except OSError as exc:
                partial.add("S001", Location(path=entry, line=line, detail=exc.strerror or str(exc)))
                continue
            if stat.S_ISDIR(st.st_mode):
                partial.add("S005", Location(path=self.list_name, line=line, detail=f"{entry} is a folder"))
                continue
            if not stat.S_ISREG(st.st_mode):  # never opened: reading a named pipe may block forever
                detail = "not a regular file (a named pipe, socket or device)"
                partial.add("S001", Location(path=entry, line=line, detail=detail))
                continue
            out.append(Entry(path=entry, size=st.st_size, line=line, label=label))
        if labels:
            partial.labels[self.stream] = LabelTally(
                path=self.list_name,
                classes=names,
                dtype_kind="f" if any(isinstance(x, float) for x in labels) else "i",
                run_threshold=self.config.run_threshold,
            )
        if not rows and not partial.findings:
            partial.add("S006", Location(path=self.list_name, detail="the list names no file"))
        return out

    def _syntax(self, partial: Partial, line: int, detail: str) -> None:
        partial.add("S005", Location(path=self.list_name, line=line, detail=detail))

    def _list_rows(self, partial: Partial) -> list[tuple[int, str, int | float | str | None]]:
        with self.path.open("r", encoding="utf-8-sig", errors="replace", newline="") as fh:
            lines = [(n, raw.rstrip("\r\n")) for n, raw in enumerate(fh, start=1)]
        parsed = [(n, text, *split_line(text)) for n, text in lines if text.strip()]
        labelled = any(token is not None for _, _, _, token in parsed)
        rows: list[tuple[int, str, int | float | str | None]] = []
        for n, text, entry, token in parsed:
            if not labelled:
                rows.append((n, entry, None))
                continue
            if token is None:
                if text[:1].isspace() and _number(entry) is not None:  # " 3": Caffe reads an empty path
                    self._syntax(partial, n, f"no path before the label {entry!r} (expected 'path label')")
                else:
                    self._syntax(partial, n, f"no label after {entry!r} (expected 'path label')")
                continue
            label = _number(token)
            if label is None:
                self._syntax(partial, n, f"label {token!r} is not a number (expected 'path label')")
                continue
            rows.append((n, entry, label))
        return rows

    def _csv_rows(self, partial: Partial) -> list[tuple[int, str, int | float | str | None]]:
        text = self.path.read_text(encoding="utf-8-sig", errors="replace")
        first = text.split("\n", 1)[0]
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=_dialect(self.path, first))
        header = next(reader, None)
        if header is None:
            return []
        path_col, label_col = _columns(header)
        if path_col is None:
            self._syntax(partial, 1, f"no path column in the header (one of: {', '.join(PATH_COLUMNS)})")
            return []
        rows: list[tuple[int, str, int | float | str | None]] = []
        raw_labels: list[tuple[int, str, str]] = []
        for record in reader:
            n = reader.line_num
            if not any(field.strip() for field in record):
                continue
            needed = max(path_col, label_col if label_col is not None else 0)
            if len(record) <= needed:
                self._syntax(partial, n, f"{len(record)} fields, the header has {len(header)}")
                continue
            entry = record[path_col].strip()
            if not entry:
                self._syntax(partial, n, f"empty {header[path_col]!r}")
                continue
            if label_col is None:
                rows.append((n, entry, None))
                continue
            token = record[label_col].strip()
            if not token:
                self._syntax(partial, n, f"empty {header[label_col]!r}")
                continue
            raw_labels.append((n, entry, token))
        numbers = [_number(t) for _, _, t in raw_labels]
        if all(x is not None for x in numbers):
            rows += [(n, e, x) for (n, e, _), x in zip(raw_labels, numbers, strict=True)]
        else:  # class names
            rows += [(n, e, t) for n, e, t in raw_labels]
        rows.sort(key=lambda r: r[0])
        return rows
