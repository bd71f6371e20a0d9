"""I013 duplicate-image: byte-identical images; across classes, a label conflict; across splits, leakage.

Each image's location goes to ``Partial.digests`` (compact: one entry per image) under the xxh3 digest of its bytes,
suffixed with its split (``digest@val``) in an image folder with splits, and last with its label
(``digest@val:label``; a class name may hold any character) when it has one; merging partials joins equal keys,
and the finalizer joins the keys of one digest:
more than one file is a group, more than one split leakage, more than one label in a split a conflict. One file
that a list names on several lines is a group too (it weighs more), and the detail says it is one file.
"""

from __future__ import annotations

import posixpath

import xxhash

from ..context import ScanContext
from ..imaging import Verdict
from ..items import EncodedImage
from ..location import Location
from ..severity import Severity
from .base import Check
from .image_prepass import own_length

CHECK = Check(
    code="I013",
    name="duplicate-image",
    severity=Severity.WARNING,
    summary=(
        "Finds groups of byte-identical images (same xxh3 digest of the bytes), and says when the copies "
        "carry different labels (a label conflict), or lie in different splits of an image folder (train and "
        "val: leakage between splits); and files a list names on more than one line."
    ),
    why=(
        "Copies weigh an image more than the others, and copies that cross a train/validation split inflate "
        "the validation score. Copies with different labels teach the model two answers for one input: the "
        "loss cannot reach zero on them, and they usually mean a labelling or merging error."
    ),
    fix=(
        "Keep one copy of each group; for a label conflict, decide the right label first. The detail names "
        "the "
        "other copies."
    ),
    message="{count} group{s} of byte-identical images ({values} redundant)",
)

SHOWN = 5


def on_image(item: EncodedImage, verdict: Verdict, ctx: ScanContext) -> None:
    if verdict.format is None or verdict.empty:
        return
    data = item.data[: own_length(item, verdict)] if item.padded else item.data  # the same image in any slot
    digest = item.digest or xxhash.xxh3_64_hexdigest(data)
    key = digest if item.split is None else f"{digest}@{item.split}"  # no per-file copy of the location
    if item.label is not None:
        key += f":{item.label}"
    ctx.partial.remember(key, item.location)


def _class_names(ctx: ScanContext) -> list[str]:
    """Class names by id when the scan's label streams (one, or the splits of an image folder) share them."""
    tallies = list(ctx.partial.labels.values())
    if not tallies or any(t.classes != tallies[0].classes for t in tallies[1:]):
        return []
    return list(tallies[0].classes)


def _label_text(label: str, names: list[str]) -> str:
    try:
        i = int(label)
    except ValueError:
        return label
    return f"{i} ({names[i]})" if 0 <= i < len(names) and names[i] != label else label


def _labels_text(labels: set[str], names: list[str]) -> str:
    return ", ".join(_label_text(x, names) for x in sorted(labels, key=lambda x: (len(x), x)))


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _splits_and_labels(labels: dict[str, set[str]], names: list[str]) -> str:
    """What a group's labels (by split, '' outside splits) say: leakage between splits, label conflicts."""
    text = ""
    splits = sorted(split for split in labels if split)
    if len(splits) > 1:
        text += f"; the same image in {_and(splits)} (leakage between splits)"
    conflicts = [(split, found) for split, found in sorted(labels.items()) if len(found) > 1]
    for split, found in conflicts:
        text += f"; label conflict{f' in {split}' if split else ''}: labels {_labels_text(found, names)}"
    across = {label for found in labels.values() for label in found}
    if not conflicts and len(splits) > 1 and len(across) > 1:
        each = ", ".join(f"{_labels_text(labels[split], names)} in {split}" for split in splits if labels[split])
        text += f", labelled {each}"
    return text


