"""The API's side of the task queue: sends tasks by their registered names and pings the workers.

The API never imports the worker tasks: it sends ``TaskName.PLAN`` (and ``TaskName.CALLBACK``) through a
producer-only Celery app configured like the workers' (``Settings.celery_conf``).
"""

from __future__ import annotations

import threading
import time

from celery import Celery

from workers.settings import Settings
from workers.store import TaskName


class TaskQueue:
    def __init__(self, settings: Settings) -> None:
        self.celery = Celery("dscan-api", set_as_current=False)
        self.celery.conf.update(settings.celery_conf())
        self._lock = threading.Lock()
        self._workers: tuple[float, int] = (0.0, 0)

    def send(self, task: TaskName, *args: str) -> None:
        self.celery.send_task(task.value, args=list(args))

    def workers(self, timeout: float = 1.0, cache_s: float = 2.0) -> int:
        """How many workers answered a ping (remembered for ``cache_s`` so probes stay cheap)."""
        with self._lock:
            at, count = self._workers
            if time.monotonic() - at < cache_s:
                return count
        replies = self.celery.control.ping(timeout=timeout, limit=1)
        count = len(replies or [])
        with self._lock:
            self._workers = (time.monotonic(), count)
        return count

    def close(self) -> None:
        self.celery.close()
