"""A tool group's secrets: where their values come from, and the redactor that keeps them
from leaving the supervisor.

A secret is given as a value (`Secret.of`), or as the name of a variable of the host's
environment read when the supervisor starts (`Secret.env`); a missing variable refuses
the start. The values reach only the group's sandboxes (as environment variables, never
on a command line, or as read-only files) and never show in a repr, an error message,
the journal or the audit log: every chunk, result value, error text and network audit
detail of the group passes `Redactor` first, which replaces each occurrence of a value
with ``[redacted:NAME]``.

Redaction is a safety net against a tool that prints what it holds, not a boundary
against one that means to leak it: a value it encodes, splits across chunks or sends
over its allowed network is not recognised.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from worker_runtime.protocol.messages import Failed, Status, Succeeded

#: Shorter values would be found by accident in ordinary output.
MIN_SECRET_CHARS = 8
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

Delivery = Literal["env", "file"]
#: Where a group's secrets are, as files (one per secret, named after it).
SECRETS_DIR = "/run/sandvisor/secrets"


class SecretError(ValueError):
    """A secret that cannot be used; the message names it, never its value."""


@dataclass(frozen=True, slots=True)
class Secret:
    """A secret's source: a value, or a host environment variable (read at start)."""

    value: str | None = None
    env: str | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.env is None):
            raise SecretError("a secret is a value or a host environment variable, not both")
        if self.env is not None and not _NAME.match(self.env):
            raise SecretError(f"{self.env!r} is not an environment variable name")

    def __repr__(self) -> str:
        return "Secret(<value>)" if self.value is not None else f"Secret(env={self.env!r})"

    @classmethod
    def of(cls, value: str) -> Secret:
        return cls(value=value)

    @classmethod
    def from_env(cls, name: str) -> Secret:
        return cls(env=name)


SecretSpec = str | Secret


def check_names(secrets: Mapping[str, SecretSpec]) -> None:
    """Names are variable names, sources strings or `Secret` (values are read later)."""
    for name, spec in secrets.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise SecretError(f"secret name {name!r} is not an environment variable name")
        if not isinstance(spec, str | Secret):
            raise SecretError(f"secret {name}: expected a string or a Secret")


def resolve(
    secrets: Mapping[str, SecretSpec], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """NAME -> value, checked: names are variable names, values long enough, present."""
    environ = os.environ if environ is None else environ
    check_names(secrets)
    values: dict[str, str] = {}
    for name, spec in secrets.items():
        source = Secret.of(spec) if isinstance(spec, str) else spec
        if source.env is not None:
            value = environ.get(source.env)
            if value is None:
                raise SecretError(f"secret {name}: the host's ${source.env} is not set")
        else:
            assert source.value is not None
            value = source.value
        if len(value) < MIN_SECRET_CHARS or "\0" in value:
            raise SecretError(
                f"secret {name}: a value must be at least {MIN_SECRET_CHARS} characters "
                "without NUL (a shorter one could not be told apart in output to redact it)"
            )
        values[name] = value
    return values


class Redactor:
    """Replaces every secret value in text, and in the strings of a JSON value."""

    __slots__ = ("_pattern", "_replacement")

    def __init__(self, secrets: Mapping[str, str]) -> None:
        # longest first: a value that contains another is replaced whole
        ordered = sorted(secrets.items(), key=lambda item: -len(item[1]))
        self._pattern = re.compile("|".join(re.escape(value) for _, value in ordered))
        names = {value: name for name, value in ordered}
        self._replacement: Callable[[re.Match[str]], str] = lambda match: (
            f"[redacted:{names[match.group(0)]}]"
        )

    def text(self, text: str) -> str:
        if not isinstance(text, str):
            return text
        return self._pattern.sub(self._replacement, text)

    def value(self, value: Any) -> Any:
        """A JSON value with every string (keys too) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.text(k): self.value(v) for k, v in value.items()}
        return value

    def status(self, status: Status) -> Status:
        """A worker's reconcile answer, redacted (its value, or its failure's message)."""
        if isinstance(status, Succeeded):
            payload = status.payload
            return Succeeded(payload=type(payload)(value=self.value(payload.value)))
        if isinstance(status, Failed):
            return Failed(message=self.text(status.message))
        return status


def redactor_for(values: Mapping[str, str]) -> Redactor | None:
    """The redactor of a group's secrets; None without secrets (nothing to do, no cost)."""
    return Redactor(values) if values else None


def delivery(values: Mapping[str, str], how: Delivery) -> dict[str, dict[str, str]]:
    """`sandbox.Command` fields that hand ``values`` to a sandbox: ``private_env`` (never
    on a command line) or ``files`` under `SECRETS_DIR`."""
    if not values:
        return {}
    if how == "file":
        return {"files": {f"{SECRETS_DIR}/{name}": value for name, value in values.items()}}
    return {"private_env": dict(values)}
