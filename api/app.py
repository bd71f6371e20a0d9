"""The application factory: ``create_app(settings)``; ``uvicorn api.app:create_app --factory`` for the command
line (settings then come from the environment, when the factory is called, not at import)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from scanner_service import __version__
from workers.logs import configure_logging
from workers.settings import Settings, SettingsError, get_settings
from workers.store import Store

from . import errors
from .metrics import Metrics
from .middleware import BodyLimit, HeadAsGet, RequestLog
from .pages import router as pages_router
from .queue import TaskQueue
from .routes import ROUTERS

DESCRIPTION = """Scan datasets for the defects that turn training into NaN, as a service.

Submit a scan with `POST /api/v1/scans`, follow it with `GET /api/v1/scans/{id}`, read the report with
`GET /api/v1/scans/{id}/report?format=json|junit|markdown|text`. When API tokens are configured every
`/api/v1` call needs `Authorization: Bearer <token>`."""


def create_app(settings: Settings | None = None, *, configure_logs: bool = True) -> FastAPI:
    """Build the API for ``settings`` (default: from the environment)."""
    if settings is None:
        try:
            settings = get_settings()
        except SettingsError as exc:  # the command line (uvicorn's factory): one line to act on, no traceback
            raise SystemExit(f"dscan api: {exc}") from None
    if configure_logs:
        configure_logging("api", settings.log_level)
    store = Store(settings)
    queue = TaskQueue(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        queue.close()
        await store.aclose()
        store.close()

    app = FastAPI(
        title="dscan",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.queue = queue
    app.state.metrics = Metrics(store)

    errors.install(app, settings)
    app.add_middleware(HeadAsGet)
    app.add_middleware(BodyLimit, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(RequestLog, metrics=app.state.metrics)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(pages_router)
    return app
