"""A process pool for shards that survives its workers dying.

Decoders and LMDB readers can kill their process (segfault, abort, SIGBUS) on damaged data. A dead worker
is replaced; its shard is tried once more, then split into smaller shards, down to the part that kills the
reader, which becomes a finding. The other shards are never affected.
"""

from __future__ import annotations

import builtins
import contextlib
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any

from .config import ScanConfig
from .engine import crash_partial, scan_shard, split_shard
from .errors import ScanCancelled
from .forked import STALL_S, crashes_expected, stall_reason
from .partial import Partial
from .sources import source_class
from .sources.base import Shard

MAX_ATTEMPTS = 2
AHEAD = 1
"""Shards sent to a worker beyond the one it reads, while the queue holds more than one per worker: it starts
the next as soon as it sends a result, without waiting for the parent's answer (a round trip of a millisecond
or two per shard, some 40 ms of a 2,300-image scan with one worker). The last shards are handed to whichever
worker is free first, so no worker idles at the end while another still has two."""
AHEAD_BYTES = 8 << 10
"""Only shards this small (pickled) are sent ahead: a worker reads its pipe between shards only, so a shard
sent ahead must fit the socket's buffer (8 KB on macOS, 208 KB on Linux by default); otherwise the parent
would wait for a whole shard to be read, and a worker sending a large result meanwhile would wait for it.
Where the socket tells its send buffer (``ahead_bytes``), a quarter of it, up to ``AHEAD_BYTES_MAX``: the
last shards of an image folder carry the head start's verdicts (10-12 KB for a hundred files)."""
AHEAD_BYTES_MAX = 256 << 10
CANCEL_POLL_S = 0.5
"""How often a cancellable run asks whether it was cancelled while its workers read."""

ProgressFn = Callable[[int, int], None]


PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Linux: ask the kernel to kill this worker when its parent dies (killed alone, the parent leaves its
    workers waiting forever: with fork, each holds the parent's end of the pipes too, so no EOF comes)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def ahead_bytes(conn: Connection) -> int:
    """The largest shard (pickled) to send ahead on ``conn``: see ``AHEAD_BYTES``."""
    try:
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            buffer = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    except OSError:  # (no socket: a pipe)
        return AHEAD_BYTES
    return max(AHEAD_BYTES, min(AHEAD_BYTES_MAX, buffer // 4))


def _worker_main(conn: Connection, kind: str, path: str, config: ScanConfig, parent: int = 0) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    crashes_expected()  # a reader killed by a decoder is a finding, replaced by a new worker
    # Decoder libraries print to standard output (hdf5plugin's LZ4 filter: "cannot malloc" on a damaged
    # chunk); a worker's standard output is the parent's, which may be carrying a JSON report: send it to
    # standard error.
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    if parent:
        _die_with_parent(parent)
    with contextlib.suppress(Exception):  # (a decoder that cannot be imported is reported by the scan)
        source_class(kind).warm_up()
    while True:
        try:
            shard = conn.recv()
        except EOFError:
            return
        if shard is None:
            return

        def report(items: int, nbytes: int, shard_id: int = shard.id) -> None:
            conn.send(("progress", shard_id, items, nbytes))

        try:
            partial = scan_shard(kind, path, shard, config, progress=report)
            conn.send(("done", shard.id, partial))
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            conn.send(("error", shard.id, detail))


def exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the reader process was killed by {name}"
    return f"the reader process exited with status {exitcode}"


@dataclass
class _Task:
    shard: Shard
    attempts: int = 0
    items: int = 0
    bytes: int = 0
    pickled: builtins.bytes = b""  # (``bytes`` is the field above, here)

    def payload(self) -> builtins.bytes:
        """The shard as sent to a worker (pickled once)."""
        if not self.pickled:
            self.pickled = bytes(ForkingPickler.dumps(self.shard))
        return self.pickled


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    tasks: deque[_Task] = field(default_factory=deque)
    """The shards sent to it, in order: the first is the one it reads."""
    heard: float = 0.0
    """When the worker was last given a shard while idle or heard from (``time.monotonic``)."""

    @property
    def task(self) -> _Task | None:
        """The shard it reads (None: idle)."""
        return self.tasks[0] if self.tasks else None


class ShardPool:
    """Runs shards of one source in ``workers`` processes; ``run`` yields each shard's partial."""

    def __init__(self, kind: str, path: str, config: ScanConfig, workers: int, stall_s: float = STALL_S) -> None:
        self.kind, self.path, self.config = kind, path, config
        self.size = max(1, workers)
        self.stall_s = stall_s
        # fork is fastest (the parent has imported everything already) but is only safe without threads;
        # otherwise workers come from a clean fork server.
        if sys.platform.startswith("linux") and threading.active_count() == 1:
            self.ctx: Any = mp.get_context("fork")
        else:
            self.ctx = mp.get_context("forkserver")
            self.ctx.set_forkserver_preload(["scanner_service.pool"])
        self.workers: list[_Worker] = []
        self.ahead_bytes = AHEAD_BYTES

    def start(self, count: int | None = None) -> None:
        """Start the worker processes now (before any thread starts, so they can be forked)."""
        want = self.size if count is None else max(1, min(self.size, count))
        while len(self.workers) < want:
            self.workers.append(self._spawn())
        self.ahead_bytes = ahead_bytes(self.workers[0].conn)

    def _parent(self) -> int:
        """This process's id for forked workers to die with it; 0 for the fork server's (they see EOF)."""
        return os.getpid() if self.ctx.get_start_method() == "fork" else 0

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(
            target=_worker_main, args=(child, self.kind, self.path, self.config, self._parent()), daemon=True
        )
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def run(
        self, shards: list[Shard], progress: ProgressFn | None = None, cancelled: Callable[[], bool] | None = None
    ) -> Iterator[Partial]:
        """Yield each shard's partial as it comes. ``cancelled()`` is asked between results and at least every
        half second; when it says so, the workers are killed and ScanCancelled raised."""
        queue: deque[_Task] = deque(_Task(s) for s in shards)
        self.start(len(shards))
        stopped = False
        try:
            while queue or any(w.tasks for w in self.workers):
                if cancelled is not None and cancelled():
                    stopped = True
                    raise ScanCancelled("the scan was cancelled")
                self._feed(queue)
                busy = [w for w in self.workers if w.tasks]
                timeout = min(w.heard for w in busy) + self.stall_s - time.monotonic()
                ready = wait(
                    [w.conn for w in busy] + [w.process.sentinel for w in busy],
                    timeout=max(0.0, timeout if cancelled is None else min(timeout, CANCEL_POLL_S)),
                )
                for w in busy:
                    if not w.tasks:
                        continue
                    if w.conn in ready or w.conn.poll():
                        yield from self._receive(w, queue, progress)
                    elif w.process.sentinel in ready:
                        yield from self._crashed(w, queue, progress)
                    elif time.monotonic() - w.heard >= self.stall_s:
                        yield from self._hung(w, queue, progress)
        finally:
            self.close(kill=stopped)

    def _feed(self, queue: deque[_Task]) -> None:
        """Give every idle worker a shard, then, while enough remain, each one more to read next."""
        for w in self.workers:
            if not w.tasks and queue:
                self._send(w, queue.popleft())
        for w in self.workers:
            if 0 < len(w.tasks) <= AHEAD and len(queue) > len(self.workers):
                if len(queue[0].payload()) > self.ahead_bytes:
                    return
                self._send(w, queue.popleft())

    @staticmethod
    def _send(w: _Worker, task: _Task) -> None:
        if not w.tasks:
            w.heard = time.monotonic()
        w.tasks.append(task)
        with contextlib.suppress(OSError):  # a worker that just died: its shards go back when it is replaced
            w.conn.send_bytes(task.payload())

    def _receive(self, w: _Worker, queue: deque[_Task], progress: ProgressFn | None) -> Iterator[Partial]:
        task = w.task
        assert task is not None
        while w.conn.poll():
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):
                yield from self._crashed(w, queue, progress)
                return
            w.heard = time.monotonic()
            if msg[0] == "progress":
                task.items += msg[2]
                task.bytes += msg[3]
                if progress:
                    progress(msg[2], msg[3])
            elif msg[0] == "done":
                w.tasks.popleft()
                self._feed(queue)  # before the caller merges this result: the worker does not wait for it
                yield msg[2]
                return
            else:
                w.tasks.popleft()
                yield from self._give_up_or_split(task, f"the reader raised {msg[2]}", queue, progress)
                return

    def _hung(self, w: _Worker, queue: deque[_Task], progress: ProgressFn | None) -> Iterator[Partial]:
        """A worker that stopped making progress: killed, and its shard split at once (a hang is no accident
        that another try may miss), down to the part that hangs, which becomes a finding."""
        task = self._replace(w, queue)
        yield from self._give_up_or_split(task, stall_reason(self.stall_s), queue, progress)

    def _replace(self, w: _Worker, queue: deque[_Task]) -> _Task:
        """End the worker (dead or hung), start another in its place; the shard it read. The shards it had
        not started go back to the front of the queue, untried."""
        task = w.tasks.popleft()
        queue.extendleft(reversed(w.tasks))
        if w.process.is_alive():
            w.process.kill()
        w.process.join(timeout=5)
        w.conn.close()
        fresh = self._spawn()
        w.process, w.conn, w.tasks = fresh.process, fresh.conn, deque()
        return task

    def _crashed(self, w: _Worker, queue: deque[_Task], progress: ProgressFn | None) -> Iterator[Partial]:
        w.process.join(timeout=5)
        reason = exit_reason(w.process.exitcode)
        task = self._replace(w, queue)
        task.attempts += 1
        if task.attempts < MAX_ATTEMPTS:
            if progress:
                progress(-task.items, -task.bytes)
            task.items = task.bytes = 0
            queue.appendleft(task)
            return
        yield from self._give_up_or_split(task, reason, queue, progress)

    def _give_up_or_split(
        self, task: _Task, reason: str, queue: deque[_Task], progress: ProgressFn | None
    ) -> Iterator[Partial]:
        if progress:
            progress(-task.items, -task.bytes)
        pieces = split_shard(self.kind, self.path, task.shard, self.config)
        if pieces:
            queue.extendleft(reversed([_Task(p) for p in pieces]))
            return
        partial = crash_partial(self.kind, self.path, task.shard, self.config, reason)
        if progress:
            progress(task.shard.items, task.shard.bytes)
        yield partial

    def close(self, kill: bool = False) -> None:
        """End the workers: asked to stop after their shard, or killed at once (``kill``)."""
        for w in self.workers:
            try:
                if kill:
                    w.process.kill()
                elif w.process.is_alive():
                    w.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for w in self.workers:
            w.process.join(timeout=2)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=2)
            w.conn.close()
        self.workers = []
