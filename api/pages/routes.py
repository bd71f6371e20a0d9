"""The status page: ``/`` (jobs), ``/scans/{id}`` (one scan and its report), ``/checks`` (the catalogue),
``/login`` and ``/logout``, and the page's own CSS and JavaScript under ``/static``.

Server-rendered Jinja templates with autoescaping (every path and detail comes from the user or the data);
a finished scan reads fully without JavaScript. ``static/app.js`` adds live progress by polling the JSON API,
starting scans from the form and cancelling. Responses carry a Content-Security-Policy that allows scripts,
styles and requests from this origin only: nothing is fetched from anywhere else.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from kombu.exceptions import OperationalError
from pydantic import ValidationError

from scanner_service import __version__, checks
from scanner_service.config import ScanConfig
from scanner_service.render import notes
from scanner_service.report import Report
from scanner_service.text import printable
from workers.settings import Settings
from workers.store import ACTIVE, UNAVAILABLE, JobStatus

from ..deps import SettingsDep, StoreDep, token_ok
from ..schemas import ScanView
from . import views
from .session import clear_session, safe_next, same_origin, set_session, signed_in

log = logging.getLogger("dscan.api")

HERE = Path(__file__).resolve().parent.parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
STATIC_TYPES = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
JOBS_PER_PAGE = 50
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
PAGE_PARAM = re.compile(r"^p_([A-Z][0-9]{3})$")

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

router = APIRouter(include_in_schema=False)


def _asset_versions() -> dict[str, str]:
    out = {}
    for name in STATIC_TYPES:
        path = STATIC / name
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:10] if path.exists() else __version__
    return out


ASSET_VERSIONS = _asset_versions()


def asset(name: str) -> str:
    """URL of a static file, with its content digest so browsers may cache it for long."""
    return f"/static/{name}?v={ASSET_VERSIONS.get(name, __version__)}"


env = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
env.globals.update(asset=asset, version=__version__)
env.filters.update(
    bytes=views.human_bytes,
    code=views.code_spans,
    count=views.human_count,
    duration=views.human_duration,
    number=views.human_number,
    percent=views.human_percent,
    printable=printable,
    probability=views.probability,
    share=views.share,
    when=views.when,
)
templates = Jinja2Templates(env=env)


def page(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200, settings: Settings | None = None
) -> HTMLResponse:
    settings = settings or request.app.state.settings
    base = {"auth": bool(settings.api_tokens), "nav": None}
    response = templates.TemplateResponse(request, name, {**base, **context}, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    response.headers["Cache-Control"] = "no-store"
    return response


def error_page(request: Request, status_code: int, title: str, message: str) -> HTMLResponse:
    return page(request, "error.html", {"title": title, "message": message}, status_code)


def unavailable(request: Request, settings: Settings, exc: Exception) -> HTMLResponse:
    log.warning("Redis unreachable: %s", exc)
    response = error_page(
        request,
        503,
        "The job store is unavailable",
        f"Redis at {settings.redis_display} does not answer. Reload this page in a few seconds.",
    )
    response.headers["Retry-After"] = "5"
    return response


def login_gate(request: Request, settings: Settings) -> Response | None:
    """A redirect to the login form when tokens are configured and the browser holds no valid one."""
    if signed_in(request, settings):
        return None
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?{urlencode({'next': target})}", status_code=303)


# -- the form -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    kind: str  # text, number, select, checkbox
    help: str
    advanced: bool = False
    choices: tuple[str, ...] = ()
    placeholder: str = ""
    datalist: str | None = None

    @property
    def bounds(self) -> tuple[int | None, int | None]:
        """A number's smallest and largest value, as the scan options validate it (the browser then says so
        before sending)."""
        low = high = None
        for rule in ScanConfig.model_fields[self.name].metadata:
            low = getattr(rule, "ge", low)
            high = getattr(rule, "le", high)
        return low, high


def _help(name: str) -> str:
    description = ScanConfig.model_fields[name].description or ""
    return description[:1].upper() + description[1:] + "." if description else ""


FORM_FIELDS = (
    FormField("num_classes", "Number of classes", "number", _help("num_classes") + " Missing classes are reported."),
    FormField(
        "batch_size", "Batch size", "number", "The training batch size: classes likely absent from a batch are found."
    ),
    FormField(
        "fail_on",
        "Fail on",
        "select",
        "The scan fails when it finds anything of this severity or worse.",
        choices=("error", "warning", "never"),
    ),
    FormField("labels", "Labels dataset", "text", _help("labels"), advanced=True, placeholder="label"),
    FormField(
        "select",
        "Only these checks",
        "text",
        "Codes, code prefixes or names, comma-separated (empty: every check).",
        advanced=True,
        placeholder="V, L003",
        datalist="check-codes",
    ),
    FormField(
        "ignore",
        "Skip these checks",
        "text",
        "Codes, code prefixes or names, comma-separated.",
        advanced=True,
        placeholder="constant-feature",
        datalist="check-codes",
    ),
    FormField(
        "decoder",
        "LMDB decoder",
        "text",
        "How LMDB values are decoded: datum, image, npy, msgpack or raw:DTYPE:SHAPE (empty: detected).",
        advanced=True,
        placeholder="datum",
        datalist="decoders",
    ),
    FormField("root", "Image list root", "text", _help("root"), advanced=True),
    FormField(
        "max_locations",
        "Locations per finding",
        "number",
        "How many places the report lists for each finding (default 20).",
        advanced=True,
    ),
    FormField(
        "min_size",
        "Smallest image side (px)",
        "number",
        "Images whose shorter side is below this are reported as tiny (default 32).",
        advanced=True,
    ),
    FormField(
        "force",
        "Scan again even if nothing changed",
        "checkbox",
        "Without it, the same request on unchanged files shows the earlier scan.",
        advanced=True,
    ),
)
DECODERS = ("datum", "image", "npy", "msgpack", "raw:float32:3,32,32")


def suggestions(request: Request, settings: Settings) -> list[str]:
    cached: views.Suggestions | None = getattr(request.app.state, "page_suggestions", None)
    if cached is None or cached.roots != settings.data_roots:
        cached = views.Suggestions(settings.data_roots)
        request.app.state.page_suggestions = cached
    return cached.get()


# -- pages --------------------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def jobs_page(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    status: Annotated[str | None, Query(max_length=20)] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> Response:
    """Every scan, newest first, with live progress; the form that starts a scan."""
    gate = login_gate(request, settings)
    if gate is not None:
        return gate
    chosen = JobStatus(status) if status in {s.value for s in JobStatus} else None
    try:
        jobs, total = store.list_jobs(chosen, offset, JOBS_PER_PAGE)
        counts = store.counts()
    except UNAVAILABLE as exc:
        return unavailable(request, settings, exc)
    roots = tuple(str(r) for r in settings.data_roots)
    workers = _workers_answer(request, any(j.status in ACTIVE for j in jobs))
    rows = [views.JobRow(ScanView.of(j, api_url(request, j.id)), f"/scans/{j.id}", roots, workers) for j in jobs]

    def at(new_offset: int) -> str:
        params = {"status": chosen.value} if chosen else {}
        if new_offset:
            params["offset"] = str(new_offset)
        return "/" + (f"?{urlencode(params)}" if params else "")

    return page(
        request,
        "jobs.html",
        {
            "nav": "jobs",
            "rows": rows,
            "total": total,
            "counts": {s.value: counts.get(s, 0) for s in JobStatus},
            "all_count": sum(counts.values()),
            "statuses": [s.value for s in JobStatus],
            "status": chosen.value if chosen else None,
            "offset": offset,
            "per_page": JOBS_PER_PAGE,
            "prev_url": at(max(0, offset - JOBS_PER_PAGE)) if offset else None,
            "next_url": at(offset + JOBS_PER_PAGE) if offset + len(rows) < total else None,
            "any_active": any(r.active for r in rows),
            "no_worker": None if workers else views.NO_WORKER_NOTICE,
            "fields": FORM_FIELDS,
            "roots": [str(r) for r in settings.data_roots],
            "suggestions": suggestions(request, settings),
            "codes": [(c.code, c.name) for c in checks.CHECKS],
            "decoders": DECODERS,
            "list_url": request.app.url_path_for("list_scans"),
        },
        settings=settings,
    )


def _workers_answer(request: Request, asked: bool) -> bool:
    """Whether a worker answers the service's ping (as ``/readyz`` asks: remembered 2 s, at most 1 s to wait),
    when ``asked`` (a scan under way is shown); true when not asked or when the ping itself fails (the page
    then says nothing it does not know)."""
    if not asked:
        return True
    try:
        return bool(request.app.state.queue.workers() > 0)
    except (OperationalError, *UNAVAILABLE):  # not knowing is no reason to fail the page
        log.warning("cannot ping the workers for the page", exc_info=True)
        return True


def api_url(request: Request, job_id: str) -> str:
    return str(request.app.url_path_for("get_scan", job_id=job_id))


@router.get("/scans/{job_id}", response_class=HTMLResponse)
def scan_page(job_id: str, request: Request, store: StoreDep, settings: SettingsDep) -> Response:
    """One scan: progress while it runs; its report (summary, findings, labels, statistics) when done."""
    gate = login_gate(request, settings)
    if gate is not None:
        return gate
    job_id = job_id.lower()  # (an id copied in upper case is the same id)
    if not JOB_ID.match(job_id):
        return error_page(request, 404, "No such scan", "A scan id is 32 hexadecimal digits.")
    try:
        job = store.get_job(job_id)
        report_text = store.get_report(job_id) if job is not None and job.status is JobStatus.SUCCEEDED else None
    except UNAVAILABLE as exc:
        return unavailable(request, settings, exc)
    if job is None:
        return error_page(
            request, 404, "No such scan", f"There is no scan {job_id}: it never existed or is past its retention."
        )
    view = ScanView.of(job, api_url(request, job_id))
    workers = _workers_answer(request, job.status in ACTIVE)
    report = None
    if report_text is not None:
        try:
            report = Report.model_validate_json(report_text)
        except ValidationError:
            log.exception("stored report of %s does not validate", job_id, extra={"job_id": job_id})
    pages = _location_pages(request)

    def page_url(code: str, number: int) -> str:
        params = dict(request.query_params)
        params[f"p_{code}"] = str(number)
        return f"{request.url.path}?{urlencode(params)}#finding-{code}"

    report_url = request.app.url_path_for("get_report", job_id=job_id)
    return page(
        request,
        "scan.html",
        {
            "nav": "jobs",
            "job": view,
            "row": views.JobRow(view, request.url.path, workers=workers),
            "no_worker": None if workers else views.NO_WORKER_NOTICE,
            "report": report,
            "active": not job.status.ended,
            "headers": views.LOCATION_HEADERS,
            "expired": job.status is JobStatus.SUCCEEDED and report is None,
            "groups": views.group_findings(report, lambda code: pages.get(code, 1), page_url) if report else [],
            "label_views": views.label_views(report) if report else [],
            "stats": views.stat_rows(report) if report else [],
            "notes": notes(report) if report else [],
            "about": views.about(report) if report else [],
            "options": views.options_text(job.options),
            "downloads": [
                ("JSON", f"{report_url}?format=json", f"dscan-{job_id[:8]}.json"),
                ("JUnit XML", f"{report_url}?format=junit", f"dscan-{job_id[:8]}.xml"),
                ("Markdown", f"{report_url}?format=markdown", f"dscan-{job_id[:8]}.md"),
                ("Text", f"{report_url}?format=text", f"dscan-{job_id[:8]}.txt"),
            ],
            "api": view.url,
        },
        settings=settings,
    )


def _location_pages(request: Request) -> dict[str, int]:
    out = {}
    for key, value in request.query_params.items():
        match = PAGE_PARAM.match(key)
        if match and value.isdigit() and len(value) < 8:
            out[match.group(1)] = int(value)
    return out


@router.get("/checks", response_class=HTMLResponse)
def checks_page(request: Request, settings: SettingsDep) -> Response:
    """The catalogue: every check's code, name, severity, what it finds, why it matters and the fix."""
    gate = login_gate(request, settings)
    if gate is not None:
        return gate
    return page(request, "checks.html", {"nav": "checks", "checks": checks.catalogue()}, settings=settings)


