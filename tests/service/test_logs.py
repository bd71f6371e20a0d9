"""The service's log lines: JSON on stderr, and no ERROR line for what a scan reports as a finding."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import logging
from workers.logs import configure_logging
configure_logging("worker", "INFO")
logging.getLogger("PIL.TiffImagePlugin").error("More samples per pixel than can be decoded: %s", 43779)
logging.getLogger("workers.tasks").error("a real error")
"""


def test_pillows_complaints_about_a_file_are_no_error_lines_of_the_worker() -> None:
    """Pillow logs what it refuses in a file at level ERROR; the scan reports it as corrupt-image, and a log
    alert on ERROR lines paged for every damaged TIFF."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60)
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert [line["msg"] for line in lines] == ["a real error"]
    assert lines[0]["level"] == "error" and lines[0]["service"] == "worker"
