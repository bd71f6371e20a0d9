"""Signing in to the pages: when API tokens are configured, a token entered once is kept in a cookie.

The cookie holds the token itself, ``HttpOnly`` (page scripts cannot read it) and ``SameSite=Strict`` (no other
site's page can make the browser send it), ``Secure`` over HTTPS. The API accepts it like the Bearer header
(``api.deps.require_token``), so the page's own calls to ``/api/v1`` need nothing more.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request, Response

from workers.settings import Settings

from ..deps import SESSION_COOKIE, token_ok

SESSION_MAX_AGE_S = 7 * 24 * 3600


def signed_in(request: Request, settings: Settings) -> bool:
    """Whether the pages may be shown: no tokens configured, or the cookie holds a valid one."""
    if not settings.api_tokens:
        return True
    return token_ok(settings, request.cookies.get(SESSION_COOKIE))


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path on this site only (never ``//host`` or ``https://host``)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or any(ord(c) < 32 for c in value):
        return "/"
    return value


def same_origin(request: Request) -> bool:
    """A form post made by one of our own pages (not by another site's page, which could log someone
    in or out): ``Sec-Fetch-Site`` when the browser sends it, else ``Origin`` against ``Host``."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin != "null" and urlsplit(origin).netloc == request.headers.get("host", "")


def set_session(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )
