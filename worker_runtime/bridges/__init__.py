"""Bridges: what serves tools someone else implements, inside the sandbox.

- ``command``: an adapter that runs a program with a fixed argv per call;
- ``mcp``: a worker that runs a third-party stdio MCP server as its child and serves its
  tools: ``python -m worker_runtime.bridges.mcp_boot -- COMMAND ARGS`` (`mcp_boot` starts
  the server, then loads `mcp`, the bridge).
"""
