"""Liveness, readiness and metrics: ``/healthz``, ``/readyz``, ``/metrics`` (no token needed)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from kombu.exceptions import OperationalError
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scanner_service import __version__
from workers.store import UNAVAILABLE

from ..deps import QueueDep, SettingsDep, StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok", "version": __version__}


@router.get("/readyz", responses={503: {"description": "Redis unreachable or no worker answering"}})
def readyz(store: StoreDep, queue: QueueDep, settings: SettingsDep) -> JSONResponse:
    """Ready to scan: Redis answers and at least one worker answers a ping."""
    body: dict[str, Any] = {"ready": False, "redis": "ok", "workers_answering": False}
    try:
        store.ping()
    except UNAVAILABLE as exc:
        body["redis"] = f"unreachable: {exc}"
        body["detail"] = f"Redis at {settings.redis_display} does not answer"
        return JSONResponse(body, status_code=503)
    try:
        answering = queue.workers() > 0
    except (OperationalError, *UNAVAILABLE) as exc:
        body["detail"] = f"cannot ping the workers: {exc}"
        return JSONResponse(body, status_code=503)
    body["workers_answering"] = answering
    if not answering:
        body["detail"] = "no worker answered a ping: start one with `celery -A workers.app worker`"
        return JSONResponse(body, status_code=503)
    body["ready"] = True
    return JSONResponse(body)


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus metrics: jobs by status, jobs ended, items and bytes scanned, scan durations, requests."""
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
