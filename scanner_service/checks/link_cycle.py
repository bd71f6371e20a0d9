"""S009 link-cycle: a folder link in an image folder that leads back to a folder above it."""

from __future__ import annotations

from ..severity import Severity
from .base import Check

CHECK = Check(
    code="S009",
    name="link-cycle",
    severity=Severity.ERROR,
    summary=(
        "Finds folder links (symbolic links) in an image folder that lead back to a folder above them: a loop "
        "that dscan does not follow, but a loader that follows links does."
    ),
    why=(
        "torchvision's ImageFolder walks with os.walk(followlinks=True), which does not notice loops: it reads "
        "the images above the link again below it, at every turn, until the path grows too long (6 images "
        "can become hundreds). The copies carry the label of the class folder that holds the link, so other "
        "classes' images train under the wrong label and the class counts are wrong."
    ),
    fix="Remove the link, or make it point at the folder it was meant to (a real copy, not an ancestor).",
    message="{count} folder link{s} back to a folder above (a loop)",
)
