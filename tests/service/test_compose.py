"""docker-compose.yml and the Dockerfile, checked without a Docker engine: structure, health, commands."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.service]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return data


def test_services_and_dependencies(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"redis", "api", "worker"}
    for name in ("api", "worker"):
        assert services[name]["depends_on"] == {"redis": {"condition": "service_healthy"}}
        assert "healthcheck" in services[name]
    assert "healthcheck" in services["redis"]
    assert "container_name" not in services["worker"] and "ports" not in services["worker"]  # --scale worker=N


def test_redis_persists_append_only(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[0] == "redis-server" and command[command.index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in redis["volumes"]) and "redis-data" in compose["volumes"]
    assert redis["healthcheck"]["test"][-1] == "ping"


def test_datasets_read_only_and_secrets_required(compose: dict[str, Any]) -> None:
    text = (REPO / "docker-compose.yml").read_text()
    for name in ("api", "worker"):
        service = compose["services"][name]
        mounts = service["volumes"]
        assert any(m.endswith(":/data:ro") and m.startswith("${DSCAN_DATA:?") for m in mounts)
        env = service["environment"]
        assert env["DSCAN_DATA_ROOTS"] == "/data" and env["DSCAN_REDIS_URL"].startswith("redis://redis:")
    assert compose["services"]["api"]["environment"]["DSCAN_API_TOKENS"].startswith("${DSCAN_API_TOKENS:?")
    assert not re.search(r"DSCAN_API_TOKENS:\s*[A-Za-z0-9]", text)  # no literal secret


def test_every_setting_reaches_the_containers_and_unset_means_default(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Settings set in the environment or .env (DSCAN_NODE_TTL_S, DSCAN_LOG_LEVEL ...) were used for the
    compose file's own substitution only and never reached the containers; each is passed on now, as
    `${NAME:-}`: unset, it arrives empty, and an empty setting takes its default."""
    from workers.settings import Settings

    names = {f"DSCAN_{name.upper()}" for name in Settings.model_fields}
    api, worker = (compose["services"][s]["environment"] for s in ("api", "worker"))
    assert names <= set(api) and names - {"DSCAN_API_TOKENS"} <= set(worker)
    fixed = {"DSCAN_REDIS_URL", "DSCAN_DATA_ROOTS", "DSCAN_API_TOKENS"}
    for name in names - fixed:
        assert api[name] == worker[name] == f"${{{name}:-}}", name
    for name in names:
        monkeypatch.delenv(name, raising=False)
    empty = {name: "" for name in names - fixed}
    settings = Settings(**{"redis_url": "redis://127.0.0.1:6379/0", "data_roots": str(tmp_path)})  # type: ignore[arg-type]
    for name, value in empty.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DSCAN_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("DSCAN_DATA_ROOTS", str(tmp_path))
    assert Settings() == settings  # type: ignore[call-arg]
    assert compose["services"]["worker"]["stop_grace_period"] == "2m"  # shards under way finish on a stop


def _words(command: Any) -> list[str]:
    return command if isinstance(command, list) else shlex.split(command)


def test_commands_name_things_that_exist(compose: dict[str, Any]) -> None:
    api = _words(compose["services"]["api"]["command"])
    assert api[:3] == ["uvicorn", "api.app:create_app", "--factory"]
    module, attr = api[1].split(":")
    assert callable(getattr(importlib.import_module(module), attr))
    worker = _words(compose["services"]["worker"]["command"])
    assert worker[:4] == ["celery", "-A", "workers.app", "worker"]
    from celery import Celery

    assert isinstance(importlib.import_module("workers.app").app, Celery)
    check = " ".join(compose["services"]["api"]["healthcheck"]["test"])
    assert "/healthz" in check and "8000" in check
    assert "inspect ping" in " ".join(compose["services"]["worker"]["healthcheck"]["test"])


def test_dockerfile_copies_what_exists() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3." in text
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), source
    assert '".[service]"' in text and "USER " in text
