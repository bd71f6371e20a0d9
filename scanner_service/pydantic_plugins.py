"""pydantic's plugin search, left out when the environment turns every plugin off.

pydantic looks for plugins (``get_plugins`` of ``pydantic.plugin._loader``) when it builds its first model, and
that module imports ``importlib.metadata`` (with ``email``, ``zipfile``, ``csv`` ...) before it reads
``PYDANTIC_DISABLE_PLUGINS``: 20-25 ms of every start of the command, for a search it then skips. With every
plugin off (``__all__``, ``1`` or ``true``, as pydantic reads it), that module is stood in for by one whose
``get_plugins`` finds none, as pydantic's own would; any other name is taken from pydantic's module, imported
then, so a pydantic that asks for more still gets it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any

LOADER = "pydantic.plugin._loader"
ALL_OFF = ("__all__", "1", "true")
"""The values of ``PYDANTIC_DISABLE_PLUGINS`` that turn every plugin off (pydantic's ``get_plugins``)."""


class _NoPlugins(types.ModuleType):
    """Stands in for ``pydantic.plugin._loader`` while every plugin is off."""

    @staticmethod
    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # what the import system asks of a module ('__path__': a package?)
            raise AttributeError(name)
        return getattr(_real_loader(), name)


def _real_loader() -> types.ModuleType:
    import pydantic.plugin

    spec = importlib.machinery.PathFinder.find_spec("_loader", list(pydantic.plugin.__path__))
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {LOADER}", name=LOADER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def skip_search_when_disabled() -> None:
    """Stand in for pydantic's plugin loader if every plugin is off and pydantic has not loaded it yet."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in ALL_OFF and LOADER not in sys.modules:
        sys.modules[LOADER] = _NoPlugins(LOADER)
