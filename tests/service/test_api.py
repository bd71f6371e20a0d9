"""The scans API over HTTP, against the shared service (real uvicorn, real Celery worker, real Redis)."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from scanner_service.render import render
from scanner_service.report import Report
from tests.conftest import write_h5

from .conftest import (
    TOKEN,
    Service,
    cli_report,
    comparable,
    run_and_report,
    submit,
    wait_job,
    write_external,
    write_external_link,
    write_vds,
)

pytestmark = [pytest.mark.service]

DEMO_OPTIONS: dict[str, Any] = {"num_classes": 10, "batch_size": 32, "shard_bytes": 1 << 16}


def test_submit_poll_and_report_equal_to_the_cli(service: Service) -> None:
    demo = service.data_root / "dscan-demo"
    with service.client() as client:
        job = submit(client, demo, **DEMO_OPTIONS, force=True)
        assert job["status"] == "queued" and job["url"].endswith(f"/api/v1/scans/{job['id']}")
        state = wait_job(client, job["id"])
        assert state["status"] == "succeeded", state
        progress = state["progress"]
        assert progress["shards_total"] > 3 and progress["shards_done"] == progress["shards_total"]
        assert progress["items_done"] == state["summary"]["items_scanned"] > 5000
        assert progress["fraction"] == 1.0
        assert state["started"] and state["finished"] and state["duration_s"] is not None
        report = client.get(f"/api/v1/scans/{job['id']}/report").json()
    expected = cli_report(demo, "--num-classes", "10", "--batch-size", "32", "--config", str(_config(service)))
    assert comparable(report) == comparable(expected)
    codes = {f["code"] for f in report["findings"]}
    assert {"V001", "V002", "S001", "S002", "L003"} <= codes
    nan = next(f for f in report["findings"] if f["code"] == "V001")
    assert nan["locations"][0]["path"] == "train.h5" and nan["locations"][0]["index"] == 17


def _config(service: Service) -> Path:
    """A dscan.toml carrying the service test's shard size, for the CLI run it is compared with."""
    path = service.folder / "dscan.toml"
    path.write_text(f"shard_bytes = {DEMO_OPTIONS['shard_bytes']}\n")
    return path


def test_report_formats_are_the_cli_renderers(service: Service) -> None:
    with service.client() as client:
        job = submit(client, service.data_root / "dscan-demo", num_classes=10, batch_size=32)
        assert wait_job(client, job["id"])["status"] == "succeeded"
        raw = client.get(f"/api/v1/scans/{job['id']}/report", params={"format": "json"})
        assert raw.headers["content-type"].startswith("application/json")
        report = Report.model_validate_json(raw.text)
        for fmt, media in (("junit", "application/xml"), ("markdown", "text/markdown"), ("text", "text/plain")):
            r = client.get(f"/api/v1/scans/{job['id']}/report", params={"format": fmt})
            assert r.status_code == 200 and r.headers["content-type"].startswith(media)
            assert r.text == render(report, fmt)
        assert "train.h5" in client.get(f"/api/v1/scans/{job['id']}/report", params={"format": "text"}).text
        bad = client.get(f"/api/v1/scans/{job['id']}/report", params={"format": "pdf"})
        assert bad.status_code == 422


def test_tokens_are_required(service: Service) -> None:
    with service.client(token=None) as anonymous:
        r = anonymous.get("/api/v1/scans")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert "missing API token" in r.json()["detail"]
        r = anonymous.post("/api/v1/scans", json={"path": str(service.data_root / "small")})
        assert r.status_code == 401
        for body in (b"{not json", b'{"path": 1}'):  # nothing about the request is answered before the token
            r = anonymous.post("/api/v1/scans", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 401 and "missing API token" in r.json()["detail"]
        assert anonymous.get("/healthz").status_code == 200
    with service.client(token="wrong-token-000000000000") as wrong:
        r = wrong.get("/api/v1/scans")
        assert r.status_code == 401 and r.json()["detail"] == "invalid API token"
    with service.client() as good:
        assert good.get("/api/v1/scans").status_code == 200


def test_paths_outside_the_roots_are_refused(service: Service, tmp_path: Path) -> None:
    root = service.data_root
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "x.h5").write_bytes(b"\x89HDF\r\n\x1a\n")
    link = root / f"escape-{os.getpid()}-{time.monotonic_ns()}"
    link.symlink_to(outside, target_is_directory=True)
    try:
        cases = [
            str(root / ".." / ".." / "etc"),
            f"{root}/small/../../../{outside.name}",
            str(link),
            str(link / "x.h5"),
            "/etc/passwd",
            "../../../etc",
        ]
        with service.client() as client:
            for path in cases:
                r = client.post("/api/v1/scans", json={"path": path})
                assert r.status_code == 403, (path, r.text)
                assert "outside the data roots" in r.json()["detail"]
            r = client.post("/api/v1/scans", json={"path": str(root / "small"), "root": "/etc"})
            assert r.status_code == 403 and "root" in r.json()["detail"]
            r = client.post("/api/v1/scans", json={"path": str(root / "no-such-dataset")})
            assert r.status_code == 422 and "does not exist" in r.json()["detail"]
            r = client.post("/api/v1/scans", json={"path": "small"})  # relative: inside the first root
            assert r.status_code in (200, 202)
    finally:
        link.unlink()


