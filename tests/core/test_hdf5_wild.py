"""HDF5 files as other tools write them, and damaged ones: defects seeded at known places, the report compared
with the truth."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from scanner_service.render import notes
from tests.conftest import cli_json, run_scan, write_h5


def test_a_folder_named_in_an_hdf5_list_is_called_a_folder(tmp_path: Path) -> None:
    """A list line naming a folder was called "not a regular file (a named pipe, socket or device)"."""
    for name in ("a.h5", "b.h5"):
        write_h5(tmp_path / "parts" / name, {"data": np.ones((4, 2), np.float32) * np.arange(2)})
    (tmp_path / "train_h5_list.txt").write_text("parts/a.h5\nparts/b.h5\nparts\n")
    status, report = cli_json(tmp_path / "train_h5_list.txt")
    assert status == 1
    [found] = [f for f in report["findings"] if f["code"] == "S001"]
    [where] = found["locations"]
    assert (where["path"], where["line"]) == ("train_h5_list.txt", 3)
    assert where["detail"] == "parts: a folder, not an HDF5 file: not read"


def test_rows_a_writer_never_wrote_are_named_with_the_fill_value_they_read_as(tmp_path: Path) -> None:
    """Chunks never written read as the fill value without an error: NaN rows were reported one by one, as if
    the data held NaN, and rows of a zero fill value not at all; the note names the rows never written."""
    rng = np.random.default_rng(0)
    path = tmp_path / "unfinished.h5"
    with h5py.File(path, "w") as fh:
        nan_fill = fh.create_dataset("data", shape=(1000, 16), dtype="f4", chunks=(100, 16), fillvalue=np.nan)
        nan_fill[:500] = rng.random((500, 16))
        grown = fh.create_dataset("grown", shape=(100, 4), maxshape=(None, 4), dtype="f4", chunks=(10, 4))
        grown[:] = rng.random((100, 4)) + 1
        grown.resize((150, 4))  # rows 100-149 never written: zeros
        holes = fh.create_dataset("holes", shape=(30,), dtype="i4", chunks=(7,), fillvalue=-1)
        holes[0:7], holes[14:21] = np.arange(7), np.arange(7)  # chunks 1, 3 and 4 (rows 7-13, 21-29) never written
        fh.create_dataset("contiguous", shape=(20, 3), dtype="f8")  # allocated on the first write: never
        fh.create_dataset("complete", data=rng.random((50, 4)), chunks=(7, 3))
    status, report = cli_json(path)
    assert status == 1
    [nan] = [f for f in report["findings"] if f["code"] == "V001"]
    assert nan["count"] == 500  # what a loader reads is still reported
    assert report["info"]["hdf5.never_written"] == (
        "4 datasets hold rows never written, which HDF5 reads as the dataset's fill value without an error "
        "(a writer that stopped early?): unfinished.h5:/contiguous rows 0-19 (fill value 0.0), "
        "unfinished.h5:/data rows 500-999 (fill value nan), unfinished.h5:/grown rows 100-149 (fill value 0.0), "
        "unfinished.h5:/holes rows 7-13, 21-29 (fill value -1)"
    )
    assert report["info"]["hdf5.never_written"] in notes(run_scan(path))  # the text report shows it too
