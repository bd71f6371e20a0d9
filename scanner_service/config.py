"""Scan options: ``ScanConfig``, loadable from ``[tool.dscan]`` in pyproject.toml or from ``dscan.toml``.

Precedence: command-line flags over the configuration file over the defaults here.
Nothing is read at import time: call :func:`load_config`.
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .errors import ConfigError, DscanError

FLOAT16_INF = 65520.0
"""Magnitudes from here on round to ±Inf in float16 (65504 to 65520 round down to 65504)."""
MAX_CLASSES = 1_000_000
"""Upper bound of ``num_classes``: every class is a row of work and of the report."""
MAX_BATCH = 1 << 31
"""Upper bound of batch sizes (numbers beyond any batch would overflow the run-length arithmetic)."""


MAX_BLOCK_BYTES = 1 << 30
"""Upper bound of ``block_bytes``: readers allocate a block's buffer up front."""


TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def _scalar_kinds(annotation: Any) -> tuple[type, ...]:
    """The Python types a value of a scalar field may have (() for other fields)."""
    args = [a for a in typing.get_args(annotation) or (annotation,) if a is not type(None)]
    if len(args) != 1 or args[0] not in TYPE_NAMES:
        return ()
    kind = args[0]
    return (int, float) if kind is float else (kind,)


