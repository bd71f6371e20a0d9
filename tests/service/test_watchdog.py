"""The watchdog's decisions against real Redis and kombu's real Redis transport: a message held by a node that
stopped beating goes back to its queue, once; a live node's (however slow) and an unknown holder's stay."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from kombu import Connection

from workers.settings import Settings
from workers.store import Store
from workers.watchdog import KombuBroker, Watchdog

from .conftest import delete_prefix

pytestmark = [pytest.mark.service]

TTL = 3


@dataclass
class Clock:
    """The watchdogs' monotonic clock, moved by hand (their grace after connecting); Redis's own TTLs run in
    real time."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Broker:
    settings: Settings
    app: Celery
    store: Store
    connections: list[Connection]
    brokers: list[KombuBroker]

    def send(self) -> str:
        """Queue a shard task as the plan task does; its task id."""
        return str(self.app.send_task("dscan.shard", args=["0" * 32, {"id": 0}]).id)

    def take(self) -> str:
        """Take the next message as a worker node does (unacknowledged) and never give it back, as a node that
        vanished; its delivery tag."""
        connection = self.app.connection_for_write()
        self.connections.append(connection)
        channel: Any = connection.default_channel  # the virtual transport's channel
        channel.do_restore = False  # a node SIGKILLed restores nothing when it goes
        message = self.app.amqp.queues[self.settings.queue](channel).get(no_ack=False)
        assert message is not None
        return str(message.delivery_tag)

    def queued(self) -> list[dict[str, object]]:
        """The headers of the messages in the queue (taking them)."""
        out = []
        with self.app.connection_for_write() as connection:
            queue = self.app.amqp.queues[self.settings.queue](connection.default_channel)
            while (message := queue.get(no_ack=True)) is not None:
                out.append({**message.headers, "redelivered": message.delivery_info.get("redelivered")})
        return out

    def kombu(self) -> KombuBroker:
        self.brokers.append(KombuBroker(self.app))
        return self.brokers[-1]

    def unacked(self) -> list[str]:
        return self.kombu().unacked()

    def watchdog(self, node: str, clock: Clock) -> Watchdog:
        return Watchdog(self.store, self.kombu(), node, clock)


@pytest.fixture
def broker(redis_url: str, tmp_path: Path) -> Iterator[Broker]:
    prefix = f"dscantest-{uuid.uuid4().hex[:12]}"
    settings = Settings(redis_url=redis_url, data_roots=[tmp_path], key_prefix=prefix, queue=prefix, node_ttl_s=TTL)
    app = Celery("dscan-test", set_as_current=False)
    app.conf.update(settings.celery_conf())
    store = Store(settings)
    out = Broker(settings, app, store, [], [])
    try:
        yield out
    finally:
        for kombu in out.brokers:
            kombu.close()
        for connection in out.connections:
            connection.release()
        app.close()
        store.close()
        delete_prefix(redis_url, prefix)


def held_by_a_lost_node(broker: Broker) -> tuple[str, str]:
    """A shard task taken by a node that then vanished: its task id and delivery tag."""
    task_id = broker.send()
    tag = broker.take()
    broker.store.hold(tag, "lost-node")  # it was recorded as the holder; its liveness key is gone (never beat)
    return task_id, tag


def test_a_lost_nodes_message_goes_back_to_its_queue_once(broker: Broker) -> None:
    task_id, tag = held_by_a_lost_node(broker)
    clock = Clock()
    dogs = [broker.watchdog(f"node-{i}", clock) for i in range(3)]
    assert [dog.cycle() for dog in dogs] == [[], [], []]  # they just started: no judging yet
    assert broker.unacked() == [tag]
    clock.now += TTL
    assert [dog.cycle() for dog in dogs] == [[tag], [], []]  # one of them delivers it again
    assert broker.unacked() == []
    assert broker.store.redis.get(broker.store.key("held", tag)) is None  # no node holds it until one takes it
    (again,) = broker.queued()  # once: the original message, same task id (the chord counts it)
    assert again["id"] == task_id and again["task"] == "dscan.shard" and again["redelivered"] is True
    assert [dog.cycle() for dog in dogs] == [[], [], []]


