"""One JSON log line per request (with the job id when the request names one), request metrics, the limit on
request bodies, and ``HEAD`` answered wherever ``GET`` is."""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .metrics import Metrics

log = logging.getLogger("dscan.api")


class RequestLog:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = time.perf_counter() - start
            route: Any = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(scope["method"], template, str(status)).observe(elapsed)
            state = scope.get("state") or {}
            job_id = (scope.get("path_params") or {}).get("job_id") or state.get("job_id")
            quiet = scope["method"] == "GET" and status < 400  # polls: debug level
            if log.isEnabledFor(logging.DEBUG if quiet else logging.INFO):
                log.log(
                    logging.DEBUG if quiet else logging.INFO,
                    "%s %s %d",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={"status": status, "ms": round(elapsed * 1000, 2), "job_id": job_id, "route": template},
                )


class BodyLimit:
    """Request bodies above ``max_body_bytes`` are answered 413 with a JSON detail, like every other error: at
    once when the request declares its length, else when reading passes the limit (the error is raised from
    ``receive``, so the body is never held whole)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            detail = f"request body too large: {int(declared):,} bytes (at most {limit:,})"
            await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)
            return
        total = 0

        async def limited() -> Message:
            nonlocal total
            message = await receive()
            if message["type"] == "http.request":
                total += len(message.get("body", b""))
                if total > limit:
                    raise HTTPException(413, f"request body too large: more than {limit:,} bytes")
            return message

        await self.app(scope, limited, send)


class HeadAsGet:
    """``HEAD`` answered as ``GET`` without the body (same status and headers, ``Content-Length`` included),
    as HTTP requires of every resource that answers ``GET``: FastAPI's routes only answer the methods they
    declare, so a monitor's ``HEAD /healthz`` or a ``curl -I`` of a report got 405."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)
