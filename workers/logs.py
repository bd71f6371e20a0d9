"""Structured logs for the API and the workers: one JSON object per line, carrying the job id.

The job id comes from the record (``logger.info(..., extra={"job_id": ...})``) or from the context
(:func:`job_context`), so every line a task logs while it runs names its job. Shared by ``api/`` and
``workers/`` (standard library only).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

job_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("dscan_job_id", default=None)

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", "job_id", ...extra fields, "exc"}`` on one line."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        job_id = getattr(record, "job_id", None) or job_id_var.get()
        if job_id:
            out["job_id"] = job_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in out and not key.startswith("_") and key != "color_message":
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(service: str, level: str = "INFO") -> None:
    """Send every log record of the process to stderr as JSON lines (replaces existing handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "kombu"):
        lg = logging.getLogger(name)
        lg.handlers = []
        lg.propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # the API logs each request itself, with the job id
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its INFO line holds a callback URL's credentials
    # Pillow logs what it refuses in a file at level ERROR before it raises ("More samples per pixel than can be
    # decoded"): a finding of the scan, not an error of the service, which alerting on ERROR lines would page for.
    logging.getLogger("PIL").setLevel(logging.CRITICAL)


def uvicorn_log_config(service: str, level: str = "INFO") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn's ``log_config`` that writes JSON lines."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter", "service": service}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
        },
    }


@contextlib.contextmanager
def job_context(job_id: str | None) -> Iterator[None]:
    """Tag every log line in the block with ``job_id``."""
    token = job_id_var.set(job_id)
    try:
        yield
    finally:
        job_id_var.reset(token)
