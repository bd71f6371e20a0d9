"""Read buffers for os.preadv: page aligned, writable, of the size asked for."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from scanner_service.buffers import aligned_buffer


@pytest.mark.parametrize("nbytes", [0, 1, 4095, 4096, 1 << 20])
def test_read_buffers_start_on_a_page(nbytes: int) -> None:
    buf = aligned_buffer(nbytes)
    assert buf.nbytes == nbytes
    assert not buf.readonly
    if nbytes:
        assert np.frombuffer(buf, np.uint8).ctypes.data % 4096 == 0
        buf[:] = b"x" * nbytes
        assert bytes(buf[-1:]) == b"x"


def test_preadv_fills_an_aligned_buffer(tmp_path: Path) -> None:
    payload = os.urandom(3 * 4096 + 17)
    path = tmp_path / "blob"
    path.write_bytes(payload)
    buf = aligned_buffer(len(payload) - 5)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.preadv(fd, [buf], 5) == len(payload) - 5
    finally:
        os.close(fd)
    assert buf.tobytes() == payload[5:]
