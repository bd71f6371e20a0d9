"""The command's start skips pydantic's plugin search (importlib.metadata and the metadata of every package)
only when the environment turns every plugin off; pydantic works the same either way."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import sys
from scanner_service.entry import set_environment
set_environment()
from pydantic import BaseModel
class M(BaseModel):
    a: int
assert M(a="3").a == 3
searched = "importlib.metadata" in sys.modules
loader = sys.modules["pydantic.plugin._loader"]
print(searched, type(loader).__name__, loader.PYDANTIC_ENTRY_POINT_GROUP, list(loader.get_plugins()))
"""


def _probe(setting: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=env)
    return out.stdout.split()


@pytest.mark.parametrize("setting", [None, "__all__", "true"])
def test_with_every_plugin_off_the_search_is_skipped(setting: str | None) -> None:
    searched, loader, group, plugins = _probe(setting)
    assert (searched, loader, plugins) == ("False", "_NoPlugins", "[]")
    assert group == "pydantic"  # other names come from pydantic's own module


def test_a_plugin_setting_of_the_user_gets_pydantics_own_search() -> None:
    searched, loader, _group, _plugins = _probe("some_plugin")
    assert (searched, loader) == ("True", "module")
