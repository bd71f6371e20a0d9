"""One JSON log line per request (with the job id when the request names one) and request metrics."""

from __future__ import annotations

import logging
import time
from typing import Any

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
