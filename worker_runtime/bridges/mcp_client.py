"""The MCP client side of the bridge, sans I/O: JSON-RPC lines in, events and lines out.

`McpClient` speaks MCP over stdio to one untrusted server: ``initialize``, the
``initialized`` notification, ``tools/list`` (every page), then ``tools/call`` with a
``progressToken`` per call and ``notifications/cancelled`` to cancel one. What the server
sends is judged here, in one place:

==========================================  =============================================
from the server                             what it becomes
==========================================  =============================================
a response to a request we made             `Initialized`, `ToolsListed`, `CallEnded`
a response to an id we never used, or twice `McpViolation` (fatal: the server is replaced)
a line that is not one JSON-RPC object      `McpViolation`
a line over `MAX_MESSAGE_BYTES`             `McpViolation` (the reader stops at the cap)
``notifications/progress`` of a live call   `Progress` (a chunk)
``notifications/tools/list_changed``        `ToolsChanged`
``notifications/message``                   `Log`
``ping``                                    the answer ``{}``
any other request (``sampling/createMessage``,  an error answer: refused, there is no model
``elicitation/create``, ``roots/list`` ...)     or user behind the sandbox
==========================================  =============================================

A call's result becomes one JSON value (the bridge's tools are json tools):
``structuredContent`` as it is; text-only content as ``{"text": ...}``; other content
(images, resources) as ``{"content": [...]}``, each block with its MIME type. ``isError``
is a failure whose message is the server's text, sanitised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from ..protocol.limits import MAX_ID_BYTES

PROTOCOL_VERSION = "2025-11-25"
#: Versions whose ``tools/call`` and notifications this client understands.
KNOWN_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
#: One MCP message from the server, in bytes; beyond it the server is replaced.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: Pages of ``tools/list`` and tools served at most.
MAX_PAGES = 64
MAX_TOOLS = 1024
#: Error codes of JSON-RPC and MCP that the bridge uses or maps.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029]")


class McpViolation(Exception):
    """The server broke the protocol: fatal for it (the host replaces the sandbox)."""


# -- JSON-RPC, as the server sends it ------------------------------------------------------


class RpcError(msgspec.Struct, frozen=True):
    code: int
    message: str
    data: Any = None


class Incoming(msgspec.Struct, frozen=True, omit_defaults=True):
    """One JSON-RPC 2.0 message: a request (``id`` + ``method``), a notification
    (``method``), or a response (``id`` + exactly one of ``result``/``error``)."""

    jsonrpc: Literal["2.0"]
    id: int | str | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: RpcError | None = None


class ToolEntry(msgspec.Struct, frozen=True):
    """One tool of ``tools/list`` (fields the bridge does not use are ignored)."""

    name: str
    inputSchema: dict[str, Any]
    description: str | None = None
    title: str | None = None


class ToolsPage(msgspec.Struct, frozen=True):
    tools: list[ToolEntry]
    nextCursor: str | None = None


class CallToolResult(msgspec.Struct, frozen=True):
    content: list[dict[str, Any]] = []
    structuredContent: dict[str, Any] | None = None
    isError: bool = False


class InitializeResult(msgspec.Struct, frozen=True):
    protocolVersion: str
    capabilities: dict[str, Any]
    serverInfo: dict[str, Any] | None = None


_decode_incoming = msgspec.json.Decoder(Incoming).decode
_encode = msgspec.json.Encoder().encode


# -- events ------------------------------------------------------------------------------


class Tool(msgspec.Struct, frozen=True):
    """A served tool: its sandvisor id, the server's own name, what it says of itself."""

    id: str
    name: str
    description: str
    schema: dict[str, Any]


class Initialized(msgspec.Struct, frozen=True):
    version: str
    server: str


class ToolsListed(msgspec.Struct, frozen=True):
    tools: list[Tool]


class CallEnded(msgspec.Struct, frozen=True):
    """A ``tools/call`` answered. ``kind``: ``result`` (``value``), ``tool_error`` (the
    tool's ``isError``), ``rpc_error`` (a JSON-RPC error answer; ``code``)."""

    rid: str
    kind: Literal["result", "tool_error", "rpc_error"]
    value: Any = None
    message: str = ""
    code: int = 0


class Progress(msgspec.Struct, frozen=True):
    rid: str
    text: str


class ToolsChanged(msgspec.Struct, frozen=True):
    pass


class Log(msgspec.Struct, frozen=True):
    text: str


Event = Initialized | ToolsListed | CallEnded | Progress | ToolsChanged | Log


# -- the client --------------------------------------------------------------------------


