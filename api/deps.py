"""Typed dependencies shared by the routes: settings, the store, the task queue, authentication.

Routes get the settings ``create_app`` was built from (``app.state``; by default the cached
:func:`~workers.settings.get_settings`), so a route's settings and the store it talks to always agree. Tests
pass their own settings to ``create_app``. (``dependency_overrides`` would work too, but FastAPI inspects an
override's signature on every request: too slow for the status polls.)
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from workers.settings import Settings
from workers.store import Store

from .queue import TaskQueue


async def settings_of(request: Request) -> Settings:
    """The settings the app was built with (``create_app(settings)``; by default ``get_settings()``)."""
    settings: Settings = request.app.state.settings
    return settings


async def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


async def get_queue(request: Request) -> TaskQueue:
    queue: TaskQueue = request.app.state.queue
    return queue


SettingsDep = Annotated[Settings, Depends(settings_of)]
StoreDep = Annotated[Store, Depends(get_store)]
QueueDep = Annotated[TaskQueue, Depends(get_queue)]

SESSION_COOKIE = "dscan_token"
"""Cookie the status page keeps a signed-in token in (HttpOnly, SameSite=Strict): accepted like the header."""


def token_ok(settings: Settings, token: str | None) -> bool:
    """Whether ``token`` is one of the configured API tokens (always true when none are configured)."""
    tokens = settings.token_values()
    if not tokens:
        return True
    if not token:
        return False
    given = token.encode()
    return any(secrets.compare_digest(given, t.encode()) for t in tokens)


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def unauthorized(request: Request, settings: Settings) -> str | None:
    """Why the request may not use the API (tokens are configured and it carries none that is valid), or None."""
    if not settings.api_tokens:
        return None
    token = bearer_token(request) or request.cookies.get(SESSION_COOKIE)
    if token_ok(settings, token):
        return None
    return "missing API token: send Authorization: Bearer <token>" if token is None else "invalid API token"


async def require_token(request: Request, settings: SettingsDep) -> None:
    """401 unless the request carries ``Authorization: Bearer <token>`` (or the status page's cookie) with a
    configured token."""
    why = unauthorized(request, settings)
    if why is not None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, why, headers={"WWW-Authenticate": "Bearer"})


Authenticated = Depends(require_token)
