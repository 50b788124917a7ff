"""What an adapter author sees: `AdapterRegistry`, `Context`, `Cancelled` and typed errors.

An adapter is a plain synchronous function ``fn(value, ctx) -> value`` that the driver runs
on its own thread. It acknowledges a cancel by raising `Cancelled`; it reports a failure
it chose by raising an `AdapterError` (whose message it means the host to see); anything
else it raises becomes a sanitised ``adapter_error``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

import msgspec

from .protocol.errors import StateViolation
from .protocol.limits import is_id
from .protocol.messages import ToolSpec
from .protocol.payloads import check_spec

AdapterFn = Callable[[Any, "Context"], Any]
Format = Literal["text", "json"]


class Cancelled(Exception):
    """Raised by an adapter to acknowledge a cancel: it stopped its effect and its I/O."""


class AdapterError(Exception):
    """A failure the adapter reports on purpose: its message reaches the host verbatim."""

    code = "adapter_error"
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            if not is_id(code):
                raise ValueError("error code must be 1..128 bytes of [a-z0-9._-]")
            self.code = code
        if retryable is not None:
            self.retryable = retryable


class InvalidInput(AdapterError):
    """The adapter refuses its input."""

    code = "invalid_input"


class DeadlineExceeded(AdapterError):
    """The adapter ran out of the time the host gave it (``ctx.deadline``)."""

    code = "deadline"


class Unavailable(AdapterError):
    """Something the adapter needs is unavailable now; trying again may work."""

    code = "unavailable"
    retryable = True


_TOKEN_LOCK = threading.Lock()


class _Token:
    """A cancellation flag that makes its `threading.Event` only when someone waits on
    it: most calls never wait, and an Event costs a Condition and two locks per call.

    `set` writes the flag before it looks for the event; `wait` publishes the event
    before it reads the flag: whichever order the two threads run in, a waiter sees the
    flag or is woken by the event.
    """

    __slots__ = ("_event", "flag")

    def __init__(self) -> None:
        self.flag = False
        self._event: threading.Event | None = None

    def set(self) -> None:
        self.flag = True
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None) -> bool:
        if self.flag:
            return True
        event = self._event
        if event is None:
            with _TOKEN_LOCK:
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
        if self.flag:
            return True
        return event.wait(timeout)


class Context:
    """One call's view of the session: its cancellation token, deadline and chunk stream."""

    __slots__ = (
        "_abort_hooks",
        "_emit",
        "_token",
        "attempt",
        "deadline",
        "idempotency_key",
        "rid",
        "tool",
    )

    def __init__(
        self,
        *,
        rid: str = "r1",
        tool: str = "tool",
        attempt: int = 1,
        idempotency_key: str = "key",
        deadline: float | None = None,
        emit: Callable[[str], bool] | None = None,
    ) -> None:
        self.rid = rid
        self.tool = tool
        self.attempt = attempt
        self.idempotency_key = idempotency_key
        #: `time.monotonic()` value by which the host wants an answer, or None.
        self.deadline = deadline
        self._token = _Token()
        self._emit = emit
        self._abort_hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """True once the host asked to cancel this call (or the session is going down)."""
        return self._token.flag

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Sleep until cancelled or ``timeout`` seconds pass; True if cancelled."""
        return self._token.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise `Cancelled` (the acknowledgement) if the token is set."""
        if self._token.flag:
            raise Cancelled()

    def remaining(self) -> float | None:
        """Seconds left before ``deadline`` (never negative), or None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def emit(self, text: str) -> bool:
        """Send a progress chunk; False (text dropped) once the grant's stream limit is hit."""
        if not isinstance(text, str):
            raise TypeError("ctx.emit takes a str")
        return self._emit(text) if self._emit is not None else False

    def on_abort(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run ``hook`` (fast, non-blocking) if the session dies while this call runs.

        The worker then exits at once; a hook is the last chance to kill what the call
        started (e.g. a process group). Returns a function that unregisters the hook.
        """
        self._abort_hooks.append(hook)

        def remove() -> None:
            if hook in self._abort_hooks:
                self._abort_hooks.remove(hook)

        return remove

    # -- driver side ---------------------------------------------------------------------

    def _cancel(self) -> None:
        self._token.set()

    def _abort(self) -> None:
        self._token.set()
        for hook in list(self._abort_hooks):
            with contextlib.suppress(Exception):
                hook()


class Adapter(NamedTuple):
    tool: str
    fn: AdapterFn
    format: Format
    cancellable: bool
    expose_errors: bool
    description: str = ""
    schema: dict[str, Any] | None = None
    effectful: bool = False

    def spec(self) -> ToolSpec:
        """How `ready` and ``--describe`` describe this tool."""
        return ToolSpec(
            self.tool,
            self.format,
            self.cancellable,
            self.description,
            self.schema,
            effectful=self.effectful,
        )


def _copy_schema(tool: str, schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A private JSON copy (later changes by the author cannot change what was described)."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise TypeError(f"tool {tool!r}: schema must be a JSON object (a dict)")
    try:
        copied = msgspec.json.decode(msgspec.json.encode(schema))
    except (TypeError, ValueError, msgspec.DecodeError) as exc:
        raise TypeError(f"tool {tool!r}: schema is not JSON: {exc}") from None
    assert isinstance(copied, dict)
    return copied


class AdapterRegistry:
    """Tools a worker serves. ``python -m worker_runtime --adapters MOD:ATTR`` loads one."""

    def __init__(self) -> None:
        self._adapters: dict[str, Adapter] = {}

    def adapter(
        self,
        tool: str,
        *,
        format: Format = "text",
        cancellable: bool = True,
        expose_errors: bool = False,
        description: str = "",
        schema: Mapping[str, Any] | None = None,
        effectful: bool = False,
    ) -> Callable[[AdapterFn], AdapterFn]:
        """Register the decorated function as the adapter of ``tool``.

        ``cancellable=False``: a cancel is answered ``unsupported`` and the call runs on.
        ``expose_errors=True``: an unexpected exception's text reaches the host.
        ``description``: what the tool does, as a model and a script's help show it.
        ``schema``: the JSON Schema of a json tool's input; the host shows it and checks
        each input against it before dispatch.
        ``effectful=True``: the call changes something outside the worker (a payment, a
        message, a file): the worker journals it before it runs and its answer after, so
        an idempotency key is never run twice and a fresh session can reconcile it
        (docs/protocol.md, "Effectful adapters").
        """

        def register(fn: AdapterFn) -> AdapterFn:
            self.add(
                tool,
                fn,
                format=format,
                cancellable=cancellable,
                expose_errors=expose_errors,
                description=description,
                schema=schema,
                effectful=effectful,
            )
            return fn

        return register

    def add(
        self,
        tool: str,
        fn: AdapterFn,
        *,
        format: Format = "text",
        cancellable: bool = True,
        expose_errors: bool = False,
        description: str = "",
        schema: Mapping[str, Any] | None = None,
        effectful: bool = False,
    ) -> None:
        if not is_id(tool):
            raise ValueError(f"tool name {tool!r} is not 1..128 bytes of [a-z0-9._-]")
        if format not in ("text", "json"):
            raise ValueError(f"format must be 'text' or 'json', not {format!r}")
        if tool in self._adapters:
            raise ValueError(f"tool {tool!r} is already registered")
        if not callable(fn):
            raise TypeError("an adapter must be callable")
        adapter = Adapter(
            tool,
            fn,
            format,
            bool(cancellable),
            bool(expose_errors),
            description,
            _copy_schema(tool, schema),
            bool(effectful),
        )
        try:
            msgspec.convert(msgspec.to_builtins(adapter.spec()), ToolSpec)
            check_spec(adapter.spec())
        except (msgspec.ValidationError, StateViolation) as exc:
            raise ValueError(f"tool {tool!r}: {exc}") from None
        self._adapters[tool] = adapter

    def update(self, other: AdapterRegistry) -> None:
        """Add every adapter of ``other`` (a tool served twice is an error)."""
        for adapter in other:
            self.add(
                adapter.tool,
                adapter.fn,
                format=adapter.format,
                cancellable=adapter.cancellable,
                expose_errors=adapter.expose_errors,
                description=adapter.description,
                schema=adapter.schema,
                effectful=adapter.effectful,
            )

    def get(self, tool: str) -> Adapter | None:
        return self._adapters.get(tool)

    def formats(self) -> Mapping[str, str]:
        """Tool -> payload format."""
        return {tool: a.format for tool, a in self._adapters.items()}

    def specs(self) -> Mapping[str, ToolSpec]:
        """Tool -> `ToolSpec`: what `WorkerConnection` checks grants against and `ready`
        and ``--describe`` report."""
        return {tool: a.spec() for tool, a in self._adapters.items()}

    def __iter__(self) -> Iterator[Adapter]:
        return iter(self._adapters.values())

    def __len__(self) -> int:
        return len(self._adapters)

    def __contains__(self, tool: object) -> bool:
        return tool in self._adapters
