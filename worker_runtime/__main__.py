"""``python -m worker_runtime --adapters MOD:ATTR [--adapters ...] [--fd-in N --fd-out M]``

Reads the bootstrap and frames on fd 3 (or N), writes frames to fd 4 (or M); stdout and
stderr are diagnostics only. Exit status: 0 after close, 2 after a fatal violation, 3 when
the session never started (bad bootstrap, bad arguments, adapters that do not load, the
network forwarder that cannot start); no frame is written in the last case. A ten-line
parser instead of argparse: start-up time.

``--describe`` runs no session: it writes one JSON line to fd 4 (or M), ``{"tools":
[tool, ...]}`` with each tool as `ready` describes it (spec section 6), and exits 0. The
host reads it from a sandboxed run to learn what to grant, without importing untrusted
adapter modules itself.

With ``$SANDVISOR_JOURNAL`` set (the host bound a journal directory for effectful
adapters, spec section 11), the worker journals their calls there; a journal directory
it cannot open stops it before the session (exit 3).

With ``$SANDVISOR_NET_SOCKET`` set (the sandbox has a network allowlist), the loopback
forwarder to the host's proxy starts before any adapter loads (`worker_runtime.netforward`).
"""

from __future__ import annotations

import importlib
import os
import sys

from . import __version__
from .adapters import AdapterRegistry
from .driver import EXIT_BOOTSTRAP, WorkerDriver, exit_now
from .journal import JournalError, WorkerJournal

USAGE = (
    "usage: python -m worker_runtime --adapters MODULE:ATTR [...] [--fd-in N --fd-out M]"
    " [--describe]"
)


class UsageError(Exception):
    pass


def parse_args(argv: list[str]) -> tuple[list[str], int, int]:
    """The ``--adapters`` specs and the two protocol fds."""
    specs: list[str] = []
    fds = {"--fd-in": 3, "--fd-out": 4}
    args = iter(argv)
    for arg in args:
        if arg == "--describe":
            continue
        name, eq, inline = arg.partition("=")
        if name not in ("--adapters", *fds):
            raise UsageError(f"unknown argument {arg!r}")
        value = inline if eq else next(args, None)
        if value is None:
            raise UsageError(f"{name} needs a value")
        if name == "--adapters":
            specs.append(value)
        elif value.isdigit() and int(value) > 2:
            fds[name] = int(value)
        else:
            raise UsageError(f"{name} must be a file descriptor number above 2")
    if not specs:
        raise UsageError("at least one --adapters MODULE:ATTR is required")
    if fds["--fd-in"] == fds["--fd-out"]:
        raise UsageError("--fd-in and --fd-out must differ")
    return specs, fds["--fd-in"], fds["--fd-out"]


def load_registry(specs: list[str]) -> AdapterRegistry:
    """Import each ``MODULE:ATTR`` and merge the registries (a tool served twice fails)."""
    merged = AdapterRegistry()
    for spec in specs:
        module_name, colon, attr = spec.partition(":")
        if not colon or not module_name or not attr:
            raise UsageError(f"--adapters {spec!r} is not MODULE:ATTR")
        registry = getattr(importlib.import_module(module_name), attr, None)
        if not isinstance(registry, AdapterRegistry):
            raise UsageError(f"{spec} is not an AdapterRegistry")
        merged.update(registry)
    return merged


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if os.environ.get("SANDVISOR_NET_SOCKET"):  # a network allowlist: before any adapter
        from . import netforward

        try:
            netforward.start()
        except OSError as exc:  # fail closed: no worker without its way out
            print(f"worker_runtime: cannot offer the network proxy: {exc}", file=sys.stderr)
            return EXIT_BOOTSTRAP
    try:
        specs, fd_in, fd_out = parse_args(argv)
        registry = load_registry(specs)
    except UsageError as exc:
        print(f"worker_runtime: {exc}\n{USAGE}", file=sys.stderr)
        return EXIT_BOOTSTRAP
    except Exception as exc:  # an adapter module that fails to import
        print(f"worker_runtime: cannot load adapters: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_BOOTSTRAP
    if "--describe" in argv:
        return describe(registry, fd_out)
    try:
        journal = WorkerJournal.from_env()
    except JournalError as exc:  # bound by the host, yet unusable: fail closed
        print(f"worker_runtime: {exc}", file=sys.stderr)
        return EXIT_BOOTSTRAP
    return WorkerDriver(registry, fd_in, fd_out, version=__version__, journal=journal).run()


def describe(registry: AdapterRegistry, fd_out: int) -> int:
    """Write the served tools as one JSON line to ``fd_out``."""
    import msgspec

    data = msgspec.json.encode({"tools": [a.spec() for a in registry]}) + b"\n"
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd_out, view) :]
    except OSError as exc:
        print(f"worker_runtime: cannot write the description: {exc}", file=sys.stderr)
        return EXIT_BOOTSTRAP
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
