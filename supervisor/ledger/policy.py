"""What a host allows an external tool to do: ``ToolPolicy`` and ``StreamPolicy``.

Both are frozen values checked at construction, so a ledger never holds a policy it
could not enforce (reference-splash.md 8.3 and 8.5).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeVar

from supervisor.ledger.errors import PolicyError

#: The wire protocol's id grammar (protocol.md section 5), used for tool names and keys.
ID_PATTERN = re.compile(r"[a-z0-9._-]{1,128}", re.ASCII)

PayloadFormat = Literal["text", "json"]


def check_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a valid wire id, else raise ``PolicyError``."""
    if not isinstance(value, str) or ID_PATTERN.fullmatch(value) is None:
        raise PolicyError(f"{kind} {value!r} must be 1..128 characters of [a-z0-9._-]")
    return value


def _positive_int(name: str, value: object) -> None:
    if type(value) is not int or value <= 0:
        raise PolicyError(f"{name} must be a positive integer, got {value!r}")


class RetryClass(StrEnum):
    """Why the host retries: the worker reported a retryable failure."""

    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"


@dataclass(frozen=True, slots=True)
class StreamPolicy:
    """Bounds of one operation's stream, counted over all its attempts.

    ``max_chunk_bytes`` and ``max_total_bytes`` count source bytes (before redaction),
    ``max_emitted_bytes`` what the redactor released.
    """

    max_chunks: int = 64
    max_chunk_bytes: int = 8 * 1024
    max_total_bytes: int = 64 * 1024
    max_emitted_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in ("max_chunks", "max_chunk_bytes", "max_total_bytes", "max_emitted_bytes"):
            _positive_int(f"StreamPolicy.{name}", getattr(self, name))
        if self.max_chunk_bytes > self.max_total_bytes:
            raise PolicyError("StreamPolicy.max_chunk_bytes must not exceed max_total_bytes")

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.max_chunks, self.max_chunk_bytes, self.max_total_bytes, self.max_emitted_bytes)


T = TypeVar("T")


def _remember_named(cls: type[T]) -> type[T]:
    """Wrap a dataclass's ``__init__`` so each value knows which fields its maker named
    (by position or keyword) in ``named``: a host that has defaults of its own changes
    only those (`supervisor.workers.grants.merge_policies`)."""
    init: Callable[..., None] = cls.__init__
    order = tuple(f.name for f in dataclasses.fields(cls) if f.init)  # type: ignore[arg-type]

    @functools.wraps(init)
    def __init__(self: T, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        object.__setattr__(self, "named", frozenset((*order[: len(args)], *kwargs)))

    cls.__init__ = __init__  # type: ignore[method-assign,assignment]
    return cls


@_remember_named
@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """One external tool's limits.

    ``max_calls`` bounds ``start`` over the ledger's life (a durable ledger's life spans
    restarts, so a crash loop cannot multiply the budget); ``max_attempts`` bounds
    dispatches of one operation; ``deadline`` (seconds) is measured from ``start``;
    ``contract`` is a JSON schema every json result must satisfy. ``named``: the fields
    given when it was made (the others are this class's defaults).
    """

    name: str
    format: PayloadFormat = "text"
    max_calls: int = 1
    max_attempts: int = 1
    max_input_bytes: int = 16 * 1024
    max_output_bytes: int = 64 * 1024
    deadline: float | None = None
    stream: StreamPolicy | None = None
    contract: dict[str, Any] | None = field(default=None, compare=False)
    named: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_id("tool name", self.name)
        if self.format not in ("text", "json"):
            raise PolicyError(f"format must be 'text' or 'json', got {self.format!r}")
        for name in ("max_calls", "max_attempts", "max_input_bytes", "max_output_bytes"):
            _positive_int(f"ToolPolicy.{name}", getattr(self, name))
        if self.deadline is not None and (
            type(self.deadline) not in (int, float)
            or not math.isfinite(self.deadline)
            or self.deadline <= 0
        ):
            raise PolicyError(
                f"deadline must be a positive number of seconds or None, got {self.deadline!r}"
            )
        if self.stream is not None and not isinstance(self.stream, StreamPolicy):
            raise PolicyError("stream must be a StreamPolicy or None")
        if self.contract is not None:
            if self.format != "json":
                raise PolicyError("a contract applies to json tools only")
            if not isinstance(self.contract, dict):
                raise PolicyError("contract must be a JSON schema (a dict)")
