"""JSON-RPC's error answers for the lines the MCP SDK would drop without a word.

The SDK's stdio transport hands a line it cannot validate to its session as an
exception, and the client never hears back: a ``tools/call`` with a lone surrogate escape
waited for ever. `checked_lines` validates each line with the SDK's own parser first; a
line that fails is answered here, ``-32700`` (parse error: not JSON, nested too deeply, a
lone surrogate) or ``-32600`` (invalid request: JSON, but no JSON-RPC message), with the
request's id where it can be read, and the session goes on.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec

from supervisor.commands.request_id import top_level_id

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def error_line(line: str) -> str | None:
    """The error answer for ``line``, or None when the SDK takes it."""
    from mcp import types

    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception as exc:  # pydantic's ValidationError, or anything its parser raises
        problem = " ".join(str(exc).split())[:300]
    data = line.encode("utf-8", "surrogatepass")
    try:
        msgspec.json.decode(data)
        code, message = INVALID_REQUEST, "Invalid Request"
    except (msgspec.DecodeError, RecursionError):
        code, message = PARSE_ERROR, "Parse error"
    rid = top_level_id(data)
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        rid = None
    answer: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {"code": code, "message": message, "data": problem},
    }
    return json.dumps(answer, ensure_ascii=True)


async def checked_lines(
    lines: AsyncIterable[str], answer: Callable[[str], Awaitable[None]]
) -> AsyncIterator[str]:
    """``lines`` without the ones the SDK would drop; each of those is answered through
    ``answer`` (one JSON line, without its newline)."""
    async for line in lines:
        error = error_line(line)
        if error is None:
            yield line
        else:
            await answer(error)
