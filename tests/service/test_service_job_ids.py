"""A job id as people copy it: the API answered 422 "String should match pattern" to an id in upper case,
which the status page (``/scans/{ID}``) takes for the same scan. Real API, real worker, real Redis."""

from __future__ import annotations

import pytest

from .conftest import Service, submit, wait_job

pytestmark = [pytest.mark.service]


def test_an_id_in_upper_case_is_the_same_scan(service: Service) -> None:
    with service.client() as client:
        job = submit(client, service.data_root / "small" / "s0.h5")
        done = wait_job(client, job["id"])
        upper = job["id"].upper()
        state = client.get(f"/api/v1/scans/{upper}")
        assert state.status_code == 200, state.text
        assert state.json()["id"] == job["id"] and state.json()["url"] == done["url"]
        report = client.get(f"/api/v1/scans/{upper}/report")
        assert report.status_code == 200 and report.json() == client.get(f"/api/v1/scans/{job['id']}/report").json()
        ended = client.delete(f"/api/v1/scans/{upper}")
        assert ended.status_code == 409 and "ended already" in ended.json()["detail"], ended.text
        for bad in ("G" * 32, job["id"][:31]):  # no hex id at all: still a 422 that says what an id is
            wrong = client.get(f"/api/v1/scans/{bad}")
            assert wrong.status_code == 422 and "job_id" in wrong.json()["detail"], wrong.text