def _files(copies: list[Location]) -> list[list[Location]]:
    """``copies`` (in storage order) grouped by the file they read: a list may name one file on several lines,
    also spelled differently ('a.jpg', './a.jpg')."""
    by_file: dict[tuple[str, str | None, int | None, str | None], list[Location]] = {}
    for loc in copies:
        by_file.setdefault((posixpath.normpath(loc.path), loc.dataset, loc.index, loc.key), []).append(loc)
    relative = {key[0]: key for key in by_file if not key[0].startswith("/")}
    for key in [k for k in by_file if k[0].startswith("/") and by_file[k][0].line is not None]:
        # a list that names one file by its absolute path and by its path under the root: the bytes are the same
        # (one digest) and so is the name, so it is the same file (a list does not name two roots' copies)
        tail = key[0].split("/")
        same = next((relative[t] for t in ("/".join(tail[i:]) for i in range(1, len(tail))) if t in relative), None)
        if same is not None and same[1:] == key[1:] and by_file[same][0].line is not None:
            by_file[same] += by_file.pop(key)
    return list(by_file.values())


def _listed(same: list[Location]) -> str:
    """Where a list names one file: 'listed on lines 1 and 3' (else 'read 2 times')."""
    lines = [str(line) for line in sorted(loc.line for loc in same if loc.line is not None)]
    return f"listed on lines {_and(lines)}" if len(lines) == len(same) else f"read {len(same)} times"


def _first(texts: list[str]) -> Location:
    """The first in storage order of the locations ``texts`` hold (as compact JSON), parsed one at a time."""
    return min((Location.model_validate_json(text) for text in texts), key=Location.sort_key)


def _parts(key: str) -> tuple[str, str, str]:
    """(digest, split, label) of a key ``digest@split:label`` ('' for a part it does not have)."""
    head, _, label = key.partition(":")
    digest, _, split = head.partition("@")
    return digest, split, label


def finalize(ctx: ScanContext) -> None:
    held: dict[str, int] = {}
    for key, texts in ctx.partial.digests.items():
        digest = _parts(key)[0]
        held[digest] = held.get(digest, 0) + len(texts)
    by_digest: dict[str, tuple[list[str], dict[str, set[str]]]] = {}
    for key, texts in ctx.partial.digests.items():
        digest, split, label = _parts(key)
        if held[digest] < 2:  # most images: held once, never parsed back
            continue
        members, labels = by_digest.setdefault(digest, ([], {}))
        members.extend(texts)
        found = labels.setdefault(split, set())
        if label:
            found.add(label)
    # a group is placed by its first copy; only the groups shown keep their copies as locations (every copy of
    # every group as a Location, 800 bytes each, grew with the number of duplicated images)
    groups = [(_first(texts).sort_key(), texts, lab) for texts, lab in by_digest.values() if len(texts) > 1]
    if not groups:
        return
    groups.sort(key=lambda g: g[0])
    names_by_id = _class_names(ctx)
    locs = []
    for _, texts, labels in groups[: ctx.partial.cap]:
        copies = sorted((Location.model_validate_json(text) for text in texts), key=Location.sort_key)
        first, others = copies[0], copies[1:]
        files = _files(copies)
        if len(files) == 1:  # one file read more than once: a list naming it on several lines
            copies.sort(key=lambda loc: -1 if loc.line is None else loc.line)  # ('./a.jpg' sorts before 'a.jpg')
            first = copies[0]
            text = f"the same file {_listed(copies)} (each epoch reads it {len(copies)} times)"
        else:
            names = ", ".join(m.short() for m in others[:SHOWN])
            if len(others) > SHOWN:
                names += f" and {len(others) - SHOWN} more"
            text = f"{len(copies)} identical copies: also {names}"
            repeated = [same for same in files if len(same) > 1]
            text += "".join(f"; {same[0].path} is one file {_listed(same)}" for same in repeated[:SHOWN])
        text += _splits_and_labels(labels, names_by_id)
        locs.append(first.model_copy(update={"detail": text}))
    ctx.emit_many(CHECK.code, len(groups), sum(len(texts) - 1 for _, texts, _ in groups), locs)
