"""The `sandvisor` command and its subcommands: ``cli`` dispatches to ``demo``, ``script``,
``tools`` (``tooldefs``), ``serve`` and ``mcp`` (``mcp_server``) here, and to ``doctor`` and
``exec``, which live in `sandbox`. Only the chosen subcommand's module is imported."""
