"""The Celery application: ``celery -A workers.app worker``.

Configured from :class:`workers.settings.Settings` when Celery first needs its configuration (not at import
time): Redis as broker and result backend, JSON only, late acknowledgement with ``task_reject_on_worker_lost``
(a worker killed mid-shard loses nothing: the shard is delivered again), prefetch 1, time limits and a memory
ceiling per worker process. Every Redis key, the queues' included, starts with ``DSCAN_KEY_PREFIX``. Each
worker node runs a watchdog (:mod:`workers.watchdog`) that delivers again the tasks of a node that vanished.
"""

from __future__ import annotations

import os

# Shards are scanned one per worker process and call no BLAS routine: numpy's OpenBLAS threads (one per core,
# spinning after import) would only compete with the other worker processes. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from typing import Any

from celery import Celery, signals

from . import watchdog
from .logs import configure_logging
from .settings import SettingsError, get_settings

app = Celery("dscan", include=["workers.tasks"])


@app.on_configure.connect
def _configure(sender: Celery, **_: Any) -> None:
    try:
        settings = get_settings()
    except SettingsError as exc:  # one line to act on, not Celery's traceback
        raise SystemExit(f"dscan worker: {exc}") from None
    sender.conf.update(settings.celery_conf())


@signals.setup_logging.connect
def _logging(**_: Any) -> None:
    """Celery leaves logging alone when this signal has a receiver: JSON lines on stderr instead."""
    configure_logging("worker", get_settings().log_level)


@signals.worker_ready.connect
def _watch(**_: Any) -> None:
    """The node is up: start its watchdog (beats, and recovery of lost nodes' tasks), idle or not."""
    watchdog.start(app)


@signals.task_received.connect
def _received(request: Any, **_: Any) -> None:
    """The node took a message from the broker: record that it holds it, so that its loss is noticed. (The
    watchdog is started first if messages come before ``worker_ready``: the holder must be beating.)"""
    watchdog.start(app)
    watchdog.record(str(request.message.delivery_tag))