def test_links_out_of_the_roots_inside_a_dataset_are_not_followed(service: Service, tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "passwd.jpg").write_text("root:x:0:0:root:/root:/bin/bash\n")
    folder = service.data_root / f"linked-{os.getpid()}-{time.monotonic_ns()}"
    (folder / "cat").mkdir(parents=True)
    Image.fromarray(np.arange(48 * 64 * 3, dtype=np.uint8).reshape(48, 64, 3)).save(folder / "cat" / "real.png")
    (folder / "cat" / "leak.jpg").symlink_to(outside / "passwd.jpg")
    with service.client() as client:
        state = wait_job(client, submit(client, folder, force=True)["id"])
        assert state["status"] == "succeeded", state
        report = client.get(f"/api/v1/scans/{state['id']}/report").json()
    refused = next(f for f in report["findings"] if f["code"] == "S001")
    assert [loc["path"] for loc in refused["locations"]] == ["cat/leak.jpg"]
    assert "outside the allowed data roots" in refused["locations"][0]["detail"]
    assert "I002" not in {f["code"] for f in report["findings"]}  # its content was never looked at


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"num_classes": 0}, "num_classes"),
        ({"batch_size": "many"}, "batch_size"),
        ({"fail_on": "sometimes"}, "fail_on"),
        ({"max_locations": -1}, "max_locations"),
        ({"bogus_option": 1}, "bogus_option"),
        ({"select": ["X999"]}, "unknown check"),
        ({"callback_url": "not a url"}, "callback_url"),
        ({"select": ["I"]}, "leave no check that applies to this hdf5 dataset (its checks: V, L, S)"),
        ({"ignore": ["V", "L", "S"]}, "leave no check that applies to this hdf5 dataset"),
        ({"select": ["S005"]}, "leave no check that applies to this hdf5 dataset"),
        ({"min_size": 1e26}, "min_size"),
    ],
    ids=[
        "num-classes-0",
        "batch-size-text",
        "fail-on",
        "max-locations",
        "unknown-field",
        "unknown-check",
        "bad-url",
        "no-check-applies",
        "all-applicable-ignored",
        "list-syntax-on-files",
        "min-size-beyond-any-image",
    ],
)
def test_bad_options_are_422_with_a_message(service: Service, body: dict[str, Any], message: str) -> None:
    with service.client() as client:
        r = client.post("/api/v1/scans", json={"path": str(service.data_root / "small"), **body})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and message in detail
    assert "Traceback" not in r.text


def test_label_checks_alone_on_data_without_labels_end_the_job_without_a_pass(service: Service) -> None:
    """``select: ["L"]`` on HDF5 files without labels: the label checks apply to HDF5, so the request is
    accepted, but none met a label. The job passed, a verdict on data no check had read; it fails with
    `dscan scan`'s message instead, and keeps no report."""
    with service.client() as client:
        job = submit(client, service.data_root / "small", select=["L"])
        state = wait_job(client, job["id"])
        assert state["status"] == "failed", state
        assert "nothing to check in this hdf5 dataset: no labels were read from it (L)" in state["error"]
        assert client.get(f"/api/v1/scans/{job['id']}/report").status_code in (404, 409)


