"""Image list files: Caffe's convert_imageset lists and CSV files naming the images and their labels.

A list (``.txt``, ``.lst``, ``.list``): one image per line, ``relative/path label``. As in Caffe, the label
is the last space-separated token, so paths may contain spaces; a list in which no line has a label is an
unlabelled list. A CSV (``.csv``, ``.tsv``): a header row naming the path column (path, file, filename,
image, filepath ...) and the label column (label, class, target, y ...). Labels are integers, or class
names (sorted names become class ids, as for folders).

Paths are relative to the list file's folder, or to ``--root`` (``config.root``); absolute paths are kept.
Every listed file must exist (``missing-file``, with the line) and every line must parse (``list-syntax``,
with the line). Storage order is list order, the order Caffe and sequential readers see. A list with classic
Mac OS line endings (CR only) is one line to Caffe: it is ``list-syntax``, and its lines are read as Python
reads them.

A ``.txt`` whose lines name HDF5 files is an HDF5 list (``hdf5list.py``), never an image list.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import ConfigError, SourceNotFound, UnsupportedSource
from ..imaging.sniff import IMAGE_EXTENSIONS
from ..location import Location
from ..partial import LabelTally, Partial
from ..text import printable
from .base import note_unused_labels
from .hdf5_files import LIST_SUFFIXES, SNIFF_LINES, is_binary, looks_like_hdf5_list
from .images import Entry, ImageFilesSource
from .list_roots import OtherRoot
from .walk import Outside

CSV_SUFFIXES = frozenset({".csv", ".tsv"})
PATH_COLUMNS = ("path", "filepath", "file_path", "filename", "file_name", "file", "image", "image_path",
                "imagepath", "img", "img_path", "image_file", "fname")  # fmt: skip
LABEL_COLUMNS = ("label", "labels", "class", "class_id", "classid", "target", "y", "category", "category_id")


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
"""Excel's "Unicode text" saves UTF-16 with a byte-order mark."""


def _decode(raw: bytes) -> str:
    """A list file's text: UTF-16 after its byte-order mark, else UTF-8 (a BOM dropped); bytes that are no
    UTF-8 (a Latin-1 file name) are kept as they are (surrogate escapes), so the file they name is found."""
    if raw.startswith(UTF16_BOMS):
        return raw.decode("utf-16", "replace")
    return raw.decode("utf-8-sig", "surrogateescape")


def _head_lines(path: Path) -> list[str]:
    try:
        with path.open("rb") as fh:
            head = fh.read(64 << 10)
    except OSError:
        return []
    if is_binary(head) and not head.startswith(UTF16_BOMS):
        return []
    return [ln for ln in _decode(head).splitlines() if ln.strip()][:SNIFF_LINES]


def _is_image_path(text: str) -> bool:
    return os.path.splitext(text.strip().lower())[1] in IMAGE_EXTENSIONS


def split_line(line: str) -> tuple[str, str | None]:
    """(path, label token) of a list line: the label is the last whitespace-separated token."""
    parts = line.strip().rsplit(None, 1)
    if len(parts) == 2 and not _is_image_path(line.strip()):
        return parts[0], parts[1]
    return line.strip(), None


def split_tabbed(line: str) -> tuple[str, str | None]:
    """(path, label token) of a line of a list separated by tabs: the label after the last tab (a path may hold
    spaces, which is why such lists use tabs); a line without a tab has no label."""
    path, tab, token = line.strip().rpartition("\t")
    return (path.strip(), token.strip()) if tab else (line.strip(), None)


def split_commaed(line: str) -> tuple[str, str | None]:
    """(path, label token) of a line of a list separated by commas (``path,label``: a CSV without a header saved
    as .txt): the label after the last comma; a line without a comma has no label."""
    path, comma, token = line.strip().rpartition(",")
    return (path.strip(), token.strip()) if comma else (line.strip(), None)


def _commaed(line: str) -> bool:
    """Whether ``line`` reads ``image path,label``."""
    path, token = split_commaed(line)
    return token is not None and _is_image_path(path)


def _dialect(path: Path, header: str) -> str:
    if path.suffix.lower() == ".tsv" or ("\t" in header and "," not in header):
        return "\t"
    if ";" in header and "," not in header:
        return ";"
    return ","


