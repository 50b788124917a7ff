"""Tool groups from a TOML file (``sandvisor script|serve|mcp --config FILE``).

The file is read with `tomllib` and checked table by table against the Structs below
(which read like docs/groups.md's tables): a bad file is refused with one line that
names the key and what was expected, ``groups.search.sandbox.memory: expected a size
like 512M or "none", got "lots"``. Redactors (``MODULE:ATTR``) are imported in this
process: the file is the host's own configuration, trusted like its code.
"""

from __future__ import annotations

import importlib
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from sandbox import Bind, NetworkAllowlist, SandboxPolicy
from sandbox.errors import PolicyError
from sandbox.netproxy.policy import DEFAULT_MAX_BYTES, DEFAULT_MAX_CONNECTIONS
from sandbox.policy import DEFAULT_ENV
from supervisor.ledger import PolicyError as LedgerPolicyError
from supervisor.ledger import StreamPolicy
from supervisor.workers.groups import ToolGroup
from supervisor.workers.secrets import Secret, SecretError

Positive = Annotated[int, msgspec.Meta(ge=1)]
Size = int | str  # bytes, or "512M", "1G", "none"
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(i?B)?\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class ConfigError(ValueError):
    """A config file that cannot be used; the message is one line naming the key."""


class _Table(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


class SecretTable(_Table):
    """``NAME = { env = "HOST_VAR" }`` or ``NAME = { value = "..." }``."""

    env: str | None = None
    value: str | None = None


_STREAM = StreamPolicy()


class StreamTable(_Table):
    max_chunks: Positive = _STREAM.max_chunks
    max_chunk_bytes: Positive = _STREAM.max_chunk_bytes
    max_total_bytes: Positive = _STREAM.max_total_bytes
    max_emitted_bytes: Positive = _STREAM.max_emitted_bytes


class ToolTable(_Table):
    """``[groups.NAME.tools."TOOL"]``: each key given overrides that field only."""

    max_calls: Positive | None = None
    max_attempts: Positive | None = None
    max_input_bytes: Positive | None = None
    max_output_bytes: Positive | None = None
    deadline: Annotated[float, msgspec.Meta(gt=0)] | None = None
    stream: StreamTable | None = None
    redactor: str | None = None  # MODULE:ATTR, a function of one str returning a str


class SandboxTable(_Table):
    """``[groups.NAME.sandbox]``: the group's `SandboxPolicy`."""

    network: bool | list[str] = False
    network_max_connections: Positive | Literal["none"] = DEFAULT_MAX_CONNECTIONS
    network_max_bytes: Size = DEFAULT_MAX_BYTES
    network_hosts: dict[str, str] = {}
    ro_binds: list[str] = []
    binds: list[str] = []
    env: dict[str, str] = {}
    memory: Size = "512M"
    pids: Positive | Literal["none"] = 128
    cpu_seconds: Positive | None = None
    tmpfs: Size = "64M"
    open_files: Annotated[int, msgspec.Meta(ge=16)] = 256
    file_size: Size = "64M"
    address_space: Size = "none"
    per_process_limits: bool = False


class GroupTable(_Table):
    """``[groups.NAME]``: one `ToolGroup`."""

    adapters: list[str] = []
    mcp_server: list[str] | None = None
    tool_prefix: str = ""
    pool_size: Positive = 1
    pool_min: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_in_flight: Positive = 1
    max_calls_per_worker: Positive | None = None
    cancel_grace: Annotated[float, msgspec.Meta(ge=0)] | None = None
    secrets_as: Literal["env", "file"] = "env"
    sandbox: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    tools: dict[str, Any] = {}


class FileTable(_Table):
    groups: dict[str, Any]


def load_groups(path: str | os.PathLike[str]) -> list[ToolGroup]:
    """The groups a config file describes; `ConfigError` (one line) if it is not right."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"config {name}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {name}: not TOML: {exc}") from None
    try:
        return groups_from(data)
    except ConfigError as exc:
        raise ConfigError(f"config {name}: {exc}") from None


def groups_from(data: Mapping[str, Any]) -> list[ToolGroup]:
    """The groups of a parsed config (a dict as `tomllib` gives it)."""
    top = _convert(data, FileTable, "")
    if not top.groups:
        raise ConfigError("groups: expected at least one [groups.NAME] table")
    return [_group(name, table) for name, table in top.groups.items()]


def _key(name: str) -> str:
    """A key as TOML writes it in a dotted path."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f'"{name}"'


def _group(name: str, raw: Any) -> ToolGroup:
    where = f"groups.{_key(name)}"
    table = _convert(raw, GroupTable, where)
    policy = _policy(_convert(table.sandbox, SandboxTable, f"{where}.sandbox"), where)
    secrets: dict[str, Secret] = {}
    for key, value in table.secrets.items():
        secret = _convert(value, SecretTable, f"{where}.secrets.{_key(key)}")
        try:
            secrets[key] = Secret(value=secret.value, env=secret.env)
        except SecretError as exc:
            raise ConfigError(f"{where}.secrets.{key}: expected {{ env = \"VAR\" }} or "
                              f"{{ value = \"...\" }}: {exc}") from None  # fmt: skip
    overrides: dict[str, dict[str, Any]] = {}
    redactors: dict[str, Callable[[str], str]] = {}
    for tool, value in table.tools.items():
        at = f"{where}.tools.{_key(tool)}"
        spec = _convert(value, ToolTable, at)
        changes = {
            k: v
            for k, v in msgspec.structs.asdict(spec).items()
            if v is not None and k not in ("redactor", "stream")
        }
        if spec.stream is not None:
            try:
                changes["stream"] = StreamPolicy(**msgspec.structs.asdict(spec.stream))
            except LedgerPolicyError as exc:
                raise ConfigError(f"{at}.stream: {exc}") from None
        overrides[tool] = changes
        if spec.redactor is not None:
            redactors[tool] = _import(spec.redactor, f"{at}.redactor")
    try:
        return ToolGroup(
            name,
            adapters=table.adapters,
            mcp_server=table.mcp_server,
            tool_prefix=table.tool_prefix,
            policy=policy,
            pool_size=table.pool_size,
            pool_min=table.pool_min,
            max_in_flight=table.max_in_flight,
            max_calls_per_worker=table.max_calls_per_worker,
            cancel_grace=table.cancel_grace,
            secrets=secrets,
            secrets_as=table.secrets_as,
            overrides={k: v for k, v in overrides.items() if v},
            redactors=redactors,
        )
    except ValueError as exc:  # the group's own check: it names the group and the field
        raise ConfigError(f"{where}: {str(exc).removeprefix(f'group {name!r}: ')}") from None


def _policy(table: SandboxTable, where: str) -> SandboxPolicy:
    at = f"{where}.sandbox"
    network: bool | NetworkAllowlist = table.network if isinstance(table.network, bool) else False
    if isinstance(table.network, list):
        connections = table.network_max_connections
        try:
            network = NetworkAllowlist(
                tuple(table.network),
                max_connections=None if connections == "none" else connections,
                max_bytes=_size(table.network_max_bytes, f"{at}.network_max_bytes"),
                hosts=table.network_hosts,
            )
        except PolicyError as exc:
            key = "network_hosts" if "network hosts" in str(exc) else "network"
            raise ConfigError(f"{at}.{key}: {exc}") from None
    elif table.network_hosts:
        raise ConfigError(f"{at}.network_hosts: expected only with a network list")
    binds: list[Bind] = []
    for key, specs in (("ro_binds", table.ro_binds), ("binds", table.binds)):
        for index, spec in enumerate(specs):
            try:
                binds.append(Bind.parse(spec, writable=key == "binds"))
            except PolicyError as exc:
                raise ConfigError(f"{at}.{key}[{index}]: {exc}") from None
    try:
        return SandboxPolicy(
            network=network,
            env={**DEFAULT_ENV, **table.env},
            binds=tuple(binds),
            memory_bytes=_size(table.memory, f"{at}.memory"),
            pids=None if table.pids == "none" else table.pids,
            cpu_seconds=table.cpu_seconds,
            tmpfs_bytes=_size(table.tmpfs, f"{at}.tmpfs", allow_none=False) or 0,
            open_files=table.open_files,
            file_size_bytes=_size(table.file_size, f"{at}.file_size"),
            address_space_bytes=_size(table.address_space, f"{at}.address_space"),
            limits="per-process" if table.per_process_limits else "cgroup",
        )
    except PolicyError as exc:
        raise ConfigError(f"{at}: {exc}") from None


def _size(value: int | str, where: str, *, allow_none: bool = True) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "none" and allow_none:
            return None
        match = _SIZE.match(text)
        if match and int(match.group(1)) > 0:
            return int(match.group(1)) * _UNITS[match.group(2).upper()]
    either = ' or "none"' if allow_none else ""
    raise ConfigError(f"{where}: expected a size like 512M{either}, got {value!r}")


def _import(spec: str, where: str) -> Callable[[str], str]:
    module, colon, attr = spec.partition(":")
    if not colon or not module or not attr:
        raise ConfigError(f"{where}: expected MODULE:ATTR, got {spec!r}")
    try:
        value = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: cannot import {spec}: {exc}") from None
    if not callable(value):
        raise ConfigError(f"{where}: {spec} is not callable")
    return value  # type: ignore[no-any-return]


T = TypeVar("T")


def _convert(data: Any, kind: type[T], where: str) -> T:
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        raise ConfigError(_say(str(exc), where)) from None


_AT = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?\Z")
_KINDS = {
    "`int`": "an integer",
    "`str`": "a string",
    "`float`": "a number",
    "`bool`": "true or false",
    "`array`": "a list",
    "`object`": "a table",
}


_CHOICES = {
    "secrets_as": "'env' or 'file'",
    "pids": 'an integer >= 1 or "none"',
    "network_max_connections": 'an integer >= 1 or "none"',
}


def _say(message: str, where: str) -> str:
    """msgspec's message as 'KEY: expected ..., got ...'."""
    match = _AT.match(message)
    assert match is not None
    what, path = match.group("what"), (match.group("path") or "").lstrip(".")
    key = ".".join(p for p in (where, path) if p)
    unknown = re.match(r"Object contains unknown field `(.*)`", what)
    if unknown:
        return f"{key}.{_key(unknown.group(1))}: not a known key".lstrip(".")
    enum = re.match(r"Invalid enum value (.*)", what)
    if enum:
        choices = _CHOICES.get(key.rsplit(".", 1)[-1], "one of the values docs/groups.md lists")
        return f"{key}: expected {choices}, got {enum.group(1)}"
    missing = re.match(r"Object missing required field `(.*)`", what)
    if missing:
        return f"{key}.{missing.group(1)}: required, missing".lstrip(".")
    expected = what.removeprefix("Expected ").replace("`bool | array`", "true, false or a list")
    for raw, words in _KINDS.items():
        expected = expected.replace(raw, words)
    expected = expected.replace("`", "").replace("|", "or").replace(", got", ", got")
    return f"{key or 'the file'}: expected {expected}"