class ScanConfig(BaseModel):
    """Everything a scan can be told. Every field can be set in the config file or by a flag."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _strict_types(cls, value: Any, info: ValidationInfo) -> Any:
        """Values of the wrong type (from a config file, a JSON request) are refused, not converted: ``true``
        is no class count, ``"yes"`` no boolean, ``"10"`` no number (pydantic's lax mode would take all three)."""
        field = cls.model_fields.get(info.field_name or "")
        kinds = _scalar_kinds(field.annotation) if field is not None and value is not None else ()
        if kinds and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            want = " or ".join(TYPE_NAMES[k] for k in kinds)
            raise ValueError(f"must be {want}, not {type(value).__name__} {value!r}")
        return value

    num_classes: int | None = Field(
        None, ge=1, le=MAX_CLASSES, description="expected number of classes K (labels 0..K-1), at most 1,000,000"
    )
    batch_size: int | None = Field(
        None, ge=1, le=MAX_BATCH, description="training batch size B, for label-batch-absence"
    )
    labels: str | None = Field(
        None,
        description=(
            "name of the labels dataset inside HDF5 files, of the NumPy array (file or npz member), or of the label "
            "column of a CSV image list"
        ),
    )
    select: tuple[str, ...] = Field((), description="only these checks (codes, code prefixes or slugs)")
    ignore: tuple[str, ...] = Field((), description="skip these checks (codes, code prefixes or slugs)")
    max_locations: int = Field(20, ge=0, le=100_000, description="locations kept per finding")
    fail_on: Literal["error", "warning", "never"] = "error"
    batch_absence_threshold: float = Field(
        0.01, gt=0, lt=1, allow_inf_nan=False, description="max probability that a class is absent from a batch"
    )
    sorted_run_batches: float = Field(
        4.0,
        gt=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="a run of one label longer than this many batches is label-sorted-storage",
    )
    default_batch_size: int = Field(
        32, ge=1, le=MAX_BATCH, description="batch size assumed for run lengths when none is set"
    )
    shard_bytes: int = Field(64 << 20, ge=1, description="uncompressed bytes per shard")
    block_bytes: int = Field(
        4 << 20, ge=1, le=MAX_BLOCK_BYTES, description="bytes per block read into memory (at most 1 GiB)"
    )
    decoder: str | None = Field(None, description="LMDB value decoder: datum, image, npy, msgpack, raw:DTYPE:SHAPE")
    root: str | None = Field(None, description="folder that image list paths are relative to")
    min_size: int = Field(
        32, ge=1, le=2**31 - 1, description="tiny-image: smallest acceptable short side, pixels (PNG allows 2³¹-1)"
    )
    max_pixels: int = Field(178_956_970, ge=1, description="decompression-bomb: largest declared pixel count")
    confine: tuple[str, ...] = Field(
        (),
        description=(
            "folders every file read must resolve into, symlinks followed (the service sets its data roots); "
            "a file that resolves elsewhere is reported as unreadable-file and never opened"
        ),
    )

    @field_validator("select", "ignore", mode="before")
    @classmethod
    def _split_codes(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("decoder")
    @classmethod
    def _known_decoder(cls, value: str | None) -> str | None:
        """An unknown decoder is a bad option now (exit 2, HTTP 422), not a failed scan later."""
        if value is not None:
            from .records import parse_decoder

            try:
                parse_decoder(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _some_check_left(self) -> ScanConfig:
        """``select`` and ``ignore`` that leave no check would pass any dataset: a bad option, not a verdict."""
        if self.select or self.ignore:
            from .checks import enabled_codes

            try:
                left = enabled_codes(self.select, self.ignore)
            except DscanError:  # an unknown code: reported where the checks are chosen, as before
                return self
            if not left:
                raise ValueError("select and ignore leave no check to run")
        return self

    @property
    def run_threshold(self) -> int:
        """Label runs longer than this are reported as sorted storage."""
        from fractions import Fraction

        batches = Fraction(repr(self.sorted_run_batches))  # as written: 0.29 × 100 is 29, not 28.999…
        return max(1, int(batches * (self.batch_size or self.default_batch_size)))


CONFIG_KEYS = frozenset(ScanConfig.model_fields)


def _normalise(table: dict[str, Any], origin: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in CONFIG_KEYS:
            raise ConfigError(_unknown_key(key, origin))
        if name in out:  # `max-locations` and `max_locations` in one table: which one counts is no guess to make
            raise ConfigError(f"{origin}: option {key!r} is set twice, also as {spelled[name]!r}")
        out[name] = value
        spelled[name] = key
    return out


def _unknown_key(key: str, origin: str) -> str:
    """The error for a key that sets no option, with the closest known one, all spelled as the README and the
    flags spell them (``num-classes``): a misspelt key must not leave the user to find it in a list."""
    known = sorted(name.replace("_", "-") for name in CONFIG_KEYS)
    close = difflib.get_close_matches(key.replace("_", "-").lower(), known, n=1, cutoff=0.6)
    hint = f": did you mean {close[0]!r}?" if close else ""
    return f"{origin}: unknown option {key!r}{hint} (known: {', '.join(known)})"


def read_config_file(path: Path, named: bool = False) -> dict[str, Any]:
    """Options from a dscan.toml (top level, ``[tool.dscan]``, or both: on a key set in both, the table wins)
    or a pyproject.toml (``[tool.dscan]`` only). ``named``: the user named the file (``--config``), so a
    pyproject.toml without ``[tool.dscan]`` is an error, not a scan on the defaults without a word."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    table = _tool_table(data, path)
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        if named and not (isinstance(tool, dict) and "dscan" in tool):
            raise ConfigError(f"config file {path} has no [tool.dscan] table: it sets no dscan option")
        return _relative_to(_normalise(table, str(path)), path)
    top_level = {key: value for key, value in data.items() if key != "tool"}
    return _relative_to({**_normalise(top_level, str(path)), **_normalise(table, str(path))}, path)


def _relative_to(options: dict[str, Any], path: Path) -> dict[str, Any]:
    """``options`` with a relative ``root`` taken from the config file's folder, as the file's author wrote it
    (not from wherever the scan runs: the file is found from subfolders too)."""
    root = options.get("root")
    if isinstance(root, str) and root and not Path(root).is_absolute():
        options["root"] = str(path.parent / root)
    return options


def _tool_table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """The ``[tool.dscan]`` table ({} when there is none). In a dscan.toml, ``tool`` holds nothing else."""
    tool = data.get("tool", {})
    table = tool.get("dscan", {}) if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.dscan] must be a table")
    others = sorted(set(tool) - {"dscan"})
    if others and path.name != "pyproject.toml":
        raise ConfigError(f"{path}: unknown option 'tool.{others[0]}' (dscan reads the top level and [tool.dscan])")
    return table


def find_config_file(start: Path) -> Path | None:
    """The nearest dscan.toml, or pyproject.toml with a [tool.dscan] table, from ``start`` upwards.

    A folder that cannot be searched (no permission) ends the search: what lies nearer is unknown, so no
    file further up is taken for the nearest one."""
    for folder in [start, *start.parents]:
        try:
            found = _config_in(folder)
        except PermissionError:
            return None
        if found is not None:
            return found
    return None


def _config_in(folder: Path) -> Path | None:
    """``folder``'s dscan.toml, else its pyproject.toml when that has a [tool.dscan] table, else None."""
    candidate = folder / "dscan.toml"
    if candidate.is_file():
        return candidate
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return None
    import tomllib  # (only where there is a file to read: a scan with no config file imports no TOML parser)

    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return pyproject if "dscan" in tomllib.loads(text).get("tool", {}) else None
    except tomllib.TOMLDecodeError as exc:
        if "[tool.dscan]" in text:  # meant for dscan, but unreadable: never scan on other options
            raise ConfigError(f"cannot read config file {pyproject}: {exc}") from exc
        return None


def load_config(
    config_file: Path | None = None, overrides: dict[str, Any] | None = None, search_from: Path | None = None
) -> ScanConfig:
    """Build a ScanConfig: file options (explicit file, else the nearest one found), then overrides."""
    options: dict[str, Any] = {}
    path = config_path(config_file, search_from)
    if path is not None:
        options.update(read_config_file(path, named=config_file is not None))
    options.update({k: v for k, v in (overrides or {}).items() if v is not None})
    from_file = set(options) - {k for k, v in (overrides or {}).items() if v is not None}
    try:
        return ScanConfig(**options)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_origin(e['loc'], from_file, path)}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors()
        )
        raise ConfigError(f"invalid options: {problems}") from exc


def config_path(config_file: Path | None = None, search_from: Path | None = None) -> Path | None:
    """The config file a scan reads: the one named (``--config``), else the nearest one found."""
    return config_file or (find_config_file(search_from) if search_from else None)


def file_note(config_file: Path | None, overrides: dict[str, Any], search_from: Path | None) -> str | None:
    """'options from PATH: fail-on, num-classes' (the keys the file sets that no flag overrides), None when no
    file is read or it sets nothing that counts: a pyproject.toml further up can set ``fail-on = "never"``, and
    the report must say where that came from."""
    path = config_path(config_file, search_from)
    if path is None:
        return None
    keys = [k for k in read_config_file(path, named=config_file is not None) if overrides.get(k) is None]
    if not keys:
        return None
    return f"options from {path}: {', '.join(k.replace('_', '-') for k in keys)}"


def _origin(loc: tuple[Any, ...], from_file: set[str], path: Path | None) -> str:
    """Where a bad value came from: ``--num-classes``, or ``num-classes in dscan.toml``."""
    name = ".".join(map(str, loc)) or "config"
    key = str(loc[0]) if loc else ""
    if key in from_file and path is not None:
        return f"{key.replace('_', '-')} in {path}"
    return f"--{name.replace('_', '-')}" if key in CONFIG_KEYS else name
