"""The API's routers, one per resource, gathered here: ``create_app`` includes each of ``ROUTERS``."""

from __future__ import annotations

from fastapi import APIRouter

from . import health, scans

ROUTERS: tuple[APIRouter, ...] = (scans.router, health.router)

__all__ = ["ROUTERS"]
