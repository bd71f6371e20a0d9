"""``dscan submit`` (the CI gate through the service) and ``dscan serve`` (everything on one machine)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.conftest import write_h5

from .conftest import REPO, TOKEN, Service, comparable, delete_prefix, free_port, redis_server_available

pytestmark = [pytest.mark.service]


def dscan(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "scanner_service.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_submit_wait_exits_like_scan(service: Service) -> None:
    demo = service.data_root / "dscan-demo"
    common = ["--server", service.url, "--token", TOKEN, "--wait", "--num-classes", "10", "--batch-size", "32"]
    gate = dscan("submit", str(demo), *common, "--format", "json")
    assert gate.returncode == 1, gate.stderr
    local = dscan("scan", str(demo), "--num-classes", "10", "--batch-size", "32", "--format", "json")
    assert local.returncode == 1
    assert comparable(json.loads(gate.stdout)) == comparable(json.loads(local.stdout))
    passing = dscan("submit", str(demo), *common, "--fail-on", "never", "--format", "markdown")
    assert passing.returncode == 0 and passing.stdout.startswith("# dscan report")
    junit = dscan("submit", str(demo), *common, "--format", "junit")
    assert junit.returncode == 1 and "<testsuite" in junit.stdout


def test_submit_wait_whose_selection_leaves_no_check_exits_2_like_scan(service: Service) -> None:
    """--select I (the image checks) on HDF5 files runs no check: no pass, whichever way the scan ran (the
    service refuses the request, with the command's words)."""
    small = str(service.data_root / "small")
    gate = dscan("submit", small, "--server", service.url, "--token", TOKEN, "--wait", "--select", "I")
    local = dscan("scan", small, "--select", "I")
    assert gate.returncode == local.returncode == 2, gate.stderr
    assert "leave no check that applies to this hdf5 dataset" in gate.stderr
    said = local.stderr.strip().splitlines()[-1].removeprefix("Error: ")
    assert gate.stderr.strip().splitlines()[-1] == f"Error: the service answered 422: {said}"


def test_submit_wait_whose_job_fails_removes_the_report_an_earlier_run_left(service: Service, tmp_path: Path) -> None:
    """A job that ends without a report (here: label checks alone on files without labels) left the earlier
    run's report in the --output file, for a CI job to publish as this run's."""
    small = str(service.data_root / "small")
    common = ["--server", service.url, "--token", TOKEN, "--wait", "--output", str(tmp_path / "dscan.xml")]
    first = dscan("submit", small, *common)
    assert first.returncode == 0 and (tmp_path / "dscan.xml").stat().st_size > 0, first.stderr
    failed = dscan("submit", small, *common, "--select", "L")
    assert failed.returncode == 2 and "no labels were read from it (L)" in failed.stderr, failed.stderr
    assert not (tmp_path / "dscan.xml").exists() and "the report of an earlier scan" in failed.stderr


def test_submit_errors_exit_2(service: Service) -> None:
    refused = dscan("submit", "/etc", "--server", service.url, "--token", TOKEN)
    assert refused.returncode == 2 and "403" in refused.stderr and "outside the data roots" in refused.stderr
    anonymous = dscan("submit", str(service.data_root / "small"), "--server", service.url)
    assert anonymous.returncode == 2 and "401" in anonymous.stderr
    nobody = dscan("submit", "x", "--server", f"http://127.0.0.1:{free_port()}", "--wait")
    assert nobody.returncode == 2 and "cannot reach the dscan service" in nobody.stderr
    for token in ("tökén", "two words"):  # a traceback and exit 1 (a verdict, to a CI gate) before
        garbled = dscan("submit", "x", "--server", service.url, "--token", token)
        assert garbled.returncode == 2 and "HTTP header cannot carry" in garbled.stderr, garbled.stderr
    schemeless = dscan("submit", "x", "--server", "localhost:8000")
    assert schemeless.returncode == 2 and "Traceback" not in schemeless.stderr


Answer = Callable[[str, str], tuple[str, bytes]]
"""(method, path) -> (content type, body) of a stand-in server's 200 answers."""


@contextmanager
def answering(answer: Answer) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 that answers every request 200 with ``answer``; yields its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _reply(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            kind, body = answer(self.command, self.path)
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _reply

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _jobs_with_report(report: bytes) -> Answer:
    """A stand-in for the API whose one job has succeeded with ``report``."""

    def answer(method: str, path: str) -> tuple[str, bytes]:
        if "/report" in path:
            return "application/json", report
        job = {"id": "j1", "status": "queued" if method == "POST" else "succeeded", "url": "http://x/j1"}
        return "application/json", json.dumps(job).encode()

    return answer


NOT_DSCAN: dict[str, Answer] = {
    "login-page": lambda method, path: ("text/html", b"<html>Please log in</html>"),
    "other-json": lambda method, path: ("application/json", b'{"detail": "ok"}'),
    "json-list": lambda method, path: ("application/json", b"[]"),
    "no-report": _jobs_with_report(b'{"schema_version": "1.0"}'),
}


@pytest.mark.parametrize("name", list(NOT_DSCAN))
def test_submit_to_a_server_that_is_no_dscan_service_exits_2(tmp_path: Path, name: str) -> None:
    with answering(NOT_DSCAN[name]) as url:
        out = dscan("submit", str(tmp_path), "--server", url, "--wait", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [out.stderr.strip()] and "did not answer as a dscan service does" in out.stderr


def test_submit_takes_a_server_address_without_scheme_or_with_the_api_prefix(service: Service) -> None:
    """``--server localhost:8000`` failed with "unsupported protocol 'localhost://'", and ``--server
    URL/api/v1`` with a bare "404: Not Found": both name the service."""
    small = str(service.data_root / "small")
    for server in (service.url.removeprefix("http://"), service.url + "/api/v1/", service.url + "/"):
        out = dscan("submit", small, "--server", server, "--token", TOKEN, "--wait", "--format", "json")
        assert out.returncode == 0, (server, out.stderr)
        assert json.loads(out.stdout)["summary"]["passed"]


def test_an_error_page_of_another_server_is_named_by_its_title_not_pasted_whole(tmp_path: Path) -> None:
    """A proxy's or another server's HTML error page (404 here) came back whole in the message."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = b"<html><head><title>404 Not Found</title></head><body>" + b"<p>filler</p>" * 500 + b"</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        out = dscan("submit", str(tmp_path), "--server", url, "--wait", cwd=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "an HTML page titled '404 Not Found'" in line and "without /api/v1" in line and "filler" not in line


@pytest.mark.parametrize("timeout", ["-1", "0"])
def test_submit_timeout_that_is_no_wait_is_a_bad_option(tmp_path: Path, timeout: str) -> None:
    """``--timeout -1`` was taken, and then reported as "did not end within -1 s"."""
    with answering(NOT_DSCAN[next(iter(NOT_DSCAN))]) as url:
        out = dscan("submit", str(tmp_path), "--server", url, "--wait", "--timeout", timeout, cwd=tmp_path)
    assert out.returncode == 2 and "Invalid value for '--timeout'" in out.stderr, out.stderr


def test_submit_dash_output_is_standard_output(tmp_path: Path) -> None:
    data = tmp_path / "ok.h5"
    write_h5(data, {"x": np.arange(40, dtype="f4").reshape(10, 4)})
    local = dscan("scan", str(data), "-j1", "--format", "json")
    with answering(_jobs_with_report(local.stdout.encode())) as url:
        out = dscan("submit", str(data), "--server", url, "--wait", "--format", "json", "-o", "-", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(local.stdout)
    assert not (tmp_path / "-").exists()


def test_submit_without_wait_prints_the_job(service: Service) -> None:
    out = dscan("submit", "small", "--server", service.url, "--token", TOKEN, "--format", "json", "--force")
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    assert job["status"] == "queued" and job["url"].endswith(job["id"])


def _serve_env(redis_url: str, prefix: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSCAN_")}
    env.update({"DSCAN_REDIS_URL": redis_url, "DSCAN_KEY_PREFIX": prefix, "DSCAN_QUEUE": prefix})
    return env


@pytest.mark.slow
def test_serve_runs_everything_and_stops_on_sigterm(redis_url: str, data_root: Path, tmp_path: Path) -> None:
    prefix = f"dscantest-{uuid.uuid4().hex[:12]}"
    port = free_port()
    env = _serve_env(redis_url, prefix)
    cmd = [sys.executable, "-m", "scanner_service.cli", "serve", "--port", str(port), "--workers", "1"]
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen([*cmd, "--data-root", str(data_root)], env=env, cwd=REPO, stderr=err)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "dscan serve did not become ready"
            time.sleep(0.3)
        out = dscan("submit", "small", "--server", f"http://127.0.0.1:{port}", "--wait", "--format", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["summary"]["items_scanned"] == 10 + 20 + 30 + 40  # rows of s0..s3.h5
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        text = log.read_text()
        assert "dscan serve: API on" in text and "stopping" in text
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # serve stops its children; kill only if it does not
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        delete_prefix(redis_url, prefix)


@pytest.mark.slow
@pytest.mark.skipif(not redis_server_available(), reason="needs redis-server on PATH")
def test_serve_starts_a_private_redis_when_none_answers(data_root: Path) -> None:
    from api.serve import start

    env = {k: v for k, v in os.environ.items() if not k.startswith("DSCAN_")}
    unused = f"redis://127.0.0.1:{free_port()}/0"
    service = start(port=free_port(), workers=1, data_roots=[data_root], env=env, default_redis=unused)
    try:
        assert service.private is not None and service.redis_url == service.private.url
        with httpx.Client(base_url=service.url, timeout=30) as client:
            job = client.post("/api/v1/scans", json={"path": "small"}).json()
            deadline = time.monotonic() + 60
            while (state := client.get(f"/api/v1/scans/{job['id']}").json())["status"] not in ("succeeded", "failed"):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert state["status"] == "succeeded"
    finally:
        private = service.private
        service.stop()
    assert private is not None and private.process.poll() is not None and not private.folder.exists()


def test_serve_without_redis_server_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from api.serve import PrivateRedis, ServeError

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServeError, match="redis-server is not installed"):
        PrivateRedis.start()
    out = dscan("serve", env={**{k: v for k, v in os.environ.items() if not k.startswith("DSCAN_")}, "PATH": ""})
    assert out.returncode == 2 and "data roots" in out.stderr


def test_submit_wait_says_when_no_worker_answers_and_when_one_does(make_service: Callable[..., Service]) -> None:
    """With no worker, a scan waits until one starts: ``submit --wait`` waited in silence (for ever, without
    --timeout). It says so on standard error, says when a worker answers, and then ends as ``scan`` would."""
    svc = make_service(workers=[])
    small = str(svc.data_root / "small")
    cmd = [sys.executable, "-m", "scanner_service.cli", "submit", small, "--server", svc.url, "--wait", "--force"]
    proc = subprocess.Popen([*cmd, "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "dscan: no worker answers the service: scan " in first and "waits until one starts" in first, first
        svc.start_worker(1)
        out, rest = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "dscan: a worker answers again; scan " in rest, rest
    assert proc.returncode == 0, (out, rest)
    assert "PASSED" in out


@pytest.mark.parametrize("command", ["worker", "api"])
def test_a_worker_or_api_with_bad_settings_says_which_variable_in_one_line(command: str, tmp_path: Path) -> None:
    """The standard commands of docs/service.md, started without a required setting, or with a data root that is
    no folder: exit status 1 and one line naming the DSCAN_ variable, not a framework's traceback."""
    bin_dir = Path(sys.executable).parent
    argv = {
        "worker": [str(bin_dir / "celery"), "-A", "workers.app", "worker", "-c", "1"],
        "api": [str(bin_dir / "uvicorn"), "api.app:create_app", "--factory", "--port", str(free_port())],
    }[command]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DSCAN_")}
    cases = {
        "DSCAN_DATA_ROOTS: not set, and required": {"DSCAN_REDIS_URL": "redis://127.0.0.1:1/0"},
        "DSCAN_REDIS_URL: not set, and required": {"DSCAN_DATA_ROOTS": str(tmp_path)},
        f"DSCAN_DATA_ROOTS: data root {tmp_path / 'gone'} is not a folder": {
            "DSCAN_REDIS_URL": "redis://127.0.0.1:1/0",
            "DSCAN_DATA_ROOTS": str(tmp_path / "gone"),
        },
    }
    for said, env in cases.items():
        out = subprocess.run(argv, capture_output=True, text=True, env={**clean, **env}, cwd=REPO, timeout=120)
        assert out.returncode == 1, out.stderr
        assert out.stderr.strip().splitlines() == [f"dscan {command}: invalid settings: {said}"], out.stderr


def test_submit_wait_names_the_config_file_it_took_options_from(service: Service, tmp_path: Path) -> None:
    """`dscan scan` notes the dscan.toml it read; `dscan submit --wait` applied the same file without a word."""
    (tmp_path / "dscan.toml").write_text('fail-on = "never"\nmax-locations = 5\n')
    small = str(service.data_root / "small")
    args = ["--format", "json"]
    gate = dscan("submit", small, "--server", service.url, "--token", TOKEN, "--wait", *args, cwd=tmp_path)
    local = dscan("scan", small, *args, cwd=tmp_path)
    assert gate.returncode == local.returncode == 0, gate.stderr
    said = json.loads(gate.stdout)["info"].get("config.file")
    assert said == json.loads(local.stdout)["info"]["config.file"]
    assert said == f"options from {tmp_path / 'dscan.toml'}: fail-on, max-locations"
