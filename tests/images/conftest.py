"""Fixtures of the image tests (the builders live in ``imagetools``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240607)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, bytes], Path]:
    """write("cat/a.jpg", data) -> the file, folders created."""

    def put(rel: str, data: bytes) -> Path:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return put
