"""``python .../worker_runtime/bridges/mcp_boot.py [options] -- COMMAND [ARGS...]`` (or
``-m worker_runtime.bridges.mcp_boot``): the MCP bridge (`mcp`), entered so that its
server starts before the bridge's own modules load. The sandbox runs it by its path: with
``-m``, runpy's own imports (importlib.util, contextlib: ~10 ms) would come first.

A server takes hundreds of milliseconds to start (node loading its packages); the bridge's
modules (msgspec, the protocol, the MCP client) take tens more. Here the bridge guards
itself and starts the server with nothing loaded but ``os`` and ``ctypes`` (`mcp_child`),
and then loads the rest while the server starts: a sandboxed server's cold start is
then the sandbox and a bare interpreter's start, not the bridge's whole import, ahead of
the server's own. Everything else, options and errors included, is `mcp`'s.
"""

from __future__ import annotations

import os
import sys

from worker_runtime.bridges.mcp_child import Server, StartError, hop, start_server

EXIT_BOOTSTRAP = 3  # mcp.EXIT_BOOTSTRAP, not imported: that would load the bridge first


def main(args: list[str]) -> int:
    hop("python")
    server: Server | None = None
    argv = args[args.index("--") + 1 :] if "--" in args else []
    if argv:  # else the bridge says what is wrong with the arguments
        try:
            server = start_server(argv)
        except StartError as exc:
            os.write(2, f"sandvisor mcp bridge: {exc}\n".encode())
            return EXIT_BOOTSTRAP
        hop("spawned")
    from worker_runtime.bridges.mcp import main as bridge

    hop("bridge_loaded")
    return bridge(args, server)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