def _columns(header: list[str], wanted: str | None = None) -> tuple[int | None, int | None]:
    """(path column, label column) by the header's names; ``wanted`` (``--labels``) names the label column."""
    names = [h.strip().lower() for h in header]
    path_col = next((names.index(c) for c in PATH_COLUMNS if c in names), None)
    chosen = (wanted.strip().lower(),) if wanted else LABEL_COLUMNS
    label_col = next((names.index(c) for c in chosen if c in names), None)
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


CAFFE_INT = 1 << 31
"""Caffe reads a list's labels into a C ``int`` (``atoi``): 32 bits."""


def _too_large(token: str, caffe: bool) -> str | None:
    """Why a whole-number label, quoted as written, is no class id any reader holds: beyond 64 bits (as a float
    it would no longer be the number written), or, in a Caffe list, beyond the C ``int`` its ``atoi`` fills."""
    if not INTEGER.fullmatch(token):
        return None
    value = int(token)
    if not -(1 << 63) <= value < 1 << 63:
        return f"label {token} does not fit a 64-bit integer: no reader holds it as written"
    if caffe and not -CAFFE_INT <= value < CAFFE_INT:
        return f"label {token} does not fit a 32-bit int: Caffe's atoi reads it into one (it overflows)"
    return None


def _caffe_misreads(text: str, entry: str, token: str) -> str | None:
    """How Caffe's parser (the path before the last space, the label after it) reads a line otherwise than as
    ``entry`` and ``token``: a tab or a no-break space before the label, two spaces, spaces around the line."""
    pos = text.rfind(" ")
    path, label = (text[:pos], text[pos + 1 :]) if pos >= 0 else (text, text)
    if path == entry and label.rstrip() == token:  # atoi stops at a tab or no-break space after the digits
        return None
    if pos < 0:
        return f"the label is not separated by a space: Caffe reads the whole line {text!r} as the path"
    return f"Caffe reads the path as {path!r} and the label as {label!r} (expected 'path label', one space)"


def _csv_records(
    lines: list[str], start: int, delimiter: str, key_columns: set[int | None]
) -> Iterator[tuple[int, list[str] | str]]:
    """(line number of its first line, record) for each CSV record of ``lines`` from index ``start``; a str in
    place of the record is what is wrong with the record starting on that line. A quoted field that runs over
    lines in the path or label column, or to the end of the file (an unclosed quote: pandas refuses the file,
    a lenient reader takes the rest of the file for one cell), is reported at the line where it opens, and
    reading resumes on the next line, so the lines it swallowed are still read."""
    import csv  # (here and in ``_csv_rows``: every scan imports this module to detect its format)

    while start < len(lines):
        reader = csv.reader(iter(lines[start:]), delimiter=delimiter)
        resume = None
        while True:
            first = start + reader.line_num + 1  # 1-based number of the record's first line
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # a field beyond the size limit: an unclosed quote in a big file
                yield first, f"unreadable CSV record ({exc}): an unclosed quote?"
                resume = first
                break
            last = start + reader.line_num
            if last > first:
                spanning = [i for i, field in enumerate(record) if "\n" in field or "\r" in field]
                unclosed = last == len(lines) and "".join(lines[first - 1 :]).count('"') % 2 == 1
                if unclosed or any(i in key_columns for i in spanning):
                    yield first, f"a quoted field runs from line {first} to line {last}: an unclosed quote?"
                    resume = first
                    break
            yield first, record
        start = resume


MULTI_LABEL_ROWS = 2
"""Rows with several labels (``1 5 7``, ``cat|dog``) that make a label column a multi-label one; a single such
row in a column of class ids is a bad cell (a typo)."""


def _several(cell: str) -> bool:
    """Whether a label cell holds several labels: class ids separated by spaces (``1 5 7``; class names may
    hold spaces), or labels separated by ``|`` or ``;`` (``cat|dog``)."""
    for sep in ("|", ";"):
        if sep in cell:
            return all(part.strip() for part in cell.split(sep))
    parts = cell.split()
    return len(parts) > 1 and all(INTEGER.fullmatch(part) for part in parts)


