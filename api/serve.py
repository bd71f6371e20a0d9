"""``dscan serve``: the whole service on one machine with one command.

Starts a Celery worker pool and the API (uvicorn) as child processes, and a private ``redis-server`` when
``DSCAN_REDIS_URL`` is unset and no Redis answers on 127.0.0.1:6379. Stops them all on Ctrl-C or SIGTERM,
and stops everything if one of them dies. The private Redis keeps nothing on disk: its jobs end with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import httpx
import redis
from pydantic import ValidationError

from workers.logs import uvicorn_log_config
from workers.settings import Settings, redact_url, settings_problems

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


class ServeError(Exception):
    """The service cannot start; the message says why and what to do."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_answers(url: str, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.exceptions.RedisError, OSError, ValueError):
        return False


@dataclass
class PrivateRedis:
    """A throw-away ``redis-server`` on a free port of 127.0.0.1, without persistence."""

    process: subprocess.Popen[bytes]
    folder: Path
    url: str

    @classmethod
    def start(cls, binary: str | None = None, timeout: float = 10.0) -> PrivateRedis:
        exe = binary or shutil.which("redis-server")
        if exe is None:
            raise ServeError(
                "no Redis answers on 127.0.0.1:6379 and redis-server is not installed: install it "
                "(apt-get install redis-server, brew install redis) or set DSCAN_REDIS_URL to a Redis you have"
            )
        port = free_port()
        folder = Path(tempfile.mkdtemp(prefix="dscan-redis-"))
        args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", str(folder), "--logfile", str(folder / "redis.log")]
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + timeout
        while not redis_answers(url, 0.2):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                log = (
                    (folder / "redis.log").read_text(errors="replace")[-2000:]
                    if (folder / "redis.log").exists()
                    else ""
                )
                raise ServeError(f"redis-server did not start: {log.strip() or 'no output'}")
            time.sleep(0.05)
        return cls(process, folder, url)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class Service:
    """The running children of ``dscan serve``."""

    url: str
    redis_url: str
    private: PrivateRedis | None = None
    children: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dscan-serve-")))

    def dead(self) -> tuple[str, int] | None:
        for name, proc in self.children:
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def stop(self, grace: float = 10.0) -> None:
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _, proc in reversed(self.children):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self.private is not None:
            self.private.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _die_with_parent() -> None:
    """In a child, before exec: on Linux, get SIGTERM when ``dscan serve`` dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def check_settings(env: dict[str, str]) -> Settings:
    """Validate the settings the children will read, with messages a person can act on."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return Settings()
    except ValidationError as exc:
        raise ServeError(f"invalid settings: {settings_problems(exc)}") from None
    finally:
        os.environ.clear()
        os.environ.update(saved)


def start(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 2,
    data_roots: list[Path] | None = None,
    api_workers: int = 1,
    env: dict[str, str] | None = None,
    default_redis: str = DEFAULT_REDIS,
    log_level: str = "INFO",
) -> Service:
    """Start Redis (if needed), the workers and the API; returns once the API answers ``/readyz``."""
    env = dict(os.environ if env is None else env)
    if data_roots:
        env["DSCAN_DATA_ROOTS"] = os.pathsep.join(str(Path(p).absolute()) for p in data_roots)
    if not env.get("DSCAN_DATA_ROOTS"):
        raise ServeError("no data roots: pass --data-root PATH (repeatable) or set DSCAN_DATA_ROOTS")
    env.setdefault("DSCAN_LOG_LEVEL", log_level)
    private = None
    if not env.get("DSCAN_REDIS_URL"):
        if redis_answers(default_redis):
            env["DSCAN_REDIS_URL"] = default_redis
        else:
            private = PrivateRedis.start()
            env["DSCAN_REDIS_URL"] = private.url
    try:
        settings = check_settings(env)
    except ServeError:
        if private is not None:
            private.stop()
        raise
    service = Service(url=f"http://{host}:{port}", redis_url=settings.redis_url, private=private)
    try:
        logcfg = service.folder / "log.json"
        logcfg.write_text(json.dumps(uvicorn_log_config("api", settings.log_level)))
        worker = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--concurrency", str(workers)]
        worker += ["--loglevel", settings.log_level, "-n", f"dscan-{os.getpid()}@%h", "--without-gossip"]
        child = {"env": env, "stdin": subprocess.DEVNULL, "preexec_fn": _die_with_parent}
        service.children.append(("worker", subprocess.Popen(worker, **child)))  # type: ignore[call-overload]
        api = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory", "--host", host, "--port", str(port)]
        api += ["--workers", str(api_workers), "--log-config", str(logcfg), "--no-access-log"]
        service.children.append(("api", subprocess.Popen(api, **child)))  # type: ignore[call-overload]
        wait_ready(service, timeout=60.0)
    except BaseException:
        service.stop(grace=3.0)
        raise
    return service


def wait_ready(service: Service, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        dead = service.dead()
        if dead is not None:
            raise ServeError(f"the {dead[0]} process exited with status {dead[1]} while starting (see its log above)")
        try:
            answer = httpx.get(f"{service.url}/readyz", timeout=2.0)
            if answer.status_code == 200:
                return
            last = answer.json().get("detail", answer.text)
        except (httpx.HTTPError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.25)
    raise ServeError(f"the service did not become ready within {timeout:.0f} s: {last}")


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 2,
    data_roots: list[Path] | None = None,
    api_workers: int = 1,
    log_level: str = "INFO",
) -> int:
    """Run until Ctrl-C or SIGTERM; returns the exit status."""
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        service = start(host, port, workers, data_roots, api_workers, log_level=log_level)
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    origin = "a private redis-server (nothing is kept after it stops)" if service.private else "the Redis at"
    print(
        f"dscan serve: API on {service.url} (OpenAPI: {service.url}/docs), {workers} worker process(es), "
        f"{origin} {redact_url(service.redis_url)}. Ctrl-C stops everything.",
        file=sys.stderr,
        flush=True,
    )
    signal.signal(signal.SIGTERM, on_signal)
    status = 0
    try:
        while not stopping:
            dead = service.dead()
            if dead is not None:
                print(f"dscan serve: the {dead[0]} process exited ({dead[1]}); stopping", file=sys.stderr)
                status = 1
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        print("dscan serve: stopping", file=sys.stderr, flush=True)
        service.stop()
    return status
