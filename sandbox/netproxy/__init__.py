"""The network allowlist: a proxy in the host, reached through a Unix socket bound into
the sandbox, which has no network interface but loopback.

- `NetworkAllowlist` (``SandboxPolicy(network=[...])``): the patterns and per-call caps.
- Sans-IO core: `allowlist` (patterns, matching), `addresses` (which addresses are
  internal), `gate` (the decisions and call meters), `handshake` (HTTP CONNECT, HTTP
  forward and SOCKS5 as one state machine, with `http_head` and `socks5`).
- `server`: `ProxyServer` and its per-sandbox `Endpoint` (anyio: trio or asyncio), which
  only move bytes; `events.NetEvent`, one audit record per connection.
- `thread`: a server on a thread of its own, for synchronous hosts (``sandvisor exec``).
- `plan`: the command as the sandbox runs it (the endpoint bound in, the forwarder).

Inside the sandbox, ``worker_runtime.netforward`` offers the socket on a loopback port
and sets ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` for ordinary clients.
"""

from __future__ import annotations

from .policy import NetworkAllowlist

__all__ = ["NetworkAllowlist"]