class McpClient:
    """One MCP session with one server. Each method returns the exact bytes to write to
    the server's stdin (possibly none); `receive` also returns events."""

    def __init__(
        self, client_name: str = "sandvisor", client_version: str = "0", *, prefix: str = ""
    ) -> None:
        self._info = {"name": client_name, "version": client_version}
        self._prefix = prefix
        self._next_id = 0
        #: request id -> what it asked: "initialize", "tools/list", or the call's rid
        self._pending: dict[int, str] = {}
        self._calls: dict[str, int] = {}  # rid -> request id
        self._listed: list[ToolEntry] = []
        self._pages = 0
        self.version: str | None = None
        self.ready = False

    # -- what we send ----------------------------------------------------------------------

    def start(self) -> bytes:
        """The ``initialize`` request. No sampling, elicitation or roots capability: there
        is no model or user behind the sandbox."""
        params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": self._info}
        return self._request("initialize", params, "initialize")

    def call(self, rid: str, name: str, arguments: dict[str, Any]) -> bytes:
        """``tools/call`` of the server's tool ``name``; its progress is tagged ``rid``."""
        if rid in self._calls:
            raise ValueError(f"call {rid!r} is already in flight")
        params = {"name": name, "arguments": arguments, "_meta": {"progressToken": rid}}
        line = self._request("tools/call", params, rid)
        self._calls[rid] = self._next_id
        return line

    def cancel(self, rid: str, reason: str) -> bytes:
        """``notifications/cancelled`` for call ``rid`` (nothing if it already ended)."""
        request_id = self._calls.get(rid)
        if request_id is None:
            return b""
        return _line(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": reason},
            }
        )

    def in_flight(self, rid: str) -> bool:
        return rid in self._calls

    def _request(self, method: str, params: dict[str, Any], purpose: str) -> bytes:
        self._next_id += 1
        self._pending[self._next_id] = purpose
        return _line({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})

    # -- what we receive -----------------------------------------------------------------

    def receive(self, line: bytes) -> tuple[list[Event], bytes]:
        """Judge one line from the server: the events it means and the bytes to answer.
        Raises `McpViolation` for anything that breaks the protocol."""
        if not line.strip():
            return [], b""
        if len(line) > MAX_MESSAGE_BYTES:
            raise McpViolation(f"a message of {len(line)} bytes, over {MAX_MESSAGE_BYTES}")
        try:
            msg = _decode_incoming(line)
        except msgspec.DecodeError as exc:
            raise McpViolation(f"not a JSON-RPC 2.0 message: {exc}") from None
        if msg.method is not None:
            if msg.result is not None or msg.error is not None:
                raise McpViolation("a request or notification that carries a result")
            if msg.id is None:
                return self._notification(msg.method, msg.params or {}), b""
            return [], self._answer(msg.id, msg.method)
        if msg.id is None or (msg.result is None) == (msg.error is None):
            raise McpViolation("a response needs an id and exactly one of result or error")
        purpose = self._pending.pop(msg.id, None) if isinstance(msg.id, int) else None
        if purpose is None:
            raise McpViolation(f"an answer to request {msg.id!r}, which was never made")
        if purpose == "initialize":
            return self._initialized(msg)
        if purpose == "tools/list":
            return self._tools_page(msg)
        del self._calls[purpose]
        return [_call_end(purpose, msg)], b""

    def _answer(self, request_id: int | str, method: str) -> bytes:
        """A request from the server: ``ping`` is answered, everything else refused."""
        if method == "ping":
            return _line({"jsonrpc": "2.0", "id": request_id, "result": {}})
        why = (
            f"sandvisor: {_clip(method, 100)} is refused: the server runs in a sandbox with no "
            "model, user or client features behind it"
        )
        error = {"code": METHOD_NOT_FOUND, "message": why}
        return _line({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _notification(self, method: str, params: dict[str, Any]) -> list[Event]:
        if method == "notifications/progress":
            token = params.get("progressToken")
            if isinstance(token, str) and token in self._calls:
                shown = {k: params[k] for k in ("progress", "total", "message") if k in params}
                return [Progress(token, _encode(shown).decode())]
            return []  # late, or for a request of the server's own: nothing to stream
        if method == "notifications/tools/list_changed":
            return [ToolsChanged()]
        if method == "notifications/message":
            level = str(params.get("level", "info"))
            data = params.get("data")
            text = data if isinstance(data, str) else _encode(data).decode()
            return [Log(sanitise(f"{_clip(level, 16)}: {text}", 1000))]
        return []

    def _initialized(self, msg: Incoming) -> tuple[list[Event], bytes]:
        if msg.error is not None:
            raise McpViolation(f"the server refused initialize: {sanitise(msg.error.message, 500)}")
        try:
            result = msgspec.convert(msg.result, InitializeResult)
        except msgspec.ValidationError as exc:
            raise McpViolation(f"a bad initialize result: {exc}") from None
        if result.protocolVersion not in KNOWN_VERSIONS:
            raise McpViolation(
                f"the server speaks MCP {_clip(result.protocolVersion, 40)!r}, which this "
                f"bridge does not (it knows {', '.join(sorted(KNOWN_VERSIONS))})"
            )
        if "tools" not in result.capabilities:
            raise McpViolation("the server offers no tools (no tools capability)")
        self.version = result.protocolVersion
        info = result.serverInfo or {}
        server = sanitise(f"{info.get('name', '?')} {info.get('version', '')}".strip(), 200)
        notice = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return [Initialized(result.protocolVersion, server)], notice + self.list_tools()

    def list_tools(self, cursor: str | None = None) -> bytes:
        """``tools/list``, from the first page unless ``cursor`` is given."""
        if cursor is None:
            self._listed, self._pages = [], 0
        params = {} if cursor is None else {"cursor": cursor}
        return self._request("tools/list", params, "tools/list")

    def _tools_page(self, msg: Incoming) -> tuple[list[Event], bytes]:
        if msg.error is not None:
            raise McpViolation(f"tools/list failed: {sanitise(msg.error.message, 500)}")
        try:
            page = msgspec.convert(msg.result, ToolsPage)
        except msgspec.ValidationError as exc:
            raise McpViolation(f"a bad tools/list result: {exc}") from None
        self._listed += page.tools
        self._pages += 1
        if len(self._listed) > MAX_TOOLS or self._pages > MAX_PAGES:
            raise McpViolation(f"the server lists more than {MAX_TOOLS} tools or {MAX_PAGES} pages")
        if page.nextCursor is not None:
            return [], self.list_tools(page.nextCursor)
        self.ready = True
        return [ToolsListed(name_tools(self._listed, self._prefix))], b""


def _call_end(rid: str, msg: Incoming) -> CallEnded:
    if msg.error is not None:
        return CallEnded(
            rid, "rpc_error", message=sanitise(msg.error.message) or "error", code=msg.error.code
        )
    try:
        result = msgspec.convert(msg.result, CallToolResult)
    except msgspec.ValidationError as exc:
        raise McpViolation(f"a bad tools/call result: {exc}") from None
    if result.isError:
        return CallEnded(rid, "tool_error", message=sanitise(_text_of(result.content)) or "error")
    return CallEnded(rid, "result", value=result_value(result))


def result_value(result: CallToolResult) -> dict[str, Any]:
    """The JSON value of a successful call (see the module's docstring)."""
    if result.structuredContent is not None:
        return result.structuredContent
    if all(block.get("type") == "text" for block in result.content):
        return {"text": _text_of(result.content)}
    return {"content": result.content}


def _text_of(content: Iterable[dict[str, Any]]) -> str:
    return "\n".join(str(block.get("text", "")) for block in content if block.get("type") == "text")


def sanitise(text: str, limit: int = 4000) -> str:
    """A server's text for a person: no control characters but tab and line feed, at
    most ``limit`` characters."""
    return _clip(_CONTROL.sub("", text), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _line(message: dict[str, Any]) -> bytes:
    return _encode(message) + b"\n"


# -- names ------------------------------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_ID = re.compile(r"[^a-z0-9._-]+")


def tool_id(name: str, prefix: str = "") -> str:
    """The sandvisor id of an MCP tool name: ``longRunningOperation`` ->
    ``long-running-operation``, other characters as ``-``, under ``prefix`` if given."""
    base = _NOT_ID.sub("-", _CAMEL.sub("-", name).lower()).strip("-.") or "tool"
    base = base[: MAX_ID_BYTES - len(prefix) - 8]
    return f"{prefix}{base}"


def name_tools(entries: Iterable[ToolEntry], prefix: str = "") -> list[Tool]:
    """Ids for the listed tools, unique (a clash gets ``-2``, ``-3``...); a tool listed
    twice is refused."""
    tools: list[Tool] = []
    seen: set[str] = set()
    taken: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            raise McpViolation(f"tools/list names {_clip(entry.name, 80)!r} twice")
        seen.add(entry.name)
        base = candidate = tool_id(entry.name, prefix)
        suffix = 1
        while candidate in taken:
            suffix += 1
            candidate = f"{base}-{suffix}"
        taken.add(candidate)
        text = entry.description or entry.title or ""
        tools.append(Tool(candidate, entry.name, sanitise(text, 8000), entry.inputSchema))
    return tools
