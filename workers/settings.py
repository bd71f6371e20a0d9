"""The service's settings: one pydantic-settings class read from ``DSCAN_*`` environment variables.

Shared by ``api/`` and ``workers/`` (this module imports no web or queue framework). Nothing is read at
import time: call :func:`get_settings` (cached), which the API injects as a dependency and the Celery app
reads when it is first configured. Required settings have no default and placeholders are refused.

==========================  =========================================================================
``DSCAN_REDIS_URL``         Redis for the queue, the job records and the reports (required)
``DSCAN_DATA_ROOTS``        folders datasets may be scanned under, ``:``- or ``,``-separated (required)
``DSCAN_API_TOKENS``        bearer tokens, comma-separated; empty: no authentication
``DSCAN_CALLBACK_HOSTS``    hosts a ``callback_url`` may name, comma-separated; empty: no callbacks
``DSCAN_RETENTION_S``       how long finished jobs and reports are kept [7 days]
``DSCAN_MAX_BODY_BYTES``    largest request body [65536]
``DSCAN_KEY_PREFIX``        prefix of every Redis key (queues included) [dscan]
==========================  =========================================================================
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_PORTS = {"http": 80, "https": 443}
PLACEHOLDERS = frozenset({"changeme", "change-me", "change_me", "secret", "token", "password", "xxx", "todo"})
MIN_TOKEN_LENGTH = 16


def _split(value: Any, separators: str) -> Any:
    """A list from an environment string: JSON list, or items separated by any of ``separators``."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        import json

        try:
            return json.loads(text)
        except ValueError:  # no JSON list: an IPv6 address in brackets, "[::1]:8080,hooks.example.com"
            pass
    for sep in separators[1:]:
        text = text.replace(sep, separators[0])
    return [part.strip() for part in text.split(separators[0]) if part.strip()]


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


