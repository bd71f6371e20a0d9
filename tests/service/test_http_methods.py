"""HTTP methods as clients use them: ``HEAD`` wherever ``GET`` is answered (``curl -I``, uptime monitors; it
was 405 everywhere), and a 405 that names every method its path answers (``Allow`` named the first route's
only). Real API, workers and Redis."""

from __future__ import annotations

import pytest

from .conftest import Service, submit, wait_job


@pytest.mark.service
def test_head_answers_wherever_get_does(service: Service) -> None:
    with service.client() as client:
        job = submit(client, service.data_root / "dscan-demo", num_classes=10, batch_size=32)
        assert wait_job(client, job["id"])["status"] == "succeeded"
        paths = [
            "/healthz",
            "/api/v1/scans",
            f"/api/v1/scans/{job['id']}",
            f"/api/v1/scans/{job['id']}/report?format=text",
            "/static/app.css",
        ]
        for path in paths:
            get = client.get(path)
            head = client.head(path)
            assert head.status_code == get.status_code == 200, (path, head.status_code, head.text)
            assert head.content == b"", path
            assert head.headers["content-type"] == get.headers["content-type"], path
            assert int(head.headers["content-length"]) == len(get.content) > 0, path
        missing = client.head("/api/v1/scans/0123456789abcdef0123456789abcdef")
        assert missing.status_code == 404 and missing.content == b""


@pytest.mark.service
def test_a_405_names_every_method_the_path_answers(service: Service) -> None:
    job_url = "/api/v1/scans/0123456789abcdef0123456789abcdef"
    with service.client() as client:
        for method, path, allowed in (
            ("OPTIONS", "/api/v1/scans", "GET, HEAD, POST"),
            ("PUT", job_url, "DELETE, GET, HEAD"),
            ("POST", "/healthz", "GET, HEAD"),
        ):
            r = client.request(method, path)
            assert r.status_code == 405, (method, path, r.text)
            assert r.headers["allow"] == allowed, (method, path)
            assert r.json()["detail"] == f"method {method} is not allowed on {path} (allowed: {allowed})"
