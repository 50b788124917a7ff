"""What the supervisor grants each tool, and how it learns which tools a worker serves.

The host never imports adapter modules (they are untrusted): with ``adapters=`` it runs
``python -m worker_runtime --describe`` once, in the same sandbox as the workers, and reads
a strict, bounded JSON description from fd 4: each tool as `ready` describes it (name,
format, cancellability, description, input schema; `ToolSpec`). Limits always come from
the host (`ToolPolicy`), never from the worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Literal

import anyio
import msgspec

from supervisor.ledger import StreamPolicy, ToolPolicy
from supervisor.workers.launcher import Launcher, StartedWorker, start_worker
from supervisor.workers.pipes import PipeStream
from supervisor.workers.secrets import Redactor
from supervisor.workers.session import Capture
from worker_runtime.protocol.errors import StateViolation
from worker_runtime.protocol.limits import MAX_LINE_BYTES
from worker_runtime.protocol.messages import Grant, StreamLimits, ToolSpec
from worker_runtime.protocol.payloads import check_spec

#: Calls a tool may be started over a supervisor's life (its ledger's budget).
UNLIMITED_CALLS = 2**62
#: Defaults for described tools: a payload must fit in one frame with room to spare.
DEFAULT_MAX_INPUT_BYTES = 512 * 1024
DEFAULT_MAX_OUTPUT_BYTES = 512 * 1024
DEFAULT_STREAM = StreamPolicy(
    max_chunks=256, max_chunk_bytes=16 * 1024, max_total_bytes=256 * 1024,
    max_emitted_bytes=256 * 1024,
)  # fmt: skip
#: Largest description accepted from a worker (untrusted input).
MAX_DESCRIPTION_BYTES = 256 * 1024
MAX_TOOLS = 1024


class DescribeError(Exception):
    """The worker's description could not be obtained or was not acceptable."""


