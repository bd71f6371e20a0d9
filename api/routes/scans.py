"""``/api/v1/scans``: submit a scan, follow it, read its report, list and cancel scans."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Annotated, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import AfterValidator

from scanner_service import checks
from scanner_service.errors import DscanError
from scanner_service.render import MEDIA_TYPES, render
from scanner_service.report import Report, applicable_checks, no_check_applies
from scanner_service.sources import detect_kind
from scanner_service.sources.walk import fence
from workers.store import JobRecord, JobStatus, TaskName

from ..deps import Authenticated, QueueDep, SettingsDep, StoreDep
from ..paths import request_digest, resolve_inside
from ..schemas import ErrorBody, ScanCreated, ScanList, ScanRequest, ScanView

log = logging.getLogger("dscan.api")

router = APIRouter(
    prefix="/api/v1/scans",
    tags=["scans"],
    dependencies=[Authenticated],
    responses={
        401: {"model": ErrorBody, "description": "API tokens are configured and none (or a wrong one) was sent"},
        503: {"model": ErrorBody, "description": "Redis is unreachable"},
    },
)

JobId = Annotated[
    str, Path(pattern=r"^[0-9a-fA-F]{32}$", description="job id (32 hex digits)"), AfterValidator(str.lower)
]
"""An id copied in upper case (a log viewer, a spreadsheet) is the same id, as on the status page."""
Format = Literal["json", "junit", "markdown", "text"]


def job_url(request: Request, job_id: str) -> str:
    return f"{request.base_url}api/v1/scans/{job_id}"


def load(store: StoreDep, job_id: str) -> JobRecord:
    job = store.get_job(job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no scan {job_id} (unknown, or past its retention)")
    return job


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScanCreated,
    responses={
        200: {"model": ScanCreated, "description": "the same request on unchanged data already has a job"},
        403: {"model": ErrorBody, "description": "the path is outside the data roots"},
        413: {"description": "request body too large"},
        422: {"model": ErrorBody, "description": "invalid options, unknown path or callback host not allowed"},
    },
)
def create_scan(
    body: ScanRequest, request: Request, store: StoreDep, queue: QueueDep, settings: SettingsDep
) -> JSONResponse:
    """Queue a scan of a dataset under a data root. The same request on an unchanged dataset (options, files'
    sizes and modification times, and those of the files HDF5 data lives in: virtual dataset sources,
    external raw data, external link targets) returns the existing job unless ``force`` is set."""
    try:
        config = body.scan_config()
        checks.enabled_codes(config.select, config.ignore)
    except DscanError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    target = resolve_inside(body.path, settings.data_roots)
    # Every file the workers read must resolve into the data roots too: a link inside a dataset folder that
    # points elsewhere is reported, never followed (nor by the format detection here, so that the answer says
    # nothing about what lies behind it).
    roots = tuple(str(root) for root in settings.data_roots)
    try:
        kind = detect_kind(target, fence(roots))  # a file or folder of no format dscan reads: said now
    except DscanError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    if not applicable_checks(kind, config.select, config.ignore):  # its pass would say nothing: as `dscan scan`
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, no_check_applies(kind))
    if config.root is not None:
        # taken inside the first data root when relative, here and by the workers alike (never their folder)
        root = resolve_inside(config.root, settings.data_roots, what="root")
        config = config.model_copy(update={"root": str(root)})
    callback = str(body.callback_url) if body.callback_url is not None else None
    if callback is not None and not settings.callback_allowed(callback):
        host = urlsplit(callback).hostname or ""
        allowed = ", ".join(settings.callback_hosts) or "none: set DSCAN_CALLBACK_HOSTS"
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"callback_url host {host!r} is not allowed (allowed hosts: {allowed})",
        )
    config = config.model_copy(update={"confine": roots})
    options = config.model_dump(mode="json", exclude_defaults=True)
    try:
        digest = request_digest(target, config, options, callback, kind)
    except OSError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"cannot read {body.path!r}: {exc}") from None
    if not body.force:
        existing = store.find_duplicate(digest)
        if existing is not None:
            request.state.job_id = existing.id
            return _created(request, existing, deduplicated=True)
    job_id = uuid.uuid4().hex
    job = store.create_job(
        job_id,
        path=body.path,
        target=str(target),
        options=options,
        callback_url=callback,
        digest=digest,
        force=body.force,
    )
    request.state.job_id = job.id
    if job.id != job_id:  # an identical request made the job a moment ago
        return _created(request, job, deduplicated=True)
    try:
        queue.send(TaskName.PLAN, job_id)
    except Exception:
        store.transition(
            job_id, JobStatus.FAILED, [JobStatus.QUEUED], finished=time.time(), error="could not be queued"
        )
        raise
    log.info("queued a scan of %s", target, extra={"job_id": job_id})
    return _created(request, job, deduplicated=False)


def _created(request: Request, job: JobRecord, deduplicated: bool) -> JSONResponse:
    url = job_url(request, job.id)
    body = ScanCreated(id=job.id, status=job.status, url=url, deduplicated=deduplicated)
    return JSONResponse(
        body.model_dump(mode="json"),
        status_code=status.HTTP_200_OK if deduplicated else status.HTTP_202_ACCEPTED,
        headers={"Location": url},
    )


@router.get("", response_model=ScanList)
def list_scans(
    request: Request,
    store: StoreDep,
    status_filter: Annotated[JobStatus | None, Query(alias="status", description="only jobs in this status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> ScanList:
    """Scans, newest first."""
    jobs, total = store.list_jobs(status_filter, offset, limit)
    following = None
    if offset + len(jobs) < total:
        following = str(request.url.include_query_params(offset=offset + limit, limit=limit))
    return ScanList(
        items=[ScanView.of(j, job_url(request, j.id)) for j in jobs],
        total=total,
        offset=offset,
        limit=limit,
        next=following,
    )


@router.get("/{job_id}", response_model=ScanView, responses={404: {"model": ErrorBody}})
async def get_scan(job_id: JobId, request: Request, store: StoreDep) -> Response:
    """A scan's status, progress (shards, items and bytes done of total), timings, and summary when done."""
    job = await store.aget_job(job_id)  # the hot path of pollers: asyncio Redis, no thread hop
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no scan {job_id} (unknown, or past its retention)")
    view = ScanView.of(job, job_url(request, job_id))
    return Response(view.model_dump_json(), media_type="application/json")


