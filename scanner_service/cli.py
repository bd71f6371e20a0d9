"""The ``dscan`` command: a CI gate for datasets.

Exit status: 0 nothing at or above ``--fail-on``; 1 findings at or above it; 2 the scan could not run.
"""

# ruff: noqa: E402  (the environment defaults below must precede the imports that build pydantic models)
from __future__ import annotations

from .entry import set_environment

set_environment()  # (already set when started as the ``dscan`` command)

import contextlib
import io
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TextIO

import click
from click.core import ParameterSource

from . import __version__, checks
from .config import ScanConfig, file_note, load_config
from .errors import DscanError, OutputError, SourceError, UsageError
from .head_start import HeadStart
from .render import FORMATS, render
from .report import Report
from .runner import scan
from .text import printable


class Failure(click.ClickException):
    """A DscanError shown on stderr with its exit status; names in it spelled out as reports spell them
    (``caf\\xe9``, never a raw escape sequence from a file name), line by line."""

    exit_code = 2

    def __init__(self, error: DscanError) -> None:
        super().__init__("\n".join(map(printable, str(error).split("\n"))))


class RichProgress:
    """A progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("scanning"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[items]:,} items"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task: Any = None
        self.items = 0

    def start(self, total_items: int, total_bytes: int, shards: int) -> None:
        self._restore_on_sigterm()
        self.progress.start()
        self.task = self.progress.add_task("scan", total=max(1, total_bytes), items=0)

    def advance(self, items: int, nbytes: int) -> None:
        self.items += items
        self.progress.update(self.task, advance=nbytes, items=self.items)

    def finish(self) -> None:
        with contextlib.suppress(Exception):  # (stopped while it started: Ctrl-C inside ``start``)
            self.progress.stop()
        with contextlib.suppress(Exception):  # the cursor shown in any case (it is, when ``stop`` got there)
            self.progress.console.show_cursor(True)
            self.progress.console.file.flush()

    def _restore_on_sigterm(self) -> None:
        """SIGTERM still ends the command by the signal (its default), after the bar is erased and the cursor
        shown again; a worker forked meanwhile just dies of it."""
        owner = os.getpid()
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_DFL:
            return

        def terminated(signum: int, frame: FrameType | None) -> None:
            signal.signal(signum, signal.SIG_DFL)
            if os.getpid() == owner:
                self.finish()
            os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, terminated)


class OutputPath(click.Path):
    """``--output``'s type: a file path, where an empty value (an unset variable) is refused rather than
    taken for the current folder."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("the path is empty (an unset variable?)", param, ctx)
        return super().convert(value, param, ctx)


