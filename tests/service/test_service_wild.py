"""What a pipeline met using the service as documented: a PATH whose name is not UTF-8 crashed ``dscan submit``
(a traceback, exit status 1: "findings"); a folder whose only entry links out of the data roots was accepted or
refused by what lies behind the link; a relative ``root`` was checked inside the first data root, then read
from the worker's current folder; a callback URL the API accepted (default port, IPv6 address) was dropped by
the worker as "not allowed any more". Real API, real Celery workers, real Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from .conftest import REPO, Service, submit, wait_job

pytestmark = [pytest.mark.service]


def unique(name: str) -> str:
    return f"{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def test_submit_of_a_path_that_is_no_utf8_exits_2_with_a_message(service: Service, tmp_path: Path) -> None:
    """``dscan submit`` of a folder named with a Latin-1 byte died in httpx's JSON encoder with a traceback and
    exit status 1, which a CI gate reads as "the data has errors"."""
    folder = os.fsencode(service.data_root) + b"/" + unique("caf").encode() + b"\xe9"
    os.mkdir(folder)
    with h5py.File(os.fsdecode(folder + b"/a.h5"), "w") as fh:
        fh["x"] = np.ones((4, 2), np.float32)
    cmd = [os.fsencode(sys.executable), b"-m", b"scanner_service.cli", b"submit", folder, b"--server"]
    cmd += [service.url.encode(), b"--token", (service.token or "").encode(), b"--wait"]
    out = subprocess.run(cmd, capture_output=True, cwd=REPO, timeout=60)
    err = out.stderr.decode(errors="replace")
    assert out.returncode == 2, err
    assert "Traceback" not in err, err
    assert "\\xe9" in err and "UTF-8" in err, err


@pytest.fixture
def linked_out(service: Service, tmp_path: Path) -> Iterator[Callable[[bool], Path]]:
    """A folder under the data root whose only entry is a link to a folder outside the roots, holding images
    (``True``) or nothing (``False``)."""

    def make(with_images: bool) -> Path:
        outside = tmp_path / unique("outside")
        outside.mkdir()
        if with_images:
            from PIL import Image

            rng = np.random.default_rng(1)
            for i in range(3):
                Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(outside / f"{i}.png")
        folder = service.data_root / unique("linked")
        folder.mkdir()
        (folder / "x").symlink_to(outside, target_is_directory=True)
        return folder

    yield make


def test_a_folder_link_out_of_the_roots_says_nothing_about_what_lies_behind_it(
    service: Service, linked_out: Callable[[bool], Path]
) -> None:
    """The request's format detection followed the link: behind it images made a 202 (and a job that then
    failed), an empty folder a 422, so the answer told whether files outside the roots exist."""
    with service.client() as client:
        answers = []
        for with_images in (True, False):
            r = client.post("/api/v1/scans", json={"path": str(linked_out(with_images)), "force": True})
            answers.append((r.status_code, r.json()["detail"].split(" is not", 1)[-1] if r.status_code != 202 else ""))
    assert answers[0] == answers[1], answers
    assert answers[0][0] == 422, answers


def write_list(service: Service) -> tuple[Path, str]:
    """An image list under the data root whose paths are relative to a folder given as a relative ``root``."""
    name = unique("listroot")
    images = service.data_root / name / "images"
    images.mkdir(parents=True)
    from PIL import Image

    rng = np.random.default_rng(2)
    for i in range(4):
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(images / f"{i}.png")
    listing = service.data_root / name / "lists" / "train.txt"
    listing.parent.mkdir()
    listing.write_text("".join(f"{i}.png {i % 2}\n" for i in range(4)))
    return listing, f"{name}/images"


def test_a_relative_root_is_taken_inside_the_first_data_root_by_the_workers_too(service: Service) -> None:
    """The API checked ``root`` inside the first data root, the worker read it from its own current folder:
    the job failed with "--root ...: no such folder"."""
    listing, root = write_list(service)
    with service.client() as client:
        job = submit(client, listing, root=root, force=True)
        state = wait_job(client, job["id"])
        assert state["status"] == "succeeded", state
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    assert report["summary"]["items_scanned"] == 4, report["summary"]
    assert Path(report["config"]["root"]) == (service.data_root / root).resolve()


def test_submit_sends_a_local_relative_root_as_an_absolute_path(service: Service) -> None:
    """``dscan submit lists/train.txt --root ../images`` from a folder of the client: PATH was made absolute,
    ``--root`` was sent as it was and taken inside the server's first data root (403: outside the roots)."""
    listing, _ = write_list(service)
    cmd = [sys.executable, "-m", "scanner_service.cli", "submit", "train.txt", "--root", "../images", "--server"]
    cmd += [service.url, "--token", service.token or "", "--wait", "--format", "json", "--force"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=listing.parent, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["summary"]["items_scanned"] == 4


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        _Hook.received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class _HookV6(HTTPServer):
    import socket

    address_family = socket.AF_INET6


def test_a_callback_to_an_ipv6_host_the_api_accepted_is_sent(make_service: Callable[..., Service]) -> None:
    """``DSCAN_CALLBACK_HOSTS=[::1]:PORT``: the API accepted ``http://[::1]:PORT/hook`` (pydantic's host keeps
    the brackets), the worker compared httpx's ``::1`` and never sent it."""
    server = _HookV6(("::1", 0), _Hook)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        svc = make_service(workers=[1], env={"DSCAN_CALLBACK_HOSTS": f"[::1]:{port}"})
        with svc.client() as client:
            job = submit(client, svc.data_root / "small", callback_url=f"http://[::1]:{port}/hook", force=True)
            state = wait_job(client, job["id"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(m["id"] == job["id"] for m in _Hook.received):
            time.sleep(0.05)
        assert any(m["id"] == job["id"] and m["status"] == state["status"] for m in _Hook.received), svc.log("worker0")
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tasks(redis_url: str, data_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from workers.settings import get_settings

    from .conftest import delete_prefix

    prefix = f"dscantest-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("DSCAN_REDIS_URL", redis_url)
    monkeypatch.setenv("DSCAN_DATA_ROOTS", str(data_root))
    monkeypatch.setenv("DSCAN_KEY_PREFIX", prefix)
    monkeypatch.setenv("DSCAN_QUEUE", prefix)
    monkeypatch.setenv("DSCAN_CALLBACK_HOSTS", "hooks.example.com:443,127.0.0.1:80")
    get_settings.cache_clear()
    from workers import tasks as module

    module.store.cache_clear()
    yield module
    module.store().close()
    module.store.cache_clear()
    get_settings.cache_clear()
    delete_prefix(redis_url, prefix)


@pytest.mark.parametrize("url", ["https://hooks.example.com/ci", "http://127.0.0.1/hook"])
def test_a_callback_on_the_default_port_of_an_allowed_host_port_is_sent(
    tasks: Any, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``DSCAN_CALLBACK_HOSTS=hooks.example.com:443``: the API accepted ``https://hooks.example.com/ci`` (port
    443), the worker compared ``hooks.example.com:None`` and dropped the callback."""
    from workers.store import JobStatus

    st = tasks.store()
    job_id = uuid.uuid4().hex
    st.create_job(job_id, path="x", target="x", options={}, callback_url=url, digest=None)
    st.transition(job_id, JobStatus.FAILED, [JobStatus.QUEUED], finished=time.time(), error="test")
    posted: list[str] = []

    class Answer:
        status_code = 204

    def post(target: Any, **_: Any) -> Answer:
        posted.append(str(target))
        return Answer()

    monkeypatch.setattr(tasks.httpx, "post", post)
    tasks.send_callback(job_id)
    assert posted == [url]
