"""The status page served by the API: jobs with live progress, readable reports, the check catalogue.

``router`` is included by ``api.app.create_app``; templates live in ``api/templates``, CSS and JavaScript in
``api/static`` (no build step, nothing fetched from elsewhere). See ``docs/web.md``.
"""

from __future__ import annotations

from .routes import router

__all__ = ["router"]
