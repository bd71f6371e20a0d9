"""Fixtures for the status page tests: datasets with known defects, services on real Redis, a real browser.

The services are the service tests' own (``tests/service/conftest.py``): a real uvicorn API and real
``celery worker`` processes with a key prefix of their own. Browser tests drive Debian's chromium through
Playwright (``/usr/bin/chromium``; ``scripts/ensure-services.sh`` installs it with apt-get when missing).
No browser is ever downloaded.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from service import conftest as service_conftest
from service.conftest import REPO, TOKEN, Service

from scanner_service.demo import corrupt_chunk
from workers.settings import Settings
from workers.store import JobStatus, Store

redis_url = service_conftest.redis_url
"""The service tests' Redis fixture (``DSCAN_TEST_REDIS_URL``, else database 15 of the local Redis)."""

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "test-artifacts" / "web"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

NUM_CLASSES = 5
MISSING_CLASS = 3
NAN_INDEX = 1234
CORRUPT_ROWS = (512, 767)
MANY_NANS = 120
PET_CLASSES = ("bird", "cat", "dog")
CORRUPT_IMAGE = "dog/dog_007.jpg"
NAN_IMAGE = "cat/cat_depth.tif"
"""A 32-bit float TIFF (a depth map) holding one NaN pixel."""
ODD_FOLDER = 'odd & "quoted" <b>bold'
ODD_FILE = "<img src=x onerror=alert(1)>.h5"


def write_defects(folder: Path) -> Path:
    """``defects/``: ``train.h5`` with one NaN at /data[NAN_INDEX], one corrupt chunk (rows CORRUPT_ROWS)
    and labels 0..4 without class 3; ``bulk.h5``, 96 MB in small gzip chunks, so the scan runs long enough to watch."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    n = 4096
    data = rng.standard_normal((n, 256), dtype=np.float32)
    data[NAN_INDEX, 17] = np.nan
    labels = rng.integers(0, NUM_CLASSES, n)
    labels[labels == MISSING_CLASS] = 4
    train = folder / "train.h5"
    with h5py.File(train, "w") as fh:
        fh.create_dataset("data", data=data, chunks=(256, 256), compression="gzip", compression_opts=1)
        fh.create_dataset("label", data=labels)
    corrupt_chunk(train, "/data", (CORRUPT_ROWS[0], 0))
    block = rng.random((4096, 1024), dtype=np.float32)
    rows = 24576
    with h5py.File(folder / "bulk.h5", "w") as fh:
        ds = fh.create_dataset(
            "features", shape=(rows, 1024), dtype="f4", chunks=(8, 1024), compression="gzip", compression_opts=1
        )
        for start in range(0, rows, len(block)):
            ds[start : start + len(block)] = block
    return folder


def write_pets(folder: Path) -> Path:
    """``pets/``: an ImageFolder whose class ``bird`` (class 0) is empty, whose ``CORRUPT_IMAGE`` is cut
    in half and whose ``NAN_IMAGE`` holds a NaN: the three defects of one dataset."""
    from PIL import Image

    rng = np.random.default_rng(5)
    for name in PET_CLASSES:
        (folder / name).mkdir(parents=True, exist_ok=True)
    for name in PET_CLASSES[1:]:
        for i in range(24):
            pixels = (rng.random((48, 48, 3)) * 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / name / f"{name}_{i:03d}.jpg", quality=85)
    damaged = folder / CORRUPT_IMAGE
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    depth = rng.random((48, 48)).astype(np.float32)
    depth[10, 20] = np.nan
    Image.fromarray(depth, mode="F").save(folder / NAN_IMAGE)
    return folder


def write_many_nans(path: Path) -> Path:
    """``MANY_NANS`` samples with a NaN each: enough locations to page through."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.ones((1000, 4), dtype=np.float32)
    data[np.arange(0, 2 * MANY_NANS, 2), 1] = np.nan
    with h5py.File(path, "w") as fh:
        fh.create_dataset("x", data=data)
    return path


@pytest.fixture(scope="session")
def web_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data root of the page tests' services."""
    root = tmp_path_factory.mktemp("web-roots") / "data"
    write_defects(root / "defects")
    (root / "defects" / "notes.txt").write_text("how the data was made\n")  # a file of no format dscan reads
    write_many_nans(root / "many-nans" / "nans.h5")
    write_pets(root / "pets")
    clean = root / "clean"
    clean.mkdir()
    with h5py.File(clean / "clean.h5", "w") as fh:
        fh.create_dataset("x", data=np.arange(400, dtype=np.float32).reshape(100, 4))
        fh.create_dataset("label", data=np.arange(100) % 4)
    weird = root / ODD_FOLDER
    weird.mkdir()
    with h5py.File(weird / ODD_FILE, "w") as fh:
        fh.create_dataset("x", data=np.array([[np.nan, 1.0]], dtype=np.float32))
    return root


def start(svc: Service, workers: int) -> Service:
    if workers:
        svc.start_worker(workers)
    svc.start_api()
    svc.wait_ready(workers=bool(workers))
    return svc


@pytest.fixture(scope="session")
def web_service(redis_url: str, web_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """API plus one worker node of one process, without tokens."""
    svc = Service(redis_url, web_root, tmp_path_factory.mktemp("web-service"))
    try:
        yield start(svc, 1)
    finally:
        svc.stop()


@pytest.fixture(scope="session")
def token_service(redis_url: str, web_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """API with ``DSCAN_API_TOKENS`` set (no worker: the jobs it shows are written to Redis by the tests)."""
    svc = Service(redis_url, web_root, tmp_path_factory.mktemp("token-service"), token=TOKEN)
    try:
        yield start(svc, 0)
    finally:
        svc.stop()


@pytest.fixture(scope="session")
def page_service(redis_url: str, web_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """API without worker or tokens, for pages of jobs put in a given state by the tests."""
    svc = Service(redis_url, web_root, tmp_path_factory.mktemp("page-service"))
    try:
        yield start(svc, 0)
    finally:
        svc.stop()


def store_of(svc: Service) -> Store:
    """A store on the service's Redis keys, to put jobs in a given state without running them."""
    settings = Settings(redis_url=svc.redis_url, data_roots=[svc.data_root], key_prefix=svc.prefix)
    return Store(settings)


def seed_job(svc: Service, path: str, status: str = "running", **fields: Any) -> str:
    """A job record in ``status`` (with ``fields``: progress counters, error, summary JSON...)."""
    store = store_of(svc)
    try:
        job_id = uuid.uuid4().hex
        store.create_job(
            job_id, path=path, target=str(svc.data_root / path), options={}, callback_url=None, digest=None
        )
        if status != "queued":
            allowed = [JobStatus.QUEUED]
            store.transition(job_id, JobStatus.RUNNING, allowed, started=time.time() - fields.pop("age", 10.0))
            if status != "running":
                store.transition(job_id, JobStatus(status), [JobStatus.RUNNING], finished=time.time())
        if fields:
            store.set_fields(job_id, **fields)
        return job_id
    finally:
        store.close()


# -- the browser ----------------------------------------------------------------------------------------


def chromium_missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing: scripts/test installs it (apt-get install chromium, as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, driven by Playwright (never a downloaded browser build)."""
    reason = chromium_missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """``test-artifacts/web``: screenshots of every page (gitignored; CI keeps them)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def screenshot(page: Any, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
