"""A small client of the scan service's HTTP API (``dscan submit``). Imports httpx only when used."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .errors import DscanError

ENDED = frozenset({"succeeded", "failed", "cancelled"})


class ServiceError(DscanError):
    """The service could not be reached, refused the request, or the job did not succeed."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ServiceClient:
    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        import httpx

        if token and not (token.isascii() and token.isprintable() and " " not in token):
            raise ServiceError(
                "the API token (--token or DSCAN_TOKEN) holds characters an HTTP header cannot carry (spaces, "
                "control or non-ASCII characters): copy it again"
            )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = server.rstrip("/")
        try:
            self.http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout)
        except (httpx.InvalidURL, ValueError) as exc:
            raise ServiceError(f"{server!r} is no service URL (like http://host:8000): {exc}") from None

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self.http.request(method, url, **kwargs)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ServiceError(f"cannot reach the dscan service at {self.server}: {exc}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text.strip() or response.reason_phrase
            raise ServiceError(f"the service answered {response.status_code}: {detail}", response.status_code)
        return response

    def submit(self, path: str, options: dict[str, Any], force: bool = False) -> dict[str, Any]:
        body = {"path": path, **options, **({"force": True} if force else {})}
        result: dict[str, Any] = self._call("POST", "/api/v1/scans", json=body).json()
        return result

    def status(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/api/v1/scans/{job_id}").json()
        return result

    def report(self, job_id: str, fmt: str = "json") -> str:
        text: str = self._call("GET", f"/api/v1/scans/{job_id}/report", params={"format": fmt}).text
        return text

    def cancel(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/scans/{job_id}").json()
        return result

    def wait(
        self,
        job_id: str,
        timeout: float | None = None,
        on_status: Callable[[dict[str, Any]], None] | None = None,
        interval: float = 0.2,
        max_interval: float = 2.0,
    ) -> dict[str, Any]:
        """Poll until the job ends (the interval grows from ``interval`` to ``max_interval``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            state = self.status(job_id)
            if on_status is not None:
                on_status(state)
            if state["status"] in ENDED:
                return state
            if deadline is not None and time.monotonic() > deadline:
                raise ServiceError(f"scan {job_id} did not end within {timeout:g} s (still {state['status']})")
            time.sleep(interval)
            interval = min(max_interval, interval * 1.5)
