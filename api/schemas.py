"""Request and response bodies of the scans API."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator

from scanner_service.config import MAX_BLOCK_BYTES, ScanConfig
from scanner_service.report import Summary
from workers.store import JobRecord, JobStatus, iso

REQUEST_ONLY = frozenset({"path", "force", "callback_url"})


def without_credentials(url: str | None) -> str | None:
    """A callback URL as shown to API clients: a user name and password in it (``https://user:pw@host/``)
    are the callback's, not theirs to read."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


class ScanRequest(ScanConfig):
    """A scan: the dataset path plus any option of ``dscan scan`` (same names, same validation)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={"examples": [{"path": "/data/train.h5", "num_classes": 10, "batch_size": 64}]},
    )

    path: str = Field(min_length=1, max_length=4096, description="dataset path, inside a data root")
    force: bool = Field(False, description="scan again even if the same request on unchanged data has a job")
    callback_url: AnyHttpUrl | None = Field(
        None, description="POSTed the summary when the job ends; its host must be in DSCAN_CALLBACK_HOSTS"
    )

    shard_bytes: int = Field(
        64 << 20, ge=64 << 10, description="uncompressed bytes per shard (at least 64 KiB: every shard is a task)"
    )
    block_bytes: int = Field(
        4 << 20, ge=4 << 10, le=MAX_BLOCK_BYTES, description="bytes per block read into memory (4 KiB to 1 GiB)"
    )

    @field_validator("confine")
    @classmethod
    def _service_confines(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if value:
            raise ValueError("the service confines every scan to its data roots (DSCAN_DATA_ROOTS); do not set it")
        return value

    def scan_config(self) -> ScanConfig:
        return ScanConfig(**self.model_dump(exclude=set(REQUEST_ONLY)))


class ScanCreated(BaseModel):
    id: str
    status: JobStatus
    url: str
    deduplicated: bool = Field(False, description="an existing job for the same request was returned")


class ProgressView(BaseModel):
    shards_done: int
    shards_total: int
    items_done: int
    items_total: int
    bytes_done: int
    bytes_total: int
    fraction: float = Field(description="share of the work done (bytes, else shards)")


class ScanView(BaseModel):
    id: str
    status: JobStatus
    path: str
    kind: str | None
    options: dict[str, Any]
    callback_url: str | None
    created: str
    started: str | None
    finished: str | None
    duration_s: float | None
    progress: ProgressView
    summary: Summary | None
    error: str | None
    url: str
    report_url: str | None

    @classmethod
    def of(cls, job: JobRecord, url: str) -> ScanView:
        done = job.status is JobStatus.SUCCEEDED
        fraction = job.progress.fraction
        return cls(
            id=job.id,
            status=job.status,
            path=job.path,
            kind=job.kind,
            options=job.options,
            callback_url=without_credentials(job.callback_url),
            created=iso(job.created) or "",
            started=iso(job.started),
            finished=iso(job.finished),
            duration_s=job.duration_s,
            progress=ProgressView(**job.progress.model_dump(), fraction=1.0 if done else round(fraction, 4)),
            summary=job.summary,
            error=job.error,
            url=url,
            report_url=f"{url}/report" if done else None,
        )


class ScanList(BaseModel):
    items: list[ScanView]
    total: int = Field(description="jobs matching the filter")
    offset: int
    limit: int
    next: str | None = Field(description="URL of the next page, if any")


class ErrorBody(BaseModel):
    detail: str