class Settings(BaseSettings):
    """Everything the API and the workers are configured with."""

    # (a variable set but empty takes the default: docker-compose.yml passes every setting on as `${NAME:-}`)
    model_config = SettingsConfigDict(env_prefix="DSCAN_", extra="ignore", frozen=True, env_ignore_empty=True)

    redis_url: str = Field(description="Redis URL: broker, result backend, job records and reports")
    data_roots: Annotated[list[Path], NoDecode] = Field(description="folders whose datasets may be scanned")
    api_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    callback_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    retention_s: int = Field(7 * 24 * 3600, ge=60, description="seconds finished jobs and reports are kept")
    max_body_bytes: int = Field(64 << 10, ge=1024, description="largest accepted request body")
    key_prefix: str = Field("dscan", pattern=r"^[A-Za-z0-9_.:-]{1,64}$", description="prefix of every Redis key")
    queue: str = Field("dscan", pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Celery queue of the scan tasks")
    redis_timeout_s: float = Field(2.0, gt=0, le=60, description="socket timeouts towards Redis")
    task_soft_time_limit_s: int = Field(3600, ge=1, description="a shard or plan task is stopped after this")
    task_time_limit_s: int | None = Field(None, ge=1, description="hard limit [soft limit + 60]")
    visibility_timeout_s: int | None = Field(
        None, ge=1, description="an unacknowledged task of a dead worker node is redelivered after this"
    )
    restore_interval_s: int = Field(
        10, ge=1, le=3600, description="how often workers look for tasks of dead worker nodes to redeliver"
    )
    node_ttl_s: int = Field(
        30, ge=3, le=3600, description="a worker node not heard of for this long is lost: its tasks are delivered again"
    )
    worker_max_memory_kb: int = Field(2_000_000, ge=10_000, description="a worker process is replaced above this")
    max_deliveries: int = Field(2, ge=1, le=10, description="deliveries that kill their worker before a split")
    callback_timeout_s: float = Field(5.0, gt=0, le=60)
    log_level: str = Field("INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$")

    @field_validator("data_roots", mode="before")
    @classmethod
    def _roots(cls, value: Any) -> Any:
        return _split(value, ":,")

    @field_validator("api_tokens", "callback_hosts", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _split(value, ", ")

    @field_validator("data_roots")
    @classmethod
    def _roots_exist(cls, roots: list[Path]) -> list[Path]:
        if not roots:
            raise ValueError("at least one data root is needed")
        out = []
        for root in roots:
            if not root.is_absolute():
                raise ValueError(f"data root {root} must be an absolute path")
            if not root.is_dir():
                raise ValueError(f"data root {root} is not a folder")
            out.append(root.resolve())
        return out

    @field_validator("api_tokens")
    @classmethod
    def _no_placeholder_tokens(cls, tokens: list[SecretStr]) -> list[SecretStr]:
        for token in tokens:
            value = token.get_secret_value()
            if value.lower() in PLACEHOLDERS or len(value) < MIN_TOKEN_LENGTH:
                raise ValueError(f"API tokens must be at least {MIN_TOKEN_LENGTH} characters and not placeholders")
        return tokens

    @field_validator("callback_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        return [h.lower() for h in hosts]

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str) -> str:
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("DSCAN_REDIS_URL must be a redis://, rediss:// or unix:// URL")
        return url

    @model_validator(mode="after")
    def _limits(self) -> Settings:
        if self.task_time_limit_s is not None and self.task_time_limit_s <= self.task_soft_time_limit_s:
            raise ValueError("task_time_limit_s must exceed task_soft_time_limit_s")
        return self

    @property
    def hard_time_limit_s(self) -> int:
        return self.task_time_limit_s or self.task_soft_time_limit_s + 60

    @property
    def redelivery_s(self) -> int:
        """Visibility timeout: longer than any task may run, so a live task is never delivered twice."""
        return self.visibility_timeout_s or self.hard_time_limit_s + 300

    @property
    def node_beat_s(self) -> float:
        """How often a worker node renews its liveness and looks for the tasks of lost nodes: six times per
        ``node_ttl_s``, so a node is taken for lost only after missing several beats in a row, and a lost
        node's tasks are delivered again within 7/6 of ``node_ttl_s``."""
        return self.node_ttl_s / 6

    @property
    def redis_display(self) -> str:
        return redact_url(self.redis_url)

    def callback_allowed(self, url: str) -> bool:
        """Whether ``url``'s host is one of ``callback_hosts``, alone or with the URL's port (its scheme's
        default when it names none). One test for the API, which accepts a ``callback_url``, and the worker,
        which sends it: host in lower case, an IPv6 address with or without brackets."""
        parts = urlsplit(url)
        try:
            host, port = parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)
        except ValueError:  # a port out of range
            return False
        if not host:
            return False
        names = {host, f"[{host}]"} if ":" in host else {host}
        return any(name in self.callback_hosts or f"{name}:{port}" in self.callback_hosts for name in names)

    def token_values(self) -> list[str]:
        return [t.get_secret_value() for t in self.api_tokens]

    def celery_conf(self) -> dict[str, Any]:
        """Celery configuration shared by the workers and the API's task producer."""
        prefix = f"{self.key_prefix}:q:"
        timeouts = {
            "socket_timeout": self.redis_timeout_s,
            "socket_connect_timeout": self.redis_timeout_s,
        }
        return {
            "broker_url": self.redis_url,
            "result_backend": self.redis_url,
            "broker_transport_options": {
                "global_keyprefix": prefix,
                "visibility_timeout": self.redelivery_s,
                "unacked_restore_interval": self.restore_interval_s,
                "unacked_restore_throttle": 1,
                **timeouts,
            },
            "result_backend_transport_options": {"global_keyprefix": prefix},
            # a task's result (a chord counts its shards' results there) is stored after Redis comes back
            # from a short outage, not lost with the job
            "result_backend_always_retry": True,
            "result_backend_max_retries": 40,
            "result_backend_base_sleep_between_retries_ms": 250,
            "result_backend_max_sleep_between_retries_ms": 5000,
            "redis_socket_timeout": self.redis_timeout_s,
            "redis_socket_connect_timeout": self.redis_timeout_s,
            "broker_connection_timeout": self.redis_timeout_s,
            "broker_connection_retry_on_startup": True,
            "task_default_queue": self.queue,
            "control_exchange": f"{self.key_prefix}-control",
            "task_serializer": "json",
            "result_serializer": "json",
            "accept_content": ["json"],
            "result_accept_content": ["json"],
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            "worker_prefetch_multiplier": 1,
            "task_soft_time_limit": self.task_soft_time_limit_s,
            "task_time_limit": self.hard_time_limit_s,
            "worker_max_memory_per_child": self.worker_max_memory_kb,
            # how long Celery keeps task results, the count of a chord's shards among them: a scan whose last
            # shard ends after its chord's count expired is never merged, so this bounds how long a scan may
            # run (queueing included), not how long reports are kept (``retention_s``)
            "result_expires": max(self.retention_s, SCAN_RESULTS_KEPT_S),
            "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.5},
            "worker_hijack_root_logger": False,
            "worker_redirect_stdouts": False,
            "worker_send_task_events": False,
            "worker_enable_remote_control": True,
            "enable_utc": True,
        }


SCAN_RESULTS_KEPT_S = 30 * 24 * 3600
"""The longest a scan may take, from its plan to its last shard (Celery's ``result_expires``, when the
retention is shorter)."""


class SettingsError(ValueError):
    """Settings from the environment that do not validate: the message names each ``DSCAN_*`` variable and what
    is wrong with it (a required one not set, a placeholder token, a data root that is no folder)."""


def settings_problems(exc: ValidationError) -> str:
    """One line per problem of a failed validation, by the environment variable a person sets."""
    lines = []
    for error in exc.errors():
        name = f"DSCAN_{str(error['loc'][0]).upper()}" if error["loc"] else "settings"
        problem = "not set, and required" if error["type"] == "missing" else error["msg"].removeprefix("Value error, ")
        lines.append(f"{name}: {problem}")
    return "; ".join(lines)


@functools.cache
def get_settings() -> Settings:
    """The settings from the environment, read once per process (clear with ``get_settings.cache_clear()``);
    SettingsError when they do not validate."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {settings_problems(exc)}") from None


def env_for(settings: Settings) -> dict[str, str]:
    """Environment variables that reproduce ``settings`` in a child process (``dscan serve``, tests)."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        key = f"DSCAN_{name.upper()}"
        if name == "data_roots":
            env[key] = os.pathsep.join(str(p) for p in value)
        elif name == "api_tokens":
            env[key] = ",".join(settings.token_values())
        elif isinstance(value, list):
            env[key] = ",".join(str(v) for v in value)
        else:
            env[key] = str(value)
    return env
