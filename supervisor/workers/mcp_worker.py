"""An MCP server as a kind of worker: the bridge's command and the runtime it needs.

The worker is ``python .../bridges/mcp_boot.py -- COMMAND ARGS`` in the group's
sandbox; the bridge runs COMMAND as its child there and serves its tools over the
authenticated protocol (why a bridge rather than the host speaking MCP to the sandboxed
process: the host keeps its authenticated protocol and every outcome rule unchanged).
What COMMAND needs to start is found on the host, without
running it, and bound read-only at its own path:

- the program (found on ``PATH``), a ``#!`` interpreter it names, and each argument
  that is an absolute path to a file (a script); a directory among the arguments (the
  data a server works on) is the caller's to bind (``--bind``/``--bind-ro``);
- for each of them, the tree it belongs to: a virtual environment (the directory with
  ``pyvenv.cfg``, plus the interpreter prefix its ``home`` names), a Node package tree
  (the directory holding the outermost ``node_modules``), a runtime's prefix (``node``
  in ``~/.nvm/.../bin`` binds ``~/.nvm/...``), else the file's own directory.

What the sandbox shows anyway (``/usr``, ``/bin``, ``/lib``...) is not bound again.
Nothing else of the host is visible; the network is the policy's. ``npx``/``uvx``, which
download at start, are refused with the way to install the package instead.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Sequence

from sandbox import Command, python_command
from sandbox.errors import PolicyError
from sandbox.policy import Bind, is_within
from sandbox.pyworker import SITE

BRIDGE = "worker_runtime.bridges.mcp_boot"
#: Seconds a cancelled MCP call has to be answered before its sandbox is killed.
MCP_CANCEL_GRACE = 0.25
#: Directories every sandbox shows already (sandbox/layout.py).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DOWNLOADERS = ("npx", "uvx", "pipx", "bunx")


def script_output(value: object) -> str:
    """An MCP tool's result as a script command prints it: the text of a text-only
    answer (with a final line feed), any other result as one compact JSON line."""
    if isinstance(value, dict) and set(value) == {"text"} and isinstance(value["text"], str):
        text = value["text"]
        return text if text.endswith("\n") or not text else text + "\n"
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n"


class McpServerError(ValueError):
    """The server command cannot be run in a sandbox as given; the message says why."""


def bridge_command(
    server: Sequence[str],
    *,
    describe: bool = False,
    prefix: str = "",
    start_timeout: float = 10.0,
    path: str | None = None,
    exclude: Sequence[str] = (),
) -> Command:
    """The worker's command: the bridge, with the server's runtime bound read-only
    (except where the policy binds something itself: ``exclude``, its destinations)."""
    server_argv, binds = server_runtime(server, path=path)
    binds = [b for b in binds if not any(is_within(b.dest, d) for d in exclude)]
    args = ["--describe"] if describe else []
    if prefix:
        args += ["--prefix", prefix]
    args += ["--start-timeout", f"{start_timeout:g}", "--", *server_argv]
    base = python_command(BRIDGE, args, modules=("msgspec",))
    # run by its path, not -m: runpy's own imports (importlib.util, contextlib...) would
    # come before the server's spawn
    at = base.argv.index("-m")
    script = posixpath.join(SITE, *BRIDGE.split(".")) + ".py"
    argv = (*base.argv[:at], script, *base.argv[at + 2 :])
    have = {b.dest for b in base.binds}
    extra = tuple(b for b in binds if b.dest not in have and not _covered(b.source, have))
    return Command(
        argv=argv,
        binds=(*base.binds, *extra),
        env=base.env,
        masks=base.masks,
        cwd=base.cwd,
        forwards_network=True,  # the bridge starts the loopback forwarder itself
    )


def server_runtime(
    server: Sequence[str], *, path: str | None = None
) -> tuple[list[str], list[Bind]]:
    """The server's argv with its program made absolute, and the read-only binds it needs."""
    if not server or not all(isinstance(a, str) and a for a in server):
        raise McpServerError("the MCP server command must be a non-empty list of strings")
    program = server[0]
    name = os.path.basename(program)
    if name in _DOWNLOADERS:
        raise McpServerError(
            f"{name} downloads the server when it starts, which a sandbox without network "
            f"cannot do and should not trust: install it first (npm install --prefix DIR "
            f"PACKAGE, or python -m venv DIR && DIR/bin/pip install PACKAGE) and give its "
            f"entry point (DIR/node_modules/.bin/NAME, DIR/bin/NAME)"
        )
    found = program if "/" in program else shutil.which(program, path=path)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise McpServerError(f"the MCP server program {program!r} is not an executable file")
    executable = os.path.abspath(found)  # not resolved: a venv's python is a symlink
    roots: list[str] = []
    # a path the host sees relative to its working directory means the same in the box
    server = [server[0], *(_absolute(a) for a in server[1:])]
    files = [a for a in server[1:] if a.startswith("/") and os.path.isfile(a)]
    for item in [executable, *_interpreters(executable, path), *files]:
        if os.path.exists(item):
            roots += _roots_of(item)
    binds: dict[str, Bind] = {}
    for root in roots:
        if any(root == s or root.startswith(s + "/") for s in _SYSTEM):
            continue
        if root not in binds and not _covered(root, binds):
            try:
                binds[root] = Bind(root)
            except PolicyError as exc:
                raise McpServerError(f"cannot bind {root} for the MCP server: {exc}") from None
    kept = {r: b for r, b in binds.items() if not _covered(r, {x for x in binds if x != r})}
    args = [os.path.realpath(a) if a.startswith("/") and os.path.exists(a) else a
            for a in server[1:]]  # fmt: skip
    return [executable, *args], list(kept.values())


def _absolute(arg: str) -> str:
    if arg.startswith(("/", "-")) or not os.path.exists(arg):
        return arg
    return os.path.abspath(arg)


def _covered(path: str, parents: set[str] | dict[str, Bind]) -> bool:
    return any(path != p and path.startswith(p.rstrip("/") + "/") for p in parents)


def _interpreters(executable: str, path: str | None) -> list[str]:
    """The interpreter a ``#!`` line names (``/usr/bin/env node`` -> node on PATH)."""
    try:
        with open(executable, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return []
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        named = next((w for w in words[1:] if not w.startswith("-")), None)
        found = shutil.which(named, path=path) if named else None
        return [found] if found else []
    return [words[0]]


def _roots_of(item: str) -> list[str]:
    """The trees ``item`` needs (see the module's docstring); real paths only."""
    real = os.path.realpath(item)
    found: list[str] = []
    for candidate in dict.fromkeys([os.path.abspath(item), real]):
        found += _tree_of(candidate)
    return [os.path.realpath(p) for p in found]


def _tree_of(path: str) -> list[str]:
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    node_root: str | None = None
    probe = directory
    while probe not in ("/", ""):
        if os.path.isfile(os.path.join(probe, "pyvenv.cfg")):
            return [probe, *_venv_home(probe)]
        if os.path.basename(probe) == "node_modules":
            node_root = os.path.dirname(probe)  # keep climbing: the outermost wins
        probe = os.path.dirname(probe)
    if node_root is not None:
        return [node_root]
    if os.path.basename(directory) == "bin" and directory != "/bin":  # a runtime's prefix
        return [os.path.dirname(directory)]  # node, python (never "/": /bin is the system's)
    return [directory]


def _venv_home(venv: str) -> list[str]:
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    home = os.path.realpath(value.strip())
                    return [os.path.dirname(home) if home.endswith("/bin") else home]
    except OSError:
        pass
    return []