@router.get(
    "/{job_id}/report",
    response_class=Response,
    responses={
        200: {"content": {m: {} for m in MEDIA_TYPES.values()}, "description": "the report"},
        404: {"model": ErrorBody},
        409: {"model": ErrorBody, "description": "the scan has not succeeded (yet)"},
    },
)
def get_report(job_id: JobId, store: StoreDep, format: Format = "json") -> Response:
    """The report in the CLI's formats: ``json`` (the versioned report), ``junit``, ``markdown``, ``text``."""
    job = load(store, job_id)
    if job.status is not JobStatus.SUCCEEDED:
        detail = {
            JobStatus.QUEUED: "the scan is queued: no report yet",
            JobStatus.RUNNING: f"the scan is running ({job.progress.fraction:.0%} done): no report yet",
            JobStatus.FAILED: f"the scan failed: {job.error}",
            JobStatus.CANCELLED: "the scan was cancelled: no report",
        }[job.status]
        raise HTTPException(status.HTTP_409_CONFLICT, detail)
    text = store.get_report(job_id)
    if text is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"the report of scan {job_id} is past its retention")
    if format != "json":
        text = render(Report.model_validate_json(text), format)
    return Response(text, media_type=MEDIA_TYPES[format])


@router.delete(
    "/{job_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScanView,
    responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody, "description": "the scan has ended already"}},
)
def cancel_scan(job_id: JobId, request: Request, store: StoreDep, queue: QueueDep) -> ScanView:
    """Cancel a queued or running scan: its workers stop between blocks."""
    job = load(store, job_id)
    moved, previous = store.cancel(job_id)
    if not moved:
        raise HTTPException(status.HTTP_409_CONFLICT, f"the scan has ended already ({previous or job.status})")
    cancelled = load(store, job_id)
    store.record_end(JobStatus.CANCELLED, cancelled.duration_s, 0, 0)
    if cancelled.callback_url:
        queue.send(TaskName.CALLBACK, job_id)
    log.info("cancelled", extra={"job_id": job_id})
    return ScanView.of(cancelled, job_url(request, job_id))