def test_a_message_delivered_again_belongs_to_the_node_that_takes_it(broker: Broker) -> None:
    _, tag = held_by_a_lost_node(broker)
    clock = Clock()
    taker, other = broker.watchdog("taker", clock), broker.watchdog("other", clock)
    taker.cycle(), other.cycle()
    clock.now += TTL
    assert other.cycle() == [tag]
    assert broker.take() == tag  # the same message, received by a live node, which records itself
    broker.store.hold(tag, "taker")
    for _ in range(3):
        clock.now += TTL
        assert (taker.cycle(), other.cycle()) == ([], [])
    assert broker.unacked() == [tag]


@pytest.mark.slow
def test_a_slow_live_node_keeps_its_message_until_it_stops_beating(broker: Broker) -> None:
    broker.send()
    tag = broker.take()
    clock = Clock()
    holder, other = broker.watchdog("busy-node", clock), broker.watchdog("other-node", clock)
    holder.cycle()
    broker.store.hold(tag, "busy-node")
    other.cycle()
    clock.now += TTL
    deadline = time.monotonic() + 2 * TTL  # beyond the liveness TTL: only the beats keep the holder alive
    while time.monotonic() < deadline:
        holder.cycle()
        assert other.cycle() == []
        time.sleep(TTL / 6)
    assert broker.unacked() == [tag]
    started = time.monotonic()  # the holder vanishes: no more beats
    while not (restored := other.cycle()):
        assert time.monotonic() - started < TTL + 2, "the lost holder's message was not delivered again"
        time.sleep(TTL / 6)
    assert restored == [tag] and time.monotonic() - started >= TTL - 1
    assert len(broker.queued()) == 1


def test_a_message_without_a_known_holder_is_left_to_the_visibility_timeout(broker: Broker) -> None:
    broker.send()
    tag = broker.take()  # its node died before recording it held the message
    clock = Clock()
    dog = broker.watchdog("node", clock)
    dog.cycle()
    clock.now += TTL
    assert dog.cycle() == []
    assert broker.unacked() == [tag]


def test_a_watchdog_judges_no_node_for_a_ttl_after_redis_came_back(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis away longer than the TTL: every node's liveness key lapsed, not the nodes. A watchdog must give
    them a whole TTL to beat again before it takes any for lost."""
    _, tag = held_by_a_lost_node(broker)
    clock = Clock()
    dog = broker.watchdog("node", clock)
    dog.cycle()
    clock.now += TTL

    def unreachable(node: str) -> None:
        raise redis.exceptions.ConnectionError("Redis is away")

    with monkeypatch.context() as patch:
        patch.setattr(broker.store, "beat", unreachable)
        assert dog.cycle() == []
    clock.now += 1
    assert dog.cycle() == []  # back: the holder may be about to beat again
    clock.now += TTL - 1.5
    assert dog.cycle() == []
    assert broker.unacked() == [tag]
    clock.now += 1.5
    assert dog.cycle() == [tag]  # a whole TTL of beats, and the holder's key is still missing: lost


def test_lost_nodes_are_found_within_a_minute_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "DSCAN_NODE_TTL_S",
        "DSCAN_VISIBILITY_TIMEOUT_S",
        "DSCAN_TASK_SOFT_TIME_LIMIT_S",
        "DSCAN_TASK_TIME_LIMIT_S",
    ):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(redis_url="redis://127.0.0.1:6379/9", data_roots=[tmp_path])
    assert settings.node_ttl_s == 30 and settings.node_beat_s == 5
    assert settings.node_ttl_s + settings.node_beat_s < 60 < settings.redelivery_s