def test_malformed_requests(service: Service) -> None:
    with service.client() as client:
        r = client.post("/api/v1/scans", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: body: not valid JSON (")
        r = client.post("/api/v1/scans", json={})
        assert r.status_code == 422 and "path" in r.json()["detail"]
        for path in (123, ""):  # the body field named "path" was blamed on "body"
            r = client.post("/api/v1/scans", json={"path": path})
            assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: path: "), r.text
        r = client.post("/api/v1/scans", content=b'{"path": "small"}')  # curl -d: no JSON content type
        assert r.status_code == 422 and "Content-Type: application/json" in r.json()["detail"]
        assert client.get("/api/v1/scans/not-an-id").status_code == 422
        assert client.get("/api/v1/scans/../../etc").status_code == 404
        r = client.get(f"/api/v1/scans/{'0' * 32}")
        assert r.status_code == 404 and "no scan" in r.json()["detail"]
        assert client.get("/api/v1/scans", params={"status": "exploded"}).status_code == 422
        assert client.get("/api/v1/scans", params={"limit": 0}).status_code == 422


DEEP = b"[" * 5000 + b"]" * 5000


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"path": "a\xff.h5"}', "invalid request: body: not valid UTF-8 (byte 0xff at position 11)"),
        (DEEP, "invalid request: body: JSON nested too deeply"),
        (b'{"path": "small", "select": ' + DEEP + b"}", "invalid request: body: JSON nested too deeply"),
        (
            b'{"path": "small", "batch_size": ' + b"9" * 5000 + b"}",
            "invalid request: body: a number with more than 4,300 digits",
        ),
    ],
    ids=["not-utf8", "nested-5000-deep", "field-nested-5000-deep", "int-of-5000-digits"],
)
def test_bodies_json_cannot_decode_are_422_saying_why(service: Service, body: bytes, detail: str) -> None:
    """FastAPI answers these 400 "There was an error parsing the body"; like malformed JSON, they are 422
    with what is wrong, and only once the token is good."""
    json_type = {"content-type": "application/json"}
    with service.client() as client:
        r = client.post("/api/v1/scans", content=body, headers=json_type)
    assert (r.status_code, r.json()["detail"]) == (422, detail), r.text
    with service.client(token=None) as anonymous:
        r = anonymous.post("/api/v1/scans", content=body, headers=json_type)
    assert r.status_code == 401 and "missing API token" in r.json()["detail"]


def test_options_beyond_any_dataset_and_tiny_shards_are_refused(service: Service) -> None:
    path = str(service.data_root / "small" / "s0.h5")
    with service.client() as client:
        for options, field in (
            ({"batch_size": 10**400}, "batch_size"),
            ({"sorted_run_batches": 1e308}, "sorted_run_batches"),
            ({"shard_bytes": 1}, "shard_bytes"),
            ({"block_bytes": 16}, "block_bytes"),
            ({"block_bytes": 10**12}, "block_bytes"),
            ({"num_classes": True}, "num_classes"),  # JSON true is no class count
            ({"force": "yes"}, "force"),
            ({"batch_size": "64"}, "batch_size"),
            ({"confine": ["/"]}, "confine"),
        ):
            r = client.post("/api/v1/scans", json={"path": path, **options})
            assert r.status_code == 422 and field in r.json()["detail"], (options, r.text)