def scan_options(func: Any) -> Any:
    options = [
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True),
        click.option("--output", "-o", type=OutputPath(), help="write here"),
        click.option("--fail-on", type=click.Choice(["error", "warning", "never"]), help="[default: error]"),
        click.option("--num-classes", type=int, help="expected number of classes K"),
        click.option("--batch-size", type=int, help="training batch size B"),
        click.option(
            "--labels",
            help="labels inside HDF5 files: a path (/train/cls), or a name for every group; NumPy: the array's "
            "file or npz member name; a CSV image list: the label column [default: label(s), y, target(s), also "
            "as y_train, test_labels ...; a CSV's label, class, target, category ...]",
        ),
        click.option("--select", help="only these checks: codes, prefixes or slugs, comma-separated"),
        click.option("--ignore", help="skip these checks: codes, prefixes or slugs, comma-separated"),
        click.option("--max-locations", type=int, help="locations listed per finding [default: 20]"),
        click.option("--decoder", help="LMDB value decoder: datum, image, npy, msgpack, raw:DTYPE:SHAPE"),
        click.option("--root", help="folder that list-file paths are relative to"),
        click.option("--min-size", type=int, help="tiny-image: smallest short side in pixels [default: 32]"),
        click.option(
            "--max-pixels", type=int, help="decompression-bomb: largest declared pixel count [default: 178,956,970]"
        ),
        click.option(
            "--batch-absence-threshold",
            type=float,
            help="label-batch-absence: largest acceptable P(a class is absent from a batch) [default: 0.01]",
        ),
        click.option(
            "--sorted-run-batches",
            type=float,
            help="label-sorted-storage: longest acceptable run of one label, in batches [default: 4]",
        ),
        click.option(
            "--config",
            "config_file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="dscan.toml or pyproject.toml with [tool.dscan]",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


CONFIG_FLAGS = (
    "fail_on",
    "num_classes",
    "batch_size",
    "labels",
    "select",
    "ignore",
    "max_locations",
    "decoder",
    "root",
    "min_size",
    "max_pixels",
    "batch_absence_threshold",
    "sorted_run_batches",
)


REPORT_HEADS = (b"dscan ", b"# dscan report")
"""How dscan's text and markdown reports start (its JSON and JUnit reports are told by ``_is_report``)."""


def output_file(output: Path | None, scanned: Path | None = None) -> Path | None:
    """The file ``--output`` names, checked before the scan (not after it); None for standard output (no
    ``--output``, or ``-`` as usual for command-line tools). ``scanned`` is the dataset, when it is here."""
    target = None if output is None or output == Path("-") else output
    if target is None and sys.stdout is None:
        raise Failure(OutputError("standard output is closed: give --output FILE for the report"))
    if target is None:
        return None
    problem = _unwritable(target) or _overwrites_data(target, scanned)
    if problem:
        raise Failure(OutputError(f"cannot write the report to {target}: {problem}"))
    return target


def _unwritable(output: Path) -> str | None:
    """Why ``output`` cannot be written: the file's own permission when it exists, its folder's otherwise."""
    if os.path.isdir(output):
        return "it is a folder"
    if os.path.exists(output):
        return None if os.access(output, os.W_OK) else "it is not writable"
    folder = output.parent
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return "its folder does not exist or is not writable"
    return None


def _overwrites_data(output: Path, scanned: Path | None) -> str | None:
    """Why writing ``output`` could destroy data: it is the dataset itself, or an existing file (a link's target)
    that is no report dscan wrote. Where it lies says nothing (a list names files anywhere, through ``--root``,
    absolute paths or ``..``), so only an empty file or a dscan report is overwritten; a device or a pipe is
    written to."""
    if scanned is not None and _same_file(output, scanned):
        return f"it is the dataset being scanned ({scanned})"
    if not os.path.isfile(output) or _is_report(output):
        return None
    return (
        "it exists and is no dscan report (a report replaces only an earlier report: remove it, or choose another name)"
    )


def _is_report(path: Path) -> bool:
    """Whether the file at ``path`` is empty or starts as a dscan report of any format does."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    if not head.strip() or head.startswith(REPORT_HEADS):
        return True
    if head.lstrip().startswith(b"{"):
        return b'"schema_version"' in head and b'"name": "dscan"' in head
    return head.startswith(b"<?xml") and b'<testsuites name="dscan"' in head


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def is_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is open and a terminal (a closed one, ``>&-``, is None)."""
    try:
        return stream is not None and stream.isatty()
    except ValueError:
        return False


CONFIG_NOTE = "config.file"
"""The report ``info`` note naming the config file a CLI scan read, and the options it set."""

IMPLIED_FORMATS = {".json": "json", ".xml": "junit", ".md": "markdown"}
"""The format an ``--output`` file's suffix implies when ``--format`` is not given."""


def implied_format(fmt: str, output: Path | None) -> str:
    """``fmt``, or, when ``--format`` was left at its default, the format the ``--output`` file's suffix names:
    ``-o report.json`` wrote the text report into the .json file, which the CI step reading it then failed on."""
    ctx = click.get_current_context(silent=True)
    if output is None or ctx is None or ctx.get_parameter_source("fmt") is not ParameterSource.DEFAULT:
        return fmt
    return IMPLIED_FORMATS.get(output.suffix.lower(), fmt)


def emit(report: Report, fmt: str, output: Path | None) -> None:
    """The report in ``fmt`` to ``output`` (None: standard output); with a file, the text report still goes to
    the terminal, when standard output is open."""
    if output is not None:
        try:
            output.write_text(render(report, fmt), encoding="utf-8")
        except OSError as exc:
            raise Failure(OutputError(f"cannot write the report to {output}: {exc.strerror or exc}")) from exc
    if output is None and fmt != "text":
        _echo(render(report, fmt))
    elif sys.stdout is not None:
        _echo(terminal_report(report))


def prepare_text() -> None:
    """Import the text renderer (rich: 25-60 ms), done while a scan's workers read."""
    from .render import text  # noqa: F401


def terminal_report(report: Report) -> str:
    """The text report, coloured on a terminal unless NO_COLOR is set (https://no-color.org); rich is
    imported only here (or in ``prepare_text``)."""
    import shutil

    from .render import text as text_render

    tty = is_terminal(sys.stdout)
    width = min(max(shutil.get_terminal_size((100, 24)).columns, 60), 160) if tty else 100
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return text_render.render(report, color=tty and not os.environ.get("NO_COLOR"), width=width, encoding=encoding)


def _echo(text: str) -> None:
    """Write to standard output. A reader that stopped early (``| head``) changes nothing: the exit status
    is still the verdict. A write that fails otherwise (a full disk) is an output error."""
    try:
        click.echo(text, nl=False)
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        return
    except OSError as exc:
        raise Failure(OutputError(f"cannot write the report to standard output: {exc.strerror or exc}")) from exc


INTERRUPTED = 130
"""Exit status of a scan stopped by Ctrl-C (128 + SIGINT, as shells report it): neither a verdict nor a bad
request."""
TERMINATED = 128 + signal.SIGTERM
"""Exit status of a demo stopped by SIGTERM (what CI runners send on cancel), after it removed its files."""


class Terminated(BaseException):
    """SIGTERM, raised where the demo runs so that its temporary folder is removed on the way out. A
    BaseException, as KeyboardInterrupt is: no ``except Exception`` of a reader may take it for a finding."""


@contextlib.contextmanager
def stopped_by_signals(sigterm: bool = False) -> Iterator[None]:
    """Ctrl-C (and SIGTERM, with ``sigterm``) in the block ends the command in order: ``with`` and
    ``finally`` blocks run, one line on stderr, exit status 130 (143)."""
    try:
        with _sigterm_raises() if sigterm else contextlib.nullcontext():
            yield
    except KeyboardInterrupt:
        _stop("interrupted", INTERRUPTED)
    except Terminated:
        _stop("terminated", TERMINATED)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Terminated in this process while the block runs. Worker processes forked meanwhile
    inherit the handler: there it restores the default and dies of the signal, as before."""
    main_pid = os.getpid()

    def terminate(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(what: str, status: int) -> NoReturn:
    click.echo(f"dscan: {what}; no report", err=True)
    sys.exit(status)


def current_folder() -> Path | None:
    """The current folder, where config discovery starts; None when it no longer exists or cannot be read
    (then no config file is looked for)."""
    try:
        return Path.cwd()
    except OSError:
        return None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dscan")
def main() -> None:
    """dscan: find the data defects that turn training into NaN, before training."""


@main.command("scan")
@click.argument("path", required=False)
@scan_options
@click.option(
    "--workers",
    "-j",
    type=click.IntRange(min=0),
    help="reader processes; 0 reads in this process, without crash isolation [default: the CPUs it may use]",
)
def scan_command(path: str | None, fmt: str, output: Path | None, workers: int | None, **flags: Any) -> None:
    """Scan the dataset at PATH (HDF5 file, folder or list; NumPy .npy/.npz; images; LMDB). Without PATH: a
    demo dataset."""
    fmt = implied_format(fmt, output)
    if path is None:
        run_demo(fmt, output, workers, flags)
        return
    if not path.strip():  # `dscan scan "$DATA"` with DATA unset must not scan the current folder and pass
        raise click.BadParameter("the path is empty (an unset variable?)", param_hint="PATH")
    target = output_file(output, Path(path))
    with stopped_by_signals(), dropped_when_no_report(target):
        try:
            config, note = command_config(flags)
            progress = RichProgress() if fmt == "text" and is_terminal(sys.stderr) and target is None else None
            head_start = click.get_current_context().find_object(HeadStart)
            try:
                scanned = scan(Path(path), config, workers=workers, progress=progress, head_start=head_start)
            finally:  # Ctrl-C too: the bar is erased and the terminal's cursor shown again
                if progress is not None:
                    progress.finish()
            report = ran_some_check(scanned)
            if note is not None:
                report.info[CONFIG_NOTE] = note
        except DscanError as exc:
            raise Failure(exc) from exc
        except OSError as exc:  # the system refused the scan itself: no verdict (exit status 1 would be one)
            raise Failure(unreadable(path, exc)) from exc
    emit(report, fmt, target)
    sys.exit(report.exit_code())


def command_config(flags: dict[str, Any]) -> tuple[ScanConfig, str | None]:
    """A command's scan options: its flags over the config file it names or finds from the current folder
    (``flags`` loses ``config_file``), and the report note naming the options that file set (None when none)."""
    config_file, overrides, here = flags.pop("config_file"), {k: flags.get(k) for k in CONFIG_FLAGS}, current_folder()
    return load_config(config_file, overrides, here), file_note(config_file, overrides, here)


@contextlib.contextmanager
def dropped_when_no_report(target: Path | None) -> Iterator[None]:
    """Remove the report an earlier scan left at ``target`` (``output_file`` lets a scan replace only that)
    when this scan ends without one (exit status 2, Ctrl-C): a CI job that publishes the file after a failed
    run published the earlier verdict as this run's."""
    earlier = target is not None and os.path.isfile(target) and os.path.getsize(target) > 0
    try:
        yield
    except BaseException:
        if earlier and target is not None:
            with contextlib.suppress(OSError):
                target.unlink()
                click.echo(f"dscan: removed {target}, the report of an earlier scan (this one made none)", err=True)
        raise


def unreadable(path: str, exc: OSError) -> SourceError:
    """An OSError that escaped the scan (a file below a folder that may not be searched, too many open files),
    as the one-line error of a scan that could not run."""
    where = os.fsdecode(exc.filename) if exc.filename is not None else path
    return SourceError(f"{where} cannot be read: {exc.strerror or exc}", path)


def ran_some_check(report: Report) -> Report:
    """``report``, when a check that applies to the dataset ran. ``--select I`` (the image checks) on an HDF5
    file runs none: its pass would say nothing about the data, like a --select that --ignore empties."""
    if report.checks_run():
        return report
    raise UsageError(report.no_check_reason())


def run_demo(fmt: str, output: Path | None, workers: int | None, flags: dict[str, Any]) -> None:
    """Build the demo dataset in a temporary folder, scan it, report. The folder goes whatever ends the demo:
    the end, an error, Ctrl-C (exit status 130) or SIGTERM (143)."""
    target = output_file(output)
    with stopped_by_signals(sigterm=True):
        status = _scan_demo(fmt, target, workers, flags)
    sys.exit(status)


def _scan_demo(fmt: str, output: Path | None, workers: int | None, flags: dict[str, Any]) -> int:
    import tempfile

    from .demo import build_demo

    overrides = {"num_classes": 10, "batch_size": 32, **{k: v for k, v in flags.items() if v is not None}}
    try:  # options first: a bad one is refused before anything is built
        config = load_config(overrides.pop("config_file", None), {k: overrides.get(k) for k in CONFIG_FLAGS})
        checks.enabled_codes(config.select, config.ignore)  # an unknown check name raises here
    except DscanError as exc:
        raise Failure(exc) from exc
    with tempfile.TemporaryDirectory(prefix="dscan-demo-") as tmp:
        root = build_demo(Path(tmp))
        click.echo(f"dscan demo: built a dataset with seeded defects in {root}", err=True)
        try:
            report = ran_some_check(scan(root, config, workers=workers))
        except DscanError as exc:
            raise Failure(exc) from exc
        emit(report, fmt, output)
        click.echo(
            "dscan demo: the findings above are seeded on purpose; "
            f"scan your own data with `dscan scan PATH` (exit status {report.exit_code()}).",
            err=True,
        )
        return report.exit_code()


@main.command("demo")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--output", "-o", type=OutputPath(), help="write here")
@click.option("--workers", "-j", type=click.IntRange(min=0), help="reader processes [default: the CPUs it may use]")
def demo_command(fmt: str, output: Path | None, workers: int | None) -> None:
    """Build a small dataset with seeded defects in a temporary folder and scan it."""
    run_demo(implied_format(fmt, output), output, workers, {})


@main.command("checks")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def checks_command(fmt: str) -> None:
    """List every check: code, slug, default severity, what it finds."""
    if fmt == "json":
        import json

        _echo(json.dumps(checks.catalogue(), indent=2) + "\n")
    elif fmt == "markdown":
        _echo(checks_markdown())
    else:
        _echo("".join(f"{c.code}  {c.name:<24} {c.severity.value:<8} {c.summary}\n" for c in checks.CHECKS))


def checks_markdown() -> str:
    """The checks reference page (docs/checks.md is this, generated)."""
    parts = ["# dscan checks", "", "Generated by `dscan checks --format markdown`. Do not edit.", ""]
    parts += ["| code | name | severity | finds |", "|---|---|---|---|"]
    parts += [  # the anchor GitHub gives the heading "V001 nan-value (error)"
        f"| {c.code} | [{c.name}](#{c.code.lower()}-{c.name}-{c.severity.value}) | {c.severity.value} | {c.summary} |"
        for c in checks.CHECKS
    ]
    parts.append("")
    for c in checks.CHECKS:
        parts.append(c.explain().replace("# ", "## ", 1).replace("\n## ", "\n### "))
    return "\n".join(parts)


@main.command("explain")
@click.argument("code")
def explain_command(code: str) -> None:
    """Explain one check: what it finds, why it breaks training, how to fix it. CODE or slug."""
    try:
        check = checks.get_check(code)
    except DscanError as exc:
        raise Failure(exc) from exc
    _echo(check.explain())


@main.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of the report (--format json)."""
    import json

    _echo(json.dumps(Report.model_json_schema(), indent=2) + "\n")


from .service_cli import register as _register_service

_register_service(main)  # dscan submit, dscan serve


QUICK_EXIT = frozenset({"scan", "demo", "submit", "checks", "explain", "schema"})
"""Commands after which the process ends at once: nothing is left to clean up (the worker processes are
joined, every output is written and flushed), and tearing down the interpreter's modules (numpy, h5py,
pydantic ...) would add about 40 ms to every run of a CI gate."""


def run(argv: list[str] | None = None, head_start: HeadStart | None = None) -> None:
    """The ``dscan`` console command: ``main``, then, for the short commands, an immediate exit. ``head_start``:
    the inspection of the scanned folder's last images that ``entry.run`` started, for ``dscan scan``."""
    args = sys.argv[1:] if argv is None else argv
    _fill_closed_descriptors()
    _tolerant_streams()
    try:
        try:
            main.main(args=args, prog_name="dscan", obj=head_start)
        except Exception as exc:  # a bug: never exit status 1, which says the dataset has findings
            raise _crashed(exc) from exc
    except SystemExit as exc:
        if not (args and args[0] in QUICK_EXIT):
            raise
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int) and sys.stderr is not None:
            print(exc.code, file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            if stream is None:  # closed (`>&-`)
                continue
            with contextlib.suppress(OSError):  # a closed pipe (`dscan scan ... | head`): nothing more to write
                stream.flush()
        os._exit(code)


CRASHED = 2
"""Exit status of a command that failed on a bug of dscan's own: the scan could not run, no verdict (Python's
own status for an uncaught exception, 1, is the one that says the dataset has findings)."""


def _crashed(exc: Exception) -> SystemExit:
    """The exit of a command that raised ``exc`` unexpectedly: its traceback (what a bug report needs) and one
    line saying that there is no verdict."""
    import traceback

    if sys.stderr is not None:
        traceback.print_exception(exc, file=sys.stderr)
        print(f"dscan: internal error ({type(exc).__name__}); no verdict", file=sys.stderr)
    return SystemExit(CRASHED)


def _tolerant_streams() -> None:
    """Where the locale's encoding is no UTF (Latin-1, a Windows code page), the characters it lacks (the text
    report's ✅, …, ×) are written as '?': the scan's verdict must not end in an encoding error."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
        if stream is not None and not encoding.startswith("utf") and isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")


def _fill_closed_descriptors() -> None:
    """Give a standard descriptor that was closed (``>&-``) /dev/null, so that no file the scan opens takes
    its number and receives what is written there. ``sys.stdout`` (``sys.stderr``) stays None: closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


if __name__ == "__main__":  # pragma: no cover
    run()
