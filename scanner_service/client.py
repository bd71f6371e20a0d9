"""A small client of the scan service's HTTP API (``dscan submit``). Imports httpx only when used."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import DscanError

if TYPE_CHECKING:
    import httpx

    from .report import Report

ENDED = frozenset({"succeeded", "failed", "cancelled"})
STATUSES = ENDED | {"queued", "running"}
TRANSIENT = frozenset({502, 503, 504})
"""Answers that say "try again shortly" (the API while its Redis restarts, a proxy while the API restarts)."""

WORKERS_FIRST_S = 3.0
WORKERS_EVERY_S = 10.0
"""While ``wait`` waits, it asks the service whether any worker answers (``/readyz``) once the scan has gone on
for ``WORKERS_FIRST_S``, then every ``WORKERS_EVERY_S``: with none, a scan waits for ever, and says nothing."""

OUTAGE_PATIENCE_S = 120.0
"""How long ``wait`` rides out a service that is unavailable (``TRANSIENT`` answers, no answer at all) while
its scan goes on, before it gives up: as long as the workers wait for Redis."""


class ServiceError(DscanError):
    """The service could not be reached, refused the request, or the job did not succeed."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


class ServiceClient:
    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        import httpx

        if token and not (token.isascii() and token.isprintable() and " " not in token):
            raise ServiceError(
                "the API token (--token or DSCAN_TOKEN) holds characters an HTTP header cannot carry (spaces, "
                "control or non-ASCII characters): copy it again"
            )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = service_url(server)
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

    def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        import httpx

        try:
            response = self.http.request(method, url, **kwargs)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ServiceError(f"cannot reach the dscan service at {self.server}: {exc}", transient=True) from None
        if response.status_code >= 400:
            raise ServiceError(
                f"the service answered {response.status_code}: {_detail(response)}",
                response.status_code,
                transient=response.status_code in TRANSIENT,
            )
        return response

    def _not_dscan(self, response: httpx.Response, what: str) -> ServiceError:
        """The error for an answer no dscan service gives (a login page, a wrong base URL, another API)."""
        return ServiceError(
            f"{self.server} did not answer as a dscan service does: {response.request.method} "
            f"{response.url.path} answered {what}; check --server"
        )

    def _job(self, response: httpx.Response, *keys: str) -> dict[str, Any]:
        """The JSON object of a job, with ``keys`` (and a known ``status``) as strings; else ServiceError."""
        kind = response.headers.get("content-type", "no content type").split(";")[0].strip()
        try:
            body = response.json()
        except ValueError:
            raise self._not_dscan(response, f"{kind}, not JSON") from None
        if not isinstance(body, dict):
            raise self._not_dscan(response, f"a JSON {type(body).__name__}, not a job")
        missing = [key for key in ("status", *keys) if not isinstance(body.get(key), str)]
        if missing or body["status"] not in STATUSES:
            raise self._not_dscan(response, f"a JSON object without a job's {', '.join(missing) or 'status'}")
        return body

    def submit(self, path: str, options: dict[str, Any], force: bool = False) -> dict[str, Any]:
        body = {"path": path, **options, **({"force": True} if force else {})}
        for name, value in body.items():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and not _utf8(text):
                    from .text import printable

                    what = "PATH" if name == "path" else f"--{name.replace('_', '-')}"
                    raise ServiceError(
                        f"{what} {printable(text)} is not valid UTF-8, and the service's API carries UTF-8 text "
                        "only: scan the folder that holds it (its report spells such names out), or rename it"
                    )
        return self._job(self._call("POST", "/api/v1/scans", json=body), "id", "url")

    def status(self, job_id: str) -> dict[str, Any]:
        return self._job(self._call("GET", f"/api/v1/scans/{job_id}"))

    def report(self, job_id: str, fmt: str = "json") -> str:
        text: str = self._call("GET", f"/api/v1/scans/{job_id}/report", params={"format": fmt}).text
        return text

    def fetch_report(self, job_id: str) -> Report:
        """The job's report, checked against the report's schema."""
        from pydantic import ValidationError

        from .report import Report

        response = self._call("GET", f"/api/v1/scans/{job_id}/report", params={"format": "json"})
        try:
            return Report.model_validate_json(response.text)
        except ValidationError:
            raise self._not_dscan(response, "something that is no dscan report") from None

    def cancel(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", f"/api/v1/scans/{job_id}").json()
        return result

    def workers_answering(self) -> bool | None:
        """Whether any worker answers the service's ping (its ``/readyz``); None when the service cannot tell
        (Redis down, no answer, a server of another kind)."""
        import httpx

        try:
            body = self.http.get("/readyz").json()
        except (httpx.HTTPError, ValueError):
            return None
        if not isinstance(body, dict) or body.get("redis") != "ok":
            return None
        answering = body.get("workers_answering")
        return answering if isinstance(answering, bool) else None

    def wait(
        self,
        job_id: str,
        timeout: float | None = None,
        on_status: Callable[[dict[str, Any]], None] | None = None,
        interval: float = 0.2,
        max_interval: float = 2.0,
        on_workers: Callable[[bool], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until the job ends (the interval grows from ``interval`` to ``max_interval``). A service that
        is unavailable meanwhile is asked again, for up to ``OUTAGE_PATIENCE_S`` (and within ``timeout``).
        ``on_workers`` is told when no worker answers any more (False), and when one answers again (True)."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        outage: float | None = None
        ask_workers, answering = started + WORKERS_FIRST_S, True
        seen: tuple[Any, Any] = (None, None)
        while True:
            try:
                state = self.status(job_id)
            except ServiceError as exc:
                now = time.monotonic()
                outage = now if outage is None else outage
                if not exc.transient or now - outage > OUTAGE_PATIENCE_S or (deadline is not None and now > deadline):
                    raise
                time.sleep(interval)
                interval = min(max_interval, interval * 1.5)
                continue
            outage = None
            if on_status is not None:
                on_status(state)
            moved = (state["status"], state.get("progress")) != seen
            seen = (state["status"], state.get("progress"))
            if on_workers is not None and not answering and moved and state["status"] != "cancelled":
                # the scan moved on (a cancel aside, only a worker moves it): one is at it
                answering = True
                on_workers(True)
            if state["status"] in ENDED:
                return state
            if on_workers is not None and time.monotonic() >= ask_workers:
                # while none answers, ask again at the polling pace: a worker that starts is told at once
                ask_workers = time.monotonic() + (WORKERS_EVERY_S if answering else max_interval)
                now_answering = self.workers_answering()
                if now_answering is not None and now_answering != answering:
                    answering = now_answering
                    on_workers(answering)
            if deadline is not None and time.monotonic() > deadline:
                url = f"{self.server}/api/v1/scans/{job_id}"
                raise ServiceError(
                    f"scan {job_id} did not end within {timeout:g} s (still {state['status']}); it goes on on the "
                    f"server: its status is at {url}, and an HTTP DELETE of that address cancels it"
                )
            time.sleep(interval)
            interval = min(max_interval, interval * 1.5)


def _utf8(text: str) -> bool:
    """Whether ``text`` can be sent as JSON: a name with bytes that are not UTF-8 reaches Python with them as
    surrogate escapes (``os.fsdecode``), which no UTF-8 request body can carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


ANSWER_SHOWN = 200
"""Characters of an error answer that is no dscan service's (an HTML error page) shown in the message."""


def _detail(response: httpx.Response) -> str:
    """What an error answer says: the API's ``detail``; else its text (the start of it, as one line; for an
    HTML page its title), else the reason phrase."""
    import re

    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    text = response.text.strip()
    title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    if title is not None:
        text = f"an HTML page titled {' '.join(title.group(1).split())!r}"
    text = " ".join(text.split())
    if len(text) > ANSWER_SHOWN:
        text = text[:ANSWER_SHOWN] + "…"
    hint = " (is --server the service's base address, without /api/v1?)" if response.status_code == 404 else ""
    return (text or response.reason_phrase) + hint


def service_url(server: str) -> str:
    """The base address of the service as given (``--server``, ``DSCAN_SERVER``): ``http://`` when it names
    no scheme (``localhost:8000``), and without a trailing ``/api/v1`` (the API's own prefix, which the
    client adds)."""
    url = server.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    return url.removesuffix("/api/v1").rstrip("/")