def test_large_bodies_are_413(service: Service) -> None:
    big = {"path": str(service.data_root / "small"), "select": ["V001"] * 20_000}
    data = json.dumps(big).encode()
    assert len(data) > 65536
    with service.client() as client:
        r = client.post("/api/v1/scans", content=data, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "too large" in r.json()["detail"]  # JSON, like every error

        def chunks() -> Any:  # no Content-Length: the limit is counted while reading
            for i in range(0, len(data), 8192):
                yield data[i : i + 8192]

        r = client.post("/api/v1/scans", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["detail"]


def test_same_request_on_unchanged_data_is_deduplicated(service: Service, tmp_path: Path) -> None:
    folder = service.data_root / f"dedup-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir()
    import shutil

    shutil.copy(service.data_root / "small" / "s0.h5", folder / "a.h5")
    with service.client() as client:
        first = submit(client, folder, num_classes=3)
        assert first["deduplicated"] is False
        again = client.post("/api/v1/scans", json={"path": str(folder), "num_classes": 3})
        assert again.status_code == 200 and again.json()["id"] == first["id"] and again.json()["deduplicated"]
        other_options = submit(client, folder, num_classes=4)
        assert other_options["id"] != first["id"]
        forced = client.post("/api/v1/scans", json={"path": str(folder), "num_classes": 3, "force": True})
        assert forced.status_code == 202 and forced.json()["id"] != first["id"]
        wait_job(client, forced.json()["id"])
        stat = (folder / "a.h5").stat()
        os.utime(folder / "a.h5", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        changed = submit(client, folder, num_classes=3)
        assert changed["id"] not in (first["id"], forced.json()["id"])
        assert not changed["deduplicated"]


def test_a_list_is_a_new_request_when_a_file_it_names_changes(service: Service) -> None:
    import shutil

    folder = service.data_root / f"dedup-list-{os.getpid()}-{time.monotonic_ns()}"
    (folder / "elsewhere").mkdir(parents=True)
    shutil.copy(service.data_root / "small" / "s0.h5", folder / "elsewhere" / "a.h5")
    listing = folder / "train_h5.txt"
    listing.write_text("elsewhere/a.h5\n")
    with service.client() as client:
        first = submit(client, listing)
        wait_job(client, first["id"])
        assert client.post("/api/v1/scans", json={"path": str(listing)}).json()["deduplicated"]
        stat = (folder / "elsewhere" / "a.h5").stat()  # the list is untouched, the file it names changed
        os.utime(folder / "elsewhere" / "a.h5", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        again = submit(client, listing)
        assert again["id"] != first["id"] and not again["deduplicated"]


def test_a_dataset_is_a_new_request_when_a_file_its_data_lives_in_changes(service: Service) -> None:
    """A virtual dataset's source file, an external raw data file and an external link's target lie beside
    the submitted file, which stays untouched when they change: the old report must not be handed out."""
    folder = service.data_root / f"dedup-linked-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir()
    src = folder / "src.h5"
    write_h5(src, {"x": np.arange(40, dtype=np.float32).reshape(10, 4)})
    files = {
        "vds": write_vds(folder / "vds.h5", src),
        "ext": write_external(folder / "ext.h5", folder / "ext.bin"),
        "link": write_external_link(folder / "link.h5", src),
    }
    with service.client() as client:
        first = {name: submit(client, path) for name, path in files.items()}
        for name, path in files.items():
            assert wait_job(client, first[name]["id"])["summary"]["errors"] == 0
            again = client.post("/api/v1/scans", json={"path": str(path)}).json()
            assert again["deduplicated"] and again["id"] == first[name]["id"], name  # unchanged: reused
        nan = np.arange(40, dtype=np.float32).reshape(10, 4)
        nan[3, 1] = np.nan
        write_h5(src, {"x": nan})
        with (folder / "ext.bin").open("r+b") as raw:
            raw.seek(13 * 4)
            raw.write(np.float32(np.nan).tobytes())
        for name, path in files.items():
            changed = submit(client, path)
            assert not changed["deduplicated"] and changed["id"] != first[name]["id"], name
            state = wait_job(client, changed["id"])
            assert state["status"] == "succeeded", state
            if name != "link":  # an external link is not followed: named in the report, its target not read
                assert state["summary"]["errors"] == 1, (name, state["summary"])
            reused = client.post("/api/v1/scans", json={"path": str(path)}).json()
            assert reused["deduplicated"] and reused["id"] == changed["id"], name


def test_a_path_that_holds_no_dataset_is_refused_at_once(service: Service) -> None:
    notes = service.data_root / f"notes-{os.getpid()}-{time.monotonic_ns()}.bin"
    notes.write_bytes(b"\x00\x01 no dataset here")
    with service.client() as client:
        r = client.post("/api/v1/scans", json={"path": str(notes)})
    assert r.status_code == 422 and "is not a dataset dscan can read" in r.json()["detail"]


def test_list_is_newest_first_paginated_and_filtered(service: Service) -> None:
    small = service.data_root / "small"
    with service.client() as client:
        ids = [submit(client, small / f"s{i}.h5", max_locations=7, force=True)["id"] for i in range(4)]
        for job_id in ids:
            wait_job(client, job_id)
        page = client.get("/api/v1/scans", params={"limit": 2}).json()
        assert page["total"] >= 4 and len(page["items"]) == 2 and page["next"]
        seen = []
        url: str | None = "/api/v1/scans?limit=2"
        while url:
            body = client.get(url).json()
            seen += [item["id"] for item in body["items"]]
            url = body["next"]
        assert len(seen) == len(set(seen)) == page["total"]
        mine = [job_id for job_id in seen if job_id in ids]
        assert mine == list(reversed(ids))  # newest first
        created = [item["created"] for item in client.get("/api/v1/scans", params={"limit": 500}).json()["items"]]
        assert created == sorted(created, reverse=True)
        done = client.get("/api/v1/scans", params={"status": "succeeded", "limit": 500}).json()
        assert {i["status"] for i in done["items"]} == {"succeeded"} and set(ids) <= {i["id"] for i in done["items"]}
        assert client.get("/api/v1/scans", params={"status": "cancelled", "limit": 500}).json()["total"] >= 0


@pytest.mark.slow
def test_cancel_stops_the_workers(service: Service) -> None:
    slow = service.data_root / "slow"
    with service.client() as client:
        job = submit(client, slow, shard_bytes=4 << 20, force=True)
        wait_job(client, job["id"], until=lambda s: s["progress"]["items_done"] > 0)
        r = client.delete(f"/api/v1/scans/{job['id']}")
        assert r.status_code == 202 and r.json()["status"] == "cancelled"
        assert client.delete(f"/api/v1/scans/{job['id']}").status_code == 409
        r = client.get(f"/api/v1/scans/{job['id']}/report")
        assert r.status_code == 409 and "cancelled" in r.json()["detail"]
        store = service.store_client()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and store.exists(service.key("job", job["id"], "plan")):
            time.sleep(0.1)  # the merge callback of a cancelled job drops its work keys
        assert not store.exists(service.key("job", job["id"], "plan"))
        state = client.get(f"/api/v1/scans/{job['id']}").json()
        assert state["status"] == "cancelled"
        assert state["progress"]["shards_done"] < state["progress"]["shards_total"]
        assert not store.exists(service.key("job", job["id"], "report"))


class _Receiver(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []
    authorization: list[str | None] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        _Receiver.authorization.append(self.headers.get("authorization"))
        _Receiver.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_callback_is_posted_to_allowed_hosts_only(service: Service) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://hook:s3cret@127.0.0.1:{server.server_address[1]}/hook"
        with service.client() as client:
            job = submit(client, service.data_root / "small", callback_url=url, force=True)
            shown = f"http://***@127.0.0.1:{server.server_address[1]}/hook"  # the callback's password is its own
            assert client.get(f"/api/v1/scans/{job['id']}").json()["callback_url"] == shown
            assert "s3cret" not in client.get("/api/v1/scans").text
            state = wait_job(client, job["id"])
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not any(m["id"] == job["id"] for m in _Receiver.received):
                time.sleep(0.05)
            message = next(m for m in _Receiver.received if m["id"] == job["id"])
            assert message["status"] == state["status"] == "succeeded"
            assert "Basic aG9vazpzM2NyZXQ=" in _Receiver.authorization  # sent to the hook all the same
            assert message["summary"] == state["summary"]
            for host in ("http://example.com/hook", "http://169.254.169.254/latest", "http://localhost:1/x"):
                r = client.post("/api/v1/scans", json={"path": str(service.data_root / "small"), "callback_url": host})
                assert r.status_code == 422 and "not allowed" in r.json()["detail"]
    finally:
        server.shutdown()
        server.server_close()


def test_health_ready_metrics_docs_and_logs(service: Service) -> None:
    with service.client(token=None) as client:
        assert client.get("/healthz").json()["status"] == "ok"
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["workers_answering"] is True
        assert client.get("/docs").status_code == 200
        spec = client.get("/openapi.json").json()
        assert {"/api/v1/scans", "/api/v1/scans/{job_id}", "/api/v1/scans/{job_id}/report"} <= set(spec["paths"])
    with service.client() as client:
        report = run_and_report(client, service.data_root / "small", max_locations=3, force=True)
        assert report["summary"]["items_scanned"] > 0
        metrics = httpx.get(f"{service.url}/metrics").text
    assert 'dscan_jobs{status="succeeded"}' in metrics
    assert "dscan_scan_duration_seconds_count" in metrics and "dscan_items_scanned_total" in metrics
    assert "dscan_redis_up 1.0" in metrics
    lines = [json.loads(line) for line in service.log("worker0").splitlines() if line.startswith("{")]
    assert any(line.get("job_id") and "shard" in line["msg"] for line in lines)
    api_lines = [json.loads(line) for line in service.log("api").splitlines() if line.startswith("{")]
    assert any(line.get("job_id") and line.get("status") == 202 for line in api_lines)
    assert TOKEN not in service.log("api")


def test_bad_options_are_refused_before_queueing(service: Service) -> None:
    small = str(service.data_root / "small")
    with service.client() as client:
        cases = [
            ({"path": "a" * 300 + "/x"}, "cannot be read"),  # a name too long for the file system
            ({"path": small, "decoder": "raw:float99:3x8"}, "unknown dtype"),
            ({"path": small, "num_classes": 10**30}, "less than or equal to 1000000"),
        ]
        for body, message in cases:
            r = client.post("/api/v1/scans", json=body)
            assert r.status_code == 422, (body, r.text)
            assert message in r.text, r.text