def _atoi(token: str) -> int:
    """C's ``atoi``, as Caffe reads a label: the leading sign and digits, 0 when there are none."""
    found = INTEGER.match(token.lstrip())
    return int(found.group()) if found else 0


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, text without its end) of each line of a list, one at a time (a list of a million lines
    split at once held every line two or three times over); an empty last line is the end of the one before."""
    start, number = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        line = text[start : len(text) if end < 0 else end].rstrip("\r")
        if end >= 0 or line:
            yield number, line
        if end < 0:
            return
        start, number = end + 1, number + 1


def _is_im2rec(lines: Iterable[tuple[int, str]]) -> bool:
    """Whether most lines are MXNet im2rec's ``index<TAB>label<TAB>path``."""
    texts = hits = 0
    for _, text in lines:
        if not text.strip():
            continue
        texts += 1
        fields = text.split("\t")
        hits += len(fields) >= 3 and bool(INTEGER.fullmatch(fields[0].strip())) and _is_image_path(fields[-1])
        if texts == SNIFF_LINES:
            break
    return texts > 0 and hits * 2 > min(texts, SNIFF_LINES)


def _holds_paths(records: list[list[str]], col: int) -> bool:
    """Whether most sampled rows hold an image file name in column ``col``."""
    sample = [r for r in records[:SNIFF_LINES] if any(f.strip() for f in r)]
    hits = sum(1 for r in sample if col < len(r) and _is_image_path(r[col]))
    return bool(sample) and hits * 2 > len(sample)


def _windows(entry: str, root: Path) -> str:
    """A hint for a listed path that does not exist: that it is a Windows path whose file exists with '/' (a list
    written on Windows: '\\' separates nothing here, and every reader fails on it), else ''."""
    if "\\" not in entry or os.sep == "\\":
        return ""
    posix = entry.replace("\\", "/")
    if not os.path.isfile(posix if os.path.isabs(posix) else root / posix):
        return ""
    return f" ({posix} does: the list was written with Windows separators)"


def _dangling(entry: str, root: Path) -> str:
    """A hint for a listed path that does not exist: that it is a link to a file that does not exist."""
    target = Path(entry) if os.path.isabs(entry) else root / entry
    try:
        pointee = os.readlink(target)
    except OSError:
        return ""
    return f" (a link to {printable(pointee)}, which does not exist)"


def _extra_fields(entry: str, root: Path) -> str:
    """A hint for a listed path that does not exist: that the path before a space exists, so the line holds more
    than a path and a label (``a.jpg 1 2``: Caffe reads the path as everything before the last space)."""
    if " " not in entry or len(entry) > 4096:
        return ""
    at = entry.rfind(" ")
    while at > 0:
        head = entry[:at]
        if os.path.isfile(head if os.path.isabs(head) else root / head):
            return f" ({head} does: the line holds more than a path and a label?)"
        at = entry.rfind(" ", 0, at)
    return ""


Listings = dict[str, dict[str, str]]
"""Per folder, its image files by name without the extension: looked up for ids that name no file."""


def _with_extension(folder: str, stem: str, listings: Listings) -> str | None:
    """The name of the image file in ``folder`` that is ``stem`` plus an image extension, None when there is
    none; each folder is listed once (``listings``)."""
    names = listings.get(folder)
    if names is None:
        names = {}
        with contextlib.suppress(OSError):
            for found in sorted(os.listdir(folder)):
                base, ext = os.path.splitext(found)
                if ext.lower() in IMAGE_EXTENSIONS:
                    names.setdefault(base, found)
        listings[folder] = names
    return names.get(stem)


def _extensionless(entry: str, root: Path, listings: Listings) -> str:
    """A hint for a listed path that does not exist: that the file exists with an image extension (an id
    column, ``0a1b2c`` for ``0a1b2c.png``: every loader fails on the bare id), else ''."""
    if os.path.splitext(entry)[1].lower() in IMAGE_EXTENSIONS:
        return ""
    folder, stem = os.path.split(entry if os.path.isabs(entry) else os.path.join(root, entry))
    found = _with_extension(folder, stem, listings)
    if found is None:
        return ""
    return f" ({os.path.join(os.path.dirname(entry), found)} does: the list names the file without its extension)"


def _id_hint(header: list[str], records: list[list[str]], root: Path) -> str:
    """For a CSV without a column of image paths: the column whose values are the names of images without
    their extension, in the root or a folder in it (Kaggle's ``id`` beside ``train/<id>.png``), as a hint
    ('' when there is none)."""
    listings: Listings = {}
    try:
        with os.scandir(root) as it:
            folders = ["", *sorted(e.name for e in it if e.is_dir())]
    except OSError:
        return ""
    sample = [r for r in records[:SNIFF_LINES] if any(f.strip() for f in r)]
    for col, name in enumerate(header):
        values = [r[col].strip() for r in sample if col < len(r) and r[col].strip()]
        if len(set(values)) < len(values):  # ids name one image each (a label column repeats its values)
            continue
        for folder in folders:
            found = [_with_extension(os.path.join(root, folder), v, listings) for v in values]
            if values and sum(f is not None for f in found) * 2 > len(values):
                example = os.path.join(folder, next(f for f in found if f is not None))
                return (
                    f"(the values of {name!r} are the names of images without their extension: {example} exists;"
                    " add a column of the file names)"
                )
    return ""