class Description(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tools: list[ToolSpec]


def default_policy(name: str, fmt: Literal["text", "json"]) -> ToolPolicy:
    """The host's policy for a described tool nobody configured explicitly."""
    return ToolPolicy(
        name,
        format=fmt,
        max_calls=UNLIMITED_CALLS,
        max_input_bytes=DEFAULT_MAX_INPUT_BYTES,
        max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES,
        stream=DEFAULT_STREAM,
    )


def merge_policies(
    described: Iterable[ToolSpec] | None, explicit: Sequence[ToolPolicy]
) -> dict[str, ToolPolicy]:
    """The policy of every tool: a described tool gets `default_policy`, changed in the
    fields its explicit `ToolPolicy` names (``ToolPolicy("t", max_attempts=2)`` changes
    the attempts and nothing else); without a description the explicit policies are all.

    A tool configured explicitly but not served, or served in another format, is refused
    here (the worker would refuse the grant at ``open`` anyway, less clearly).
    """
    policies: dict[str, ToolPolicy] = {}
    for policy in explicit:
        if not isinstance(policy, ToolPolicy):
            raise TypeError(f"tools must be ToolPolicy values, not {type(policy).__name__}")
        if policy.name in policies:
            raise ValueError(f"tool {policy.name!r} is configured twice")
        policies[policy.name] = policy
    if described is None:
        return policies
    served = {info.name: info for info in described}
    for name, policy in policies.items():
        info = served.get(name)
        if info is None:
            raise ValueError(f"tool {name!r} is configured but the adapters do not serve it")
        if "format" in policy.named and info.format != policy.format:
            raise ValueError(
                f"tool {name!r} is configured as {policy.format} but served as {info.format}"
            )
    for name, info in served.items():
        base = default_policy(name, info.format)
        mine = policies.get(name)
        policies[name] = (
            base
            if mine is None
            else dataclasses.replace(base, **{f: getattr(mine, f) for f in mine.named})
        )
    return policies


def grant_for(policy: ToolPolicy, max_calls: int) -> Grant:
    """The per-session grant of a tool: the policy's limits, ``max_calls`` per session."""
    stream = policy.stream
    limits = None
    if stream is not None:
        limits = StreamLimits(
            max_chunks=stream.max_chunks,
            max_chunk_bytes=stream.max_chunk_bytes,
            max_total_bytes=stream.max_total_bytes,
        )
    return Grant(
        tool=policy.name,
        format=policy.format,
        max_calls=max_calls,
        max_input_bytes=policy.max_input_bytes,
        max_output_bytes=policy.max_output_bytes,
        stream=limits,
    )


def parse_description(data: bytes) -> list[ToolSpec]:
    """Strictly decode a worker's description (one JSON line)."""
    if len(data) > MAX_DESCRIPTION_BYTES:
        raise DescribeError(f"the description exceeds {MAX_DESCRIPTION_BYTES} bytes")
    line, newline, rest = data.partition(b"\n")
    if not newline or rest.strip():
        raise DescribeError("the description must be exactly one JSON line")
    try:
        tools = msgspec.json.decode(line, type=Description).tools
    except msgspec.DecodeError as exc:
        raise DescribeError(f"the description is not valid: {exc}") from None
    if len(tools) > MAX_TOOLS:
        raise DescribeError(f"the worker describes more than {MAX_TOOLS} tools")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise DescribeError("the description lists a tool twice")
    for spec in tools:
        try:
            check_spec(spec)
        except StateViolation as exc:
            raise DescribeError(str(exc)) from None
    return tools


async def describe(
    launcher: Launcher,
    timeout: float,
    what: str = "the adapters",
    redact: Redactor | None = None,
) -> list[ToolSpec]:
    """Run the describe command through ``launcher`` and parse what it writes to fd 4."""
    tools, _ = await _describe(launcher, timeout, what, redact, keep=False)
    return tools


async def describe_and_keep(
    launcher: Launcher,
    timeout: float,
    what: str = "the MCP server",
    redact: Redactor | None = None,
) -> tuple[list[ToolSpec], StartedWorker | None]:
    """`describe`, with a describer that goes on to serve (the MCP bridge's
    ``--describe``): once its description is read, the worker is held for a session,
    its fd 3 open for the bootstrap (None if it exited instead)."""
    return await _describe(launcher, timeout, what, redact, keep=True)


async def _describe(
    launcher: Launcher, timeout: float, what: str, redact: Redactor | None, *, keep: bool
) -> tuple[list[ToolSpec], StartedWorker | None]:
    spawned, host_ends = await start_worker(launcher)
    to_worker, *ends = host_ends
    if not keep:
        os.close(to_worker)  # the describer reads nothing: EOF on its fd 3
    reader, stdout, stderr = (PipeStream(fd) for fd in ends)
    data = bytearray()
    diagnostics = Capture(4096)
    code: int | None = None
    kept: StartedWorker | None = None
    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as nursery:
                nursery.start_soon(_keep, stdout, Capture(0))
                nursery.start_soon(_keep, stderr, diagnostics)
                while chunk := await reader.receive_some(65536):
                    data += chunk
                    if len(data) > MAX_DESCRIPTION_BYTES or (keep and b"\n" in data):
                        break
                if keep and b"\n" in data and len(data) <= MAX_DESCRIPTION_BYTES:
                    nursery.cancel_scope.cancel()  # it waits for its bootstrap: keep it
                else:
                    code = await spawned.wait()
        if scope.cancelled_caught:
            raise DescribeError(f"describing {what} took longer than {timeout} s")
        if code is not None and code != 0:
            detail = " | ".join(diagnostics.text().strip().splitlines()[-3:])
            if redact is not None:  # what a worker printed may hold the group's secrets
                detail = redact.text(detail)
            raise DescribeError(
                f"describing {what} failed (exit status {code})" + (f": {detail}" if detail else "")
            )
        tools = parse_description(bytes(data))
        if keep and code is None:
            kept = StartedWorker(spawned, host_ends, bytes(diagnostics.kept))
        return tools, kept
    finally:
        if kept is None:
            with anyio.CancelScope(shield=True):
                spawned.kill("describe_done")
                if code is None:
                    with anyio.move_on_after(5):
                        await spawned.wait()
                for stream in (reader, stdout, stderr):
                    with contextlib.suppress(Exception):
                        await stream.aclose()
                if keep:
                    with contextlib.suppress(OSError):
                        os.close(to_worker)
                await spawned.cleanup()


async def _keep(stream: PipeStream, capture: Capture) -> None:
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        while data := await stream.receive_some(65536):
            capture.feed(data)


assert MAX_DESCRIPTION_BYTES < MAX_LINE_BYTES
