"""I014 empty-class-folder: an ImageFolder class folder that holds no image."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="I014",
    name="empty-class-folder",
    severity=Severity.ERROR,
    summary=(
        "Finds class folders of an ImageFolder (also a split's) that hold no image at all. Hidden folders at the "
        "top count as classes, as ImageFolder counts them (`.ipynb_checkpoints`)."
    ),
    why=(
        "ImageFolder(root) raises FileNotFoundError ('Found no valid file for the classes ...') before the first "
        "epoch; with allow_empty=True it runs, with a class that never appears (label-missing-class)."
    ),
    fix=(
        "Fill the folder, or remove it (and renumber nothing: the class ids are the sorted folder names); delete "
        "stray hidden folders such as .ipynb_checkpoints."
    ),
    message="{count} class folder{s} without an image ImageFolder loads",
)