def _label_column(records: list[list[str]], path_col: int) -> int | None:
    """The label column of a CSV without a header: the one column beside the paths whose sampled values are all
    integers, else the only column beside them (class names); None when there is none, or more than one
    column of integers (box coordinates, ids ...)."""
    sample = [r for r in records[:SNIFF_LINES] if any(f.strip() for f in r)]
    others = [col for col in range(max((len(r) for r in sample), default=0)) if col != path_col]
    found = [col for col in others if all(col < len(r) and INTEGER.fullmatch(r[col].strip()) for r in sample)]
    if len(found) == 1:
        return found[0]
    return others[0] if len(others) == 1 and not found else None


def _path_column(name: str, header: list[str], records: list[list[str]], root: Path) -> int:
    """The column of image paths when the header names none of PATH_COLUMNS: the one whose values are image
    file names (Kaggle's ``image_id`` of ``1000015157.jpg``). Raises UnsupportedSource when there is none."""
    for col in range(len(header)):
        if _holds_paths(records, col):
            return col
    columns = ", ".join(repr(h) for h in header)
    hint = _id_hint(header, records, root) or (
        f"(a column named one of {', '.join(PATH_COLUMNS)}, or of names such as 'a/b.jpg'; ids without an "
        "extension need a column of file names added)"
    )
    raise UnsupportedSource(
        f"{name}: no column of image paths: the header has {columns}, and no column's values are image file names "
        + hint,
        "",
    )


MAX_PATH_BYTES = 4095
"""The longest path Linux opens (``PATH_MAX`` less its NUL); a listed path longer in characters is longer in bytes."""


