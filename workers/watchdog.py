"""Recovery from a lost worker node: its unacknowledged tasks are delivered again within about a minute.

Late acknowledgement brings back the task of a worker *process* that died at once (its node's main process
sees it go), but a whole *node* that vanishes (its main process killed with its pool: a container killed, a
machine lost) leaves its unacknowledged messages in Redis until the broker's visibility timeout, which must
outlast the longest task (over an hour). Meanwhile its job stands still.

So every worker node runs a watchdog thread in its main process:

- it renews the node's liveness key (``P:node:NODE``, expiring after ``DSCAN_NODE_TTL_S``) every
  ``node_ttl_s / 6`` seconds, from a thread of its own: a node busy with long shards stays alive;
- as the consumer receives a message, the node records that it holds it (``P:held:TAG``);
- every beat, it lists the broker's unacknowledged messages and, for those held by a node whose liveness key
  has expired, claims each once (``SET NX``: one watchdog of all wins) and puts it back at the head of its
  queue with kombu's own restore (the step the visibility timeout takes, one WATCH/MULTI transaction).

The message delivered again is the original one: same task id, same chord. Tasks are idempotent per job and
shard, and the chord counts each task id once, so the merge fires once and the report is an undisturbed run's.
This covers every task (plan, shard, merge, callback), queued on the lost node or running there. A message
no node is known to hold (its node died between the broker's hand-over and the record) is left to the
visibility timeout. A watchdog judges no other node until its own beats have succeeded for a whole
``node_ttl_s`` (after it starts, and again after Redis was unreachable): the others' beats may have lapsed
while Redis was away, not the nodes.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from celery import Celery
from kombu import Connection

from .settings import get_settings
from .store import UNAVAILABLE, Store

log = logging.getLogger("dscan.watchdog")


class Broker(Protocol):
    """The broker's unacknowledged messages, as the watchdog needs them."""

    def unacked(self) -> list[str]:
        """Delivery tags of the messages delivered and not acknowledged yet (by any node)."""

    def restore(self, tag: str) -> str | None:
        """Put the message back at the head of its queue; a description of it, None when it was gone (acknowledged
        or delivered again meanwhile)."""


class KombuBroker:
    """The Redis transport's unacknowledged messages, through a kombu connection of this thread's own (the
    consumer's connection belongs to the event loop and is not thread-safe). Key prefixes are the transport's."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._connection: Connection | None = None

    def _channel(self) -> Any:
        if self._connection is None:
            self._connection = self.app.connection_for_write()
        return self._connection.default_channel

    def unacked(self) -> list[str]:
        channel = self._channel()
        tags = channel.client.zrange(channel.unacked_index_key, 0, -1)
        return [tag.decode() if isinstance(tag, bytes) else str(tag) for tag in tags]

    def restore(self, tag: str) -> str | None:
        channel = self._channel()
        raw = channel.client.hget(channel.unacked_key, tag)
        if raw is None:
            return None
        channel.qos.restore_by_tag(tag)  # leftmost=False: the head of the queue, taken next
        return describe(raw)

    def close(self) -> None:
        """Drop the connection (after an error: the next call opens a new one)."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            try:
                connection.release()
            except Exception:  # a connection that failed may fail to close too
                log.debug("closing the broker connection failed", exc_info=True)


def describe(raw: bytes | str) -> str:
    """``name[id] args`` of an unacknowledged message as the Redis transport stores it (payload, exchange,
    routing key), for the log."""
    try:
        payload = json.loads(raw)[0]
        headers = payload.get("headers") or {}
        return f"{headers.get('task')}[{headers.get('id')}] {headers.get('argsrepr', '')}".strip()
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "a message"


class Watchdog:
    """One node's beat and its search for lost nodes' messages (no thread: :func:`start` runs it)."""

    def __init__(self, store: Store, broker: Broker, node: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.broker, self.node, self.clock = store, broker, node, clock
        self.since: float | None = None
        """Since when this node's beats have succeeded without a break (None: the last one failed)."""

    def cycle(self) -> list[str]:
        """Renew this node's liveness, then deliver again the messages of lost nodes. Returns their tags."""
        try:
            self.store.beat(self.node)
        except UNAVAILABLE:
            if self.since is not None:
                log.warning("Redis cannot be reached: worker nodes are not watched meanwhile")
            self.since = None
            return []
        now = self.clock()
        if self.since is None:
            self.since = now
        if now - self.since < self.store.settings.node_ttl_s:
            return []  # the other nodes' beats may have lapsed with Redis, not the nodes: judge none yet
        return self.recover()

    def recover(self) -> list[str]:
        """Deliver again, once, each unacknowledged message whose node stopped beating."""
        restored = []
        for tag, node in self.store.lost(self.broker.unacked()).items():
            if node == self.node or not self.store.claim_lost(tag, node):
                continue  # (this node beat a moment ago: it is not lost); another watchdog took it
            what = self.broker.restore(tag)
            if what is None:
                continue  # acknowledged or delivered again meanwhile
            self.store.release(tag, node)
            log.warning("worker node %s is lost: %s is delivered again", node, what, extra={"delivery_tag": tag})
            restored.append(tag)
        return restored


# -- in the worker node's main process ----------------------------------------------------------------


@functools.cache
def node_id() -> str:
    """This node's name in Redis: host, pid of the main process and a random part (a container restarted
    with the same host name and pid is another node: the tasks its predecessor held are not its own)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@functools.cache
def node_store() -> Store:
    """The main process's store (the tasks' is created in each pool process after the fork)."""
    return Store(get_settings())


_lock = threading.Lock()
_thread: list[threading.Thread] = []


def start(app: Celery) -> None:
    """Start this node's watchdog thread, once per process. The first beat is taken here, before the node
    can be recorded holding a message: a holder without a liveness key would be taken for lost."""
    with _lock:
        if _thread:
            return
        watchdog = Watchdog(node_store(), KombuBroker(app), node_id())
        watchdog.cycle()
        thread = threading.Thread(target=_run, args=(watchdog,), name="dscan-watchdog", daemon=True)
        thread.start()
        _thread.append(thread)
    log.info("watching worker nodes as %s, every %.1f s", watchdog.node, watchdog.store.settings.node_beat_s)


def _run(watchdog: Watchdog) -> None:
    """Beat until the process ends (a daemon thread: a node stopping takes it along, its key then expires)."""
    interval = watchdog.store.settings.node_beat_s
    while True:
        time.sleep(interval)
        try:
            watchdog.cycle()
        except Exception:  # the next beat tries again; an error here must not end the beats
            log.exception("watching worker nodes failed")
            if isinstance(watchdog.broker, KombuBroker):
                watchdog.broker.close()


def record(tag: str) -> None:
    """This node received the message ``tag`` (called by the consumer as it receives it)."""
    try:
        node_store().hold(tag, node_id())
    except UNAVAILABLE:  # then a loss of this node leaves the message to the visibility timeout
        log.warning("Redis cannot be reached: message %s is not recorded as held by this node", tag)
