"""``dscan submit`` and ``dscan serve``: the CLI's side of the scan service.

``submit`` is the CI gate through the service: same options, formats and exit statuses as ``dscan scan``
(0 passed, 1 findings at or above ``--fail-on``, 2 the scan could not run). It needs only httpx. ``serve``
imports the service (``api.serve``) when it runs, so the core never loads FastAPI, Celery or Redis.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .errors import DscanError


def register(main: click.Group) -> None:
    """Add ``submit`` and ``serve`` to the ``dscan`` command group."""
    from .cli import (
        CONFIG_NOTE,
        Failure,
        command_config,
        dropped_when_no_report,
        emit,
        implied_format,
        is_terminal,
        output_file,
        ran_some_check,
        scan_options,
    )

    @main.command("submit")
    @click.argument("path")
    @click.option("--server", envvar="DSCAN_SERVER", required=True, help="service URL [env DSCAN_SERVER]")
    @click.option("--token", envvar="DSCAN_TOKEN", help="API token [env DSCAN_TOKEN]")
    @click.option("--wait/--no-wait", default=False, help="wait for the report and exit like `dscan scan`")
    @click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        help="with --wait: give up after this many seconds (exit 2)",
    )
    @click.option("--force", is_flag=True, help="scan again even if unchanged data was scanned already")
    @scan_options
    def submit_command(
        path: str,
        server: str,
        token: str | None,
        wait: bool,
        timeout: float | None,
        force: bool,
        fmt: str,
        output: Path | None,
        **flags: Any,
    ) -> None:
        """Scan PATH on a dscan service. PATH is as the server sees it (relative paths that exist here are
        made absolute; others are taken inside the server's first data root); so is --root."""
        from .client import ServiceClient

        fmt = implied_format(fmt, output)
        local = os.path.exists(path)  # then the report must not overwrite it, should the server see it too
        report_file = output_file(output, Path(path) if local else None) if wait else None
        with dropped_when_no_report(report_file):  # (a failed job, Ctrl-C: no report, as `dscan scan`)
            try:
                config, from_file = command_config(flags)
                options = config.model_dump(mode="json", exclude_defaults=True)
                target = path if os.path.isabs(path) or not local else os.path.abspath(path)
                if config.root is not None and not os.path.isabs(config.root) and os.path.isdir(config.root):
                    options["root"] = os.path.abspath(config.root)  # (as PATH: the server sees it there too)
                with ServiceClient(server, token) as client:
                    job = client.submit(target, options, force=force)
                    if not wait:
                        if fmt == "json":
                            import json

                            click.echo(json.dumps(job))
                        else:
                            note = " (same request on unchanged data: existing job)" if job.get("deduplicated") else ""
                            click.echo(f"{job['id']} {job['status']} {job['url']}{note}")
                        return
                    show = _progress_printer() if is_terminal(sys.stderr) else None
                    notice = _workers_notice(job, show is not None)
                    state = client.wait(job["id"], timeout=timeout, on_status=show, on_workers=notice)
                    if show is not None:
                        click.echo("", err=True)
                    if state["status"] != "succeeded":
                        reason = f": {state['error']}" if state.get("error") else ""
                        raise Failure(DscanError(f"scan {job['id']} {state['status']}{reason}"))
                    report = ran_some_check(client.fetch_report(job["id"]))  # exit 2, as `dscan scan` does
                    if from_file is not None:  # the options a config file here set: the report says so, as scan's
                        report.info[CONFIG_NOTE] = from_file
            except DscanError as exc:
                raise Failure(exc) from exc
        emit(report, fmt, report_file)
        sys.exit(report.exit_code())

    @main.command("serve")
    @click.option("--host", default="127.0.0.1", show_default=True, help="address the API listens on")
    @click.option("--port", default=8000, show_default=True, type=int)
    @click.option("--workers", "-j", type=click.IntRange(min=1), help="worker processes [default: the CPUs it may use]")
    @click.option(
        "--data-root",
        "data_roots",
        multiple=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="folder whose datasets may be scanned (repeatable) [env DSCAN_DATA_ROOTS]",
    )
    @click.option("--api-workers", default=1, show_default=True, type=click.IntRange(min=1))
    @click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
    def serve_command(
        host: str, port: int, workers: int | None, data_roots: tuple[Path, ...], api_workers: int, log_level: str
    ) -> None:
        """Run the scan service here: the API, a worker pool and (when DSCAN_REDIS_URL is unset and no Redis
        answers on 127.0.0.1:6379) a private redis-server. Ctrl-C stops it all."""
        try:
            from api.serve import ServeError, serve
        except ImportError as exc:
            message = f"the service needs its extra dependencies: pip install 'dscan[service]' ({exc})"
            raise Failure(DscanError(message)) from exc
        from .runner import default_workers

        try:
            status = serve(host, port, workers or default_workers(), list(data_roots), api_workers, log_level)
        except ServeError as exc:
            raise Failure(DscanError(str(exc))) from exc
        sys.exit(status)


def _workers_notice(job: dict[str, Any], progress: bool) -> Callable[[bool], None]:
    """What ``submit --wait`` says on standard error when no worker answers the service (the scan then waits
    until one starts, which may be never), and when one answers again (on a line of its own, below the
    progress line when there is one)."""
    start = "\n" if progress else ""

    def say(answering: bool) -> None:
        if answering:
            click.echo(f"{start}dscan: a worker answers again; scan {job['id']} goes on", err=True)
        else:
            click.echo(
                f"{start}dscan: no worker answers the service: scan {job['id']} waits until one starts "
                "(`celery -A workers.app worker`); --timeout bounds the wait",
                err=True,
            )

    return say


def _progress_printer() -> Any:
    def show(state: dict[str, Any]) -> None:
        p = state.get("progress") or {}
        done, total = p.get("items_done", 0), p.get("items_total", 0)
        pct = p.get("fraction", 0.0) * 100
        click.echo(f"\r{state['status']}: {pct:5.1f}%  {done:,} of {total:,} items", err=True, nl=False)

    return show