class ImageListSource(ImageFilesSource):
    """A Caffe-style image list or a CSV of image paths and labels."""

    kind = "image-list"

    @classmethod
    def detect(cls, path: Path, outside: Outside | None = None) -> bool:
        if not path.is_file():
            return False
        suffix = path.suffix.lower()
        lines = _head_lines(path)
        if not lines:
            return False
        if suffix in CSV_SUFFIXES:  # named as a dataset: read as one, and what it lacks is said in words
            return True
        if (suffix and suffix not in LIST_SUFFIXES) or looks_like_hdf5_list(path):
            return False
        hits = sum(1 for ln in lines if _is_image_path(split_line(ln)[0]))
        if not suffix:  # a list named without an extension ('trainlist'): when its lines mostly name images
            return hits * 2 > len(lines)
        labelled = sum(1 for ln in lines if isinstance(_number(split_line(ln)[1] or "x"), int))
        commas = sum(1 for ln in lines if _commaed(ln))
        return hits * 2 > len(lines) or labelled * 2 > len(lines) or commas * 2 > len(lines)

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
        """The list file as locations name it: relative to the root, as every location is (``../train.txt``
        for a list beside a ``--root`` folder), so a report names no folder of the machine it ran on."""
        inside = self.relative(self.path)
        return inside if not os.path.isabs(inside) else Path(os.path.relpath(self.path, self.root)).as_posix()

    def listed_files(self) -> list[Path]:
        root = self.data_root()
        return [Path(os.path.join(root, e.path)) for e in self.entries(Partial())]

    def entries(self, partial: Partial) -> list[Entry]:
        if self.config.root and not Path(self.config.root).is_dir():
            raise SourceNotFound(
                f"root {self.config.root} (--root, or root in a config file): no such folder (the list's paths are "
                "relative to it)"
            )
        if not self.is_csv:
            note_unused_labels(partial, self.config, "a list file's labels are the numbers after its paths")
        rows = self._csv_rows(partial) if self.is_csv else self._list_rows(partial)
        labels = [label for _, _, label in rows if label is not None]
        names = sorted({x for x in labels if isinstance(x, str)})
        index = {n: i for i, n in enumerate(names)}
        out: list[Entry] = []
        root, name = self.root, self.list_name  # (a property of pathlib calls: 20 µs a missing file, 1M lines)
        listings: Listings = {}
        elsewhere = OtherRoot(root, self.outside)
        for line, entry, raw in rows:
            label = index[raw] if isinstance(raw, str) else raw
            if "\0" in entry:
                self._syntax(partial, line, f"the path holds a NUL byte: {entry!r}")
                continue
            if len(entry) > MAX_PATH_BYTES:  # (never copied whole into the report)
                detail = f"a path of {len(entry):,} characters, beyond any file system's {MAX_PATH_BYTES:,} bytes"
                self._syntax(partial, line, f"{detail}: {entry[:60]!r}...")
                continue
            target = Path(entry) if os.path.isabs(entry) else root / entry
            refused = self.outside(target)
            if refused is not None:
                partial.add("S001", Location(path=entry, line=line, detail=refused))
                continue
            try:
                st = target.stat()
            except FileNotFoundError:
                hint = (
                    _dangling(entry, root)
                    or _windows(entry, root)
                    or _extra_fields(entry, root)
                    or _extensionless(entry, root, listings)
                    or elsewhere.hint(entry, len(out))
                )
                missing = Location(path=name, line=line, detail=f"{entry} does not exist{hint}")
                partial.add("S004", missing)
                continue
            except OSError as exc:
                partial.add("S001", Location(path=entry, line=line, detail=exc.strerror or str(exc)))
                continue
            if stat.S_ISDIR(st.st_mode):
                partial.add("S005", Location(path=name, line=line, detail=f"{entry} is a folder"))
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
        text_all = _decode(self.path.read_bytes())
        if "\n" not in text_all and "\r" in text_all.rstrip("\r"):
            # classic Mac OS line endings: std::getline (Caffe, HDF5Data) reads one line; Python splits them
            count = len(text_all.rstrip("\r").split("\r"))
            self._syntax(
                partial,
                1,
                f"the list uses CR line endings (classic Mac OS): Caffe's std::getline reads its {count:,} lines as"
                " one line (Python's open() splits them, and so does this scan); convert them to LF: tr '\\r' '\\n'",
            )
            text_all = text_all.replace("\r", "\n")
        if _is_im2rec(numbered_lines(text_all)):
            return self._im2rec_rows(partial, numbered_lines(text_all))
        # the lines are read again for each vote, one at a time: the rows are the only copy kept
        filled = tabs = commas = 0
        for _, text in numbered_lines(text_all):
            stripped = text.strip()
            filled += bool(stripped)
            tabs += "\t" in stripped
            commas += _commaed(stripped)
        tabbed = tabs * 2 > filled  # "path<TAB>label" lines
        commaed = not tabbed and commas * 2 > filled  # "path,label" lines: read as their writer meant them
        split = split_tabbed if tabbed else split_commaed if commaed else split_line
        # labelled when most lines carry a label (one comment line does not make a list of paths a labelled one)
        tokens = sum(split(text)[1] is not None for _, text in numbered_lines(text_all) if text.strip())
        labelled = tokens * 2 >= filled > 0
        if labelled:  # (an unlabelled list is no Caffe list)
            for n, text in numbered_lines(text_all):
                if not text.strip():  # std::getline hands Caffe an empty line: an empty path
                    self._syntax(partial, n, "blank line: Caffe reads an empty path here (ImageDataLayer stops)")
        rows: list[tuple[int, str, int | float | str | None]] = []
        for n, text in numbered_lines(text_all):
            if not text.strip():
                continue
            entry, token = split(text)
            if not labelled:
                if text.lstrip().startswith("#"):  # no list reader skips comments: it is read as a file name
                    self._syntax(partial, n, "a comment line: list readers take it for a file name")
                else:
                    rows.append((n, entry, None))
                continue
            if text.lstrip().startswith("#") and not _is_image_path(entry):  # Caffe reads '# path' as a path
                self._syntax(partial, n, "a comment line: list readers take it for a file name")
                continue
            misread = None if tabbed or commaed or token is None else _caffe_misreads(text, entry, token)
            if misread is not None:
                self._syntax(partial, n, misread)
                continue
            # A line whose label is bad still names its image: it is judged too (unlabelled), so that a run
            # does not first fail on the label and, once that is mended, on the image.
            if token is None:
                if text[:1].isspace() and _number(entry) is not None:  # " 3": Caffe reads an empty path
                    self._syntax(partial, n, f"no path before the label {entry!r} (expected 'path label')")
                else:
                    self._syntax(partial, n, f"no label after {entry!r} (expected 'path label')")
                    rows.append((n, entry, None))
                continue
            label = _number(token)
            if label is None:
                self._syntax(partial, n, f"label {token!r} is not a number (expected 'path label')")
                rows.append((n, entry, None))
                continue
            too_large = _too_large(token, caffe=not (tabbed or commaed))
            if too_large is not None:
                partial.add("L002", Location(path=entry, line=n, detail=too_large))
                rows.append((n, entry, None))
                continue
            if isinstance(label, float) and "e" in token.lower() and math.isfinite(label):
                # Caffe's atoi reads '1e3' as 1, Python's int() refuses it: no reader gets 1000
                self._syntax(partial, n, f"label {token!r} has an exponent (Caffe reads {_atoi(token)}, int() fails)")
                rows.append((n, entry, None))
                continue
            rows.append((n, entry, label))
        return rows

    def _csv_rows(self, partial: Partial) -> list[tuple[int, str, int | float | str | None]]:
        import csv

        text = _decode(self.path.read_bytes())
        body = text.lstrip("\r\n")  # blank lines before the header, which pandas skips too
        after = next((ln for ln in body.split("\n", SNIFF_LINES) if ln.strip() and not ln.startswith("#")), "")
        delimiter = _dialect(self.path, after)
        while body.startswith("#"):  # a comment line before the header: pandas reads it as the header
            comment, _, rest = body.partition("\n")
            if comment.count(delimiter) == after.count(delimiter):  # '#path,label': a header starting with '#'
                break
            line = text[: len(text) - len(body)].count("\n") + 1
            detail = "a comment line before the header: pandas' read_csv takes it for the header (comment='#' skips it)"
            self._syntax(partial, line, detail)
            body = rest.lstrip("\r\n")
        skipped = text[: len(text) - len(body)].count("\n")
        first = body.split("\n", 1)[0]
        lines = list(io.StringIO(body, newline=""))
        delimiter = _dialect(self.path, first)
        try:
            header = next(csv.reader(lines[:1], delimiter=delimiter), None)
        except csv.Error:
            header = None
        if header is None:
            return []
        path_col, label_col = _columns(header, self.config.labels)
        headerless = next((i for i, h in enumerate(header) if _is_image_path(h)), None) if path_col is None else None
        if self.config.labels and (label_col is None or headerless is not None):
            shown = "it has no header" if headerless is not None else f"its columns: {', '.join(map(repr, header))}"
            raise ConfigError(f"labels {self.config.labels!r}: no column of that name in {self.path.name} ({shown})")
        if headerless is not None:  # the first line names an image: it is a row (pandas' header=None), no header
            path_col, header = headerless, [f"column {i + 1}" for i in range(len(header))]
        records: list[tuple[int, list[str]]] = []
        start = 0 if headerless is not None else 1
        for n, record in _csv_records(lines, start, delimiter, {path_col, label_col}):
            if isinstance(record, str):
                self._syntax(partial, n + skipped, record)
            else:
                records.append((n + skipped, record))
        if not any(any(field.strip() for field in record) for _, record in records):
            return []  # a header alone: the list names no file
        rows_only = [record for _, record in records]
        if headerless is not None:
            path_col, label_col = headerless, _label_column(rows_only, headerless)
            labels = "no labels" if label_col is None else f"labels in column {label_col + 1}"
            partial.info["images.list"] = (
                f"{self.path.name} has no header: line 1 is a row (paths in column {headerless + 1}, {labels})"
            )
        elif path_col is None:
            path_col = _path_column(self.path.name, header, rows_only, self.root)
        elif not _holds_paths(rows_only, path_col) and not self._existing(rows_only, path_col):
            # named 'image' but holding ids (no such files): a column of file names wins
            with contextlib.suppress(UnsupportedSource):
                path_col = _path_column(self.path.name, header, rows_only, self.root)
        others = [h for i, h in enumerate(header) if i != path_col and h.strip()]
        if label_col is None and headerless is None and others:  # a label column by another name is not guessed
            partial.info["images.labels"] = (
                f"{self.path.name}: no label column ({', '.join(map(repr, others))} not read as labels; "
                f"{', '.join(LABEL_COLUMNS)} are, and --labels NAME names another): the images have no labels"
            )
        rows: list[tuple[int, str, int | float | str | None]] = []
        raw_labels: list[tuple[int, str, str]] = []
        for n, record in records:
            if not any(field.strip() for field in record):
                continue
            needed = max(path_col, label_col if label_col is not None else 0)
            if len(record) <= needed:
                self._syntax(partial, n, f"{len(record)} fields, the header has {len(header)}")
                continue
            if any(field.strip() for field in record[len(header) :]):  # pandas refuses such a row too
                self._syntax(partial, n, f"{len(record)} fields, the header has {len(header)} (an unquoted comma?)")
                continue
            entry = record[path_col].strip()
            if not entry:
                self._syntax(partial, n, f"empty {header[path_col]!r}")
                continue
            if entry != record[path_col] and self._names_a_file(record[path_col]):
                entry = record[path_col]  # a name that does end in a space: what the loader opens
            elif entry != record[path_col]:  # (the image under the name meant is judged all the same)
                self._syntax(
                    partial,
                    n,
                    f"spaces around the path {record[path_col]!r}: pandas' read_csv keeps them, so a loader opens a "
                    "file of that name, which does not exist (strip them from the list)",
                )
            if label_col is None:
                rows.append((n, entry, None))
                continue
            raw_labels.append((n, entry, record[label_col].strip()))
        column = header[label_col] if label_col is not None else ""
        several = sum(_several(t) for _, _, t in raw_labels)
        if several >= MULTI_LABEL_ROWS:  # several labels to a row: no class id per image to check
            rows += [(n, e, None) for n, e, _ in raw_labels]
            partial.info["images.labels"] = (
                f"{self.path.name}: {column!r} holds several labels in {several:,} rows (multi-label): "
                "the label checks do not run"
            )
            raw_labels = []
        for n, e, t in raw_labels:  # (as in a Caffe list, the image of a row with a bad label is judged too)
            if not t:
                self._syntax(partial, n, f"empty {column!r}")
                rows.append((n, e, None))
        raw_labels = [(n, e, t) for n, e, t in raw_labels if t]
        numbers = [_number(t) for _, _, t in raw_labels]
        named = sum(x is None for x in numbers)
        if named * 2 < len(numbers):  # class ids: a cell that is no number is a bad cell, not a class name
            for (n, e, t), x in zip(raw_labels, numbers, strict=True):
                too_large = _too_large(t, caffe=False)
                if x is None:
                    self._syntax(partial, n, f"label {t!r} is not a number (the column holds class ids)")
                    rows.append((n, e, None))
                elif too_large is not None:
                    partial.add("L002", Location(path=e, line=n, detail=too_large))
                    rows.append((n, e, None))
                else:
                    rows.append((n, e, x))
        else:  # class names
            rows += [(n, e, t) for n, e, t in raw_labels]
        rows.sort(key=lambda r: r[0])
        return rows

    def _names_a_file(self, entry: str) -> bool:
        """Whether ``entry``, exactly as written, names a file (relative to the list's root)."""
        return os.path.lexists(entry if os.path.isabs(entry) else self.root / entry)

    def _existing(self, records: list[list[str]], col: int) -> bool:
        """Whether most sampled values of column ``col`` name files that exist (files need no extension)."""
        sample = [r[col].strip() for r in records[:SNIFF_LINES] if col < len(r) and r[col].strip()]
        found = sum(1 for value in sample if os.path.isfile(value if os.path.isabs(value) else self.root / value))
        return bool(sample) and found * 2 > len(sample)

    def _im2rec_rows(
        self, partial: Partial, lines: Iterable[tuple[int, str]]
    ) -> list[tuple[int, str, int | float | str | None]]:
        """MXNet im2rec's ``.lst``: ``index<TAB>label<TAB>path`` (more labels for multi-label data: the label
        checks then do not run)."""
        rows: list[tuple[int, str, int | float | str | None]] = []
        for n, text in lines:
            fields = text.split("\t")
            if len(fields) < 3 or not INTEGER.fullmatch(fields[0].strip()) or not fields[-1].strip():
                self._syntax(partial, n, "expected index<TAB>label<TAB>path (an MXNet im2rec list)")
                continue
            labels = [_number(f.strip()) for f in fields[1:-1]]
            if any(x is None for x in labels):
                self._syntax(partial, n, f"label {fields[1]!r} is not a number")
                continue
            rows.append((n, fields[-1].strip(), labels[0] if len(labels) == 1 else None))
        return rows