# -- signing in ---------------------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, settings: SettingsDep, next: str | None = None) -> Response:
    target = safe_next(next)
    if not settings.api_tokens or signed_in(request, settings):
        return RedirectResponse(target, status_code=303)
    return page(request, "login.html", {"next": target, "error": None}, settings=settings)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, settings: SettingsDep) -> Response:
    """Check the token from the form and keep it in the session cookie."""
    if not same_origin(request):
        return error_page(request, 403, "Sign-in refused", "The sign-in form must be sent from this site.")
    form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=10)
    token = (form.get("token") or [""])[0].strip()
    target = safe_next((form.get("next") or ["/"])[0])
    if not settings.api_tokens:
        return RedirectResponse(target, status_code=303)
    if not token_ok(settings, token):
        message = "Enter an API token." if not token else "That token is not valid. Check it and try again."
        return page(request, "login.html", {"next": target, "error": message}, 401, settings=settings)
    response = RedirectResponse(target, status_code=303)
    set_session(response, request, token)
    return response


@router.post("/logout")
def logout(request: Request, settings: SettingsDep) -> Response:
    if not same_origin(request):
        return error_page(request, 403, "Sign-out refused", "The sign-out form must be sent from this site.")
    response = RedirectResponse("/login" if settings.api_tokens else "/", status_code=303)
    clear_session(response, request)
    return response


# -- the page's own files -----------------------------------------------------------------------------


@router.get("/static/{name}")
def static(name: str, v: str | None = None) -> Response:
    if name not in STATIC_TYPES:
        return Response("not found", status_code=404, media_type="text/plain")
    cache = "public, max-age=31536000, immutable" if v == ASSET_VERSIONS.get(name) else "no-cache"
    return FileResponse(
        STATIC / name,
        media_type=STATIC_TYPES[name],
        headers={"Cache-Control": cache, "X-Content-Type-Options": "nosniff"},
    )
