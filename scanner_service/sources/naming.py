"""Which arrays are class labels, by name: the rule every array format shares (HDF5 datasets, NumPy files and
archive members).

Without ``--labels``, an array is labels when its name is one of ``LABEL_NAMES``, alone or with the name of a
split (``y_train``, ``test_labels``: Keras-style files; ``trainY`` in camelCase; ``train_set_y`` with a word of
``FILLER`` between, as the deeplearning.ai course files are laid out). ``--labels NAME`` names them instead: a
bare name matches the last part of a path (any group, any folder), a path (``/train/y``) the whole of it.

Label arrays of one name in several files are one label stream (the shards of one training set), but not across
splits: ``train/y.npy`` and ``val/y.npy`` are the streams ``train/y`` and ``val/y``, so that a class missing from
the validation split is reported, as for image folders. Outside split folders the file's own name may name the
split (``train.h5`` and ``val.h5``, ``cifar_test.npz``): their labels are one stream per split too.
"""

from __future__ import annotations

import re

LABEL_NAMES = frozenset({"label", "labels", "y", "target", "targets"})

SPLITS = {
    **dict.fromkeys(("train", "training"), "train"),
    **dict.fromkeys(("test", "testing"), "test"),
    **dict.fromkeys(("val", "valid", "validation", "dev"), "val"),
}
"""Words that name a split of the data in an array's name (``X_train``, ``y_val``), and the split each names."""

FILLER = frozenset({"set", "data"})
"""Words that say nothing of what an array holds (``train_set_y``, ``test_set_x`` of the deeplearning.ai course
files): left out when a name is judged, so that the split and the label word are what remains."""


def name_words(name: str) -> list[str]:
    """The words of an array's own name (the last part of its path), lower case: split at every character that is
    no letter and where camelCase starts a word (``trainY``, ``XTest``), as people name arrays both ways."""
    base = name.rsplit("/", 1)[-1]
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base)
    return [w for w in re.split(r"[^a-z]+", spaced.lower()) if w]


def is_label_name(name: str, labels_option: str | None) -> bool:
    """Whether an array named ``name`` (a path whose parts are separated by ``/``) holds labels."""
    if labels_option:
        if "/" not in labels_option:
            return name.rsplit("/", 1)[-1] == labels_option
        return name.lstrip("/") == labels_option.lstrip("/")
    base = name.rsplit("/", 1)[-1].lower()
    words = set(name_words(name)) - FILLER
    return base in LABEL_NAMES or (len(words) == 2 and bool(words & LABEL_NAMES) and bool(words & SPLITS.keys()))


DATA_NAMES = frozenset({"x", "data", "features", "feature", "inputs", "input", "images", "imgs", "samples", "examples"})
"""Names that say an array holds the samples (``X``, ``X_train``, ``features``, ``train_images``), alone or with the
name of a split: labels beside such an array are its labels, whatever their lengths."""


def is_data_name(name: str) -> bool:
    """Whether an array named ``name`` is, by its name, the samples of a dataset (``DATA_NAMES``)."""
    base = name.rsplit("/", 1)[-1].lower()
    words = [w for w in name_words(name) if w not in SPLITS and w not in FILLER]
    return base in DATA_NAMES or (len(words) == 1 and words[0] in DATA_NAMES)


def lengths_differ(data_name: str, data_rows: int, label_name: str, label_rows: int) -> bool:
    """Whether the labels ``label_name`` belong to the array ``data_name`` and miss its length: within a factor
    of 2 of each other (further off, it is another table: a mean image, class weights), or whatever the lengths
    when the array is named as the samples of the labels' split (``features.npy`` of 1,000 beside labels of 400:
    a label file cut short; not ``X_val`` beside ``label``)."""
    if data_rows == label_rows:
        return False
    if label_rows <= 2 * data_rows and data_rows <= 2 * label_rows:
        return True
    return is_data_name(data_name) and split_of(data_name) == split_of(label_name)


def split_of(name: str) -> str | None:
    """The split an array's name names (``X_train`` and ``train_labels``: train), None for none."""
    return next((SPLITS[w] for w in name_words(name) if w in SPLITS), None)


def split_folder(rel: str) -> str | None:
    """The split folder a file lies in, as written (``val/part1.h5``: ``val``): the first of its folders named
    like a split (``SPLITS``), None for none."""
    return next((part for part in rel.split("/")[:-1] if part.lower() in SPLITS), None)


def split_of_file(rel: str) -> str | None:
    """The split a file's own name names (``val.h5``, ``mnist_test.h5``, ``train_000.npz``: the name up to its
    first dot), None for none."""
    return split_of(rel.rsplit("/", 1)[-1].split(".", 1)[0])


def split_stream(rel: str, name: str) -> str:
    """The label stream of the labels named ``name`` in the file ``rel``: the name, after the split folder
    when the file lies in one (``val/label``), else after the split the file's name names (``val.h5``: the
    labels of ``train.h5`` beside it are another split, not more shards of one set: merged, a class missing from
    val was hidden by train's samples) unless the labels' own name names one (``y_train``)."""
    split = split_folder(rel)
    if split is None and split_of(name) is None:
        split = split_of_file(rel)
    return name if split is None else f"{split}/{name.lstrip('/')}"
