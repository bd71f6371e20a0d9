"""Error answers: always ``{"detail": "..."}`` with a message, never a stack trace.

- validation errors: 422 with every problem in one sentence (plus ``errors``, without the input echoed); a
  body that is no JSON at all (malformed, not UTF-8, nested too deeply) is one of them;
- Redis or the broker unreachable: 503 with ``Retry-After`` (the Redis client has socket timeouts, so this
  comes in seconds, not never);
- a method a path does not answer: 405 naming the methods it does, in the message and in ``Allow``;
- anything unexpected: 500 with a generic message; the traceback goes to the log only.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from kombu.exceptions import OperationalError
from starlette.exceptions import HTTPException
from starlette.routing import Match

from workers.settings import Settings
from workers.store import UNAVAILABLE

from .deps import unauthorized
from .paths import PathRejected

log = logging.getLogger("dscan.api")


LOCATIONS = frozenset({"body", "query", "path", "header", "cookie"})
"""The first element of an error's ``loc``: where in the request (a body field may be named ``path`` too)."""


def _where(loc: tuple[object, ...] | list[object]) -> str:
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in LOCATIONS else loc)]
    return ".".join(parts) or (str(loc[0]) if loc else "request")


def _loc(error: dict[str, object]) -> tuple[object, ...] | list[object]:
    loc = error.get("loc", ())
    return loc if isinstance(loc, (tuple, list)) else (loc,)


def validation_message(errors: list[dict[str, object]], json_body: bool = True) -> str:
    """One line for a client: each field and what is wrong with it. ``json_body``: the request said its
    body is JSON (curl -d sends a form unless told otherwise)."""
    problems = []
    for e in errors:
        kind = e.get("type")
        where = _where(_loc(e))
        ctx = e.get("ctx")
        why = ctx.get("error") if isinstance(ctx, dict) else None
        if kind == "json_invalid":
            problems.append(f"body: not valid JSON ({why or e.get('msg')})")
        elif kind == "text_invalid":
            problems.append(f"body: {e.get('msg')} ({why})")
        elif kind == "json_too_deep":
            problems.append(f"body: {e.get('msg')}")
        elif where == "body" and not json_body:
            problems.append('body: send a JSON object, with the header "Content-Type: application/json"')
        elif where == "body" and kind == "missing":
            problems.append('body: a JSON object with at least "path" is required')
        else:
            problems.append(f"{where}: {e.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(dict.fromkeys(problems))


def unparsable_body(exc: HTTPException) -> dict[str, object] | None:
    """The validation error of a body FastAPI could not decode, which it answers with a 400 that does not
    say why ("There was an error parsing the body"); the exception it chains says: bytes that are not text
    in the JSON's encoding, arrays and objects nested deeper than the JSON parser goes, or an integer longer
    than Python converts. None otherwise."""
    cause = exc.__cause__
    if exc.status_code != 400:
        return None
    if isinstance(cause, UnicodeDecodeError):
        byte = cause.object[cause.start : cause.start + 1].hex()
        return {
            "type": "text_invalid",
            "loc": ("body", cause.start),
            "msg": f"not valid {cause.encoding.upper()}",
            "ctx": {"error": f"byte 0x{byte} at position {cause.start}"},
        }
    if isinstance(cause, RecursionError):
        return {"type": "json_too_deep", "loc": ("body",), "msg": "JSON nested too deeply"}
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):  # Python's 4,300-digit limit
        return {"type": "int_too_long", "loc": ("body",), "msg": "a number with more than 4,300 digits"}
    return None


METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on the request's path. Starlette's 405 names those of the
    first route that matches the path only (``Allow: POST`` on ``/api/v1/scans``, which answers GET too)."""
    routes = request.app.router.routes
    allowed = [m for m in METHODS if any(r.matches({**request.scope, "method": m})[0] is Match.FULL for r in routes)]
    if "GET" in allowed:
        allowed.insert(allowed.index("GET") + 1, "HEAD")  # (HeadAsGet)
    return allowed


def browser(request: Request) -> bool:
    """Whether the client asked for HTML (a browser): it is answered with the site's pages, not JSON."""
    return "text/html" in request.headers.get("accept", "")


def install(app: FastAPI, settings: Settings) -> None:
    redis_where = settings.redis_display

    async def invalid(request: Request, exc: Exception) -> Response:
        """422 naming every problem; a browser asking for a page with a bad query (``/?offset=-1``, a link
        edited by hand) gets it as the site's error page, not as JSON."""
        assert isinstance(exc, RequestValidationError)
        errors = [dict(e) for e in exc.errors()]
        if browser(request) and not request.url.path.startswith("/api/"):
            from .pages.routes import error_page

            message = validation_message(errors).removeprefix("invalid request: ")
            return error_page(request, 422, "Invalid address", f"This page's address is not valid: {message}.")
        return refuse(request, errors)

    def refuse(request: Request, errors: list[dict[str, object]]) -> JSONResponse:
        """422 naming every problem; 401 first when the token is missing or wrong (a body FastAPI could not
        parse is refused before the token is looked at)."""
        why = unauthorized(request, settings) if request.url.path.startswith("/api/") else None
        if why is not None:
            return JSONResponse({"detail": why}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        slim = [{"loc": list(_loc(e)), "msg": e.get("msg"), "type": e.get("type")} for e in errors]
        declared = request.headers.get("content-type", "").split(";")[0].strip().lower()
        json_body = declared == "application/json" or declared.endswith("+json")
        return JSONResponse({"detail": validation_message(errors, json_body), "errors": slim}, status_code=422)

    async def rejected(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PathRejected)
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    async def store_down(request: Request, exc: Exception) -> JSONResponse:
        log.warning("Redis unreachable: %s", exc)
        return JSONResponse(
            {"detail": f"the job store is unavailable (Redis at {redis_where} does not answer); try again shortly"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    async def queue_down(request: Request, exc: Exception) -> JSONResponse:
        log.warning("broker unreachable: %s", exc)
        return JSONResponse(
            {"detail": f"the task queue is unavailable (Redis at {redis_where} does not answer); try again shortly"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        """A page that does not exist, asked for by a browser: the site's own 404 page; a body FastAPI could
        not decode: 422 saying why, like any malformed body; else JSON."""
        assert isinstance(exc, HTTPException)
        problem = unparsable_body(exc)
        if problem is not None:
            return refuse(request, [problem])
        if exc.status_code == 404 and browser(request) and not request.url.path.startswith("/api/"):
            from .pages.routes import error_page

            return error_page(
                request, 404, "Page not found", "There is no such page: the scans are listed on the home page."
            )
        if exc.status_code == 405:
            allowed = allowed_methods(request)
            detail = f"method {request.method} is not allowed on {request.url.path} (allowed: {', '.join(allowed)})"
            return JSONResponse({"detail": detail}, status_code=405, headers={"Allow": ", ".join(allowed)})
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": "internal error: the service log has the details"}, status_code=500)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(PathRejected, rejected)
    for cls in UNAVAILABLE:
        app.add_exception_handler(cls, store_down)
    app.add_exception_handler(OperationalError, queue_down)
    app.add_exception_handler(Exception, internal)
