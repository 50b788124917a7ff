"""``sandvisor serve``: sandboxed tools for a host in any language, as JSON lines.

The host starts ``sandvisor serve`` and talks to it on its stdin and stdout (or connects
to ``--socket PATH``): ``hello`` names the adapters and sandbox options, then ``invoke``,
``cancel``, ``script``, ``audit``, ``pending``, ``reconcile``, ``ping``, ``shutdown``.
Events come back with the request's ``id``: ``started``, ``chunk``, ``outcome``,
``result``, ``audit``, ``error`` ... The protocol is in docs/serve-protocol.md and
docs/serve-protocol.schema.json.

While serving on stdio, fd 1 points at stderr and fd 0 at /dev/null, so nothing but
protocol lines can reach the host's pipe. SIGTERM and SIGINT stop the service in order
(running calls are cancelled cooperatively and still report); end of input does too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct

import trio

from supervisor.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_supervisor_options,
    config_groups,
    fail,
    policy_from,
)
from supervisor.commands.serve_session import ServeDefaults, ServeSession, serve_stream
from supervisor.commands.stdio import protocol_fds, stop_on_signals
from supervisor.workers.config_file import ConfigError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve sandboxed tools as JSON lines on stdin/stdout (or a Unix socket): a host in "
        "any language sends hello, invoke, cancel, script ... and reads events. "
        "See docs/serve-protocol.md."
    )
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="listen on a new Unix socket at PATH (mode 0600, same user only) instead of "
        "stdio; each connection is its own session",
    )
    parser.add_argument(
        "--schema", action="store_true", help="print the protocol's JSON Schema and exit"
    )
    add_supervisor_options(parser, adapters_required=False)
    parser.epilog = (
        "Options are defaults for the client's hello. Exit status: 0 after shutdown or end "
        "of input, 1 if the service could not run, 2 for bad usage."
    )


def defaults_from(args: argparse.Namespace) -> ServeDefaults:
    options: dict[str, object] = {}
    if args.cancel_grace is not None:
        options["cancel_grace"] = args.cancel_grace
    if args.audit_log:
        options["audit_log"] = args.audit_log
    return ServeDefaults(
        groups=config_groups(args),
        adapters=list(args.adapters),
        pool_size=args.pool_size,
        max_in_flight=args.max_in_flight,
        policy=policy_from(args),
        supervisor_options=options,
    )


def run(args: argparse.Namespace) -> int:
    if args.schema:
        from supervisor.commands.serve_wire import json_schema

        print(json.dumps(json_schema(), indent=2))
        return EXIT_OK
    try:
        defaults = defaults_from(args)
    except ConfigError as exc:
        return fail("serve", str(exc), EXIT_USAGE)
    except ValueError as exc:
        return fail("serve", str(exc))
    try:
        if args.socket:
            trio.run(serve_socket, args.socket, defaults)
        else:
            trio.run(serve_stdio, defaults)
    except ServeError as exc:
        return fail("serve", str(exc))
    except KeyboardInterrupt:
        return EXIT_FAILED
    return EXIT_OK


class ServeError(Exception):
    """The service could not run (the message says why)."""


# -- stdio ------------------------------------------------------------------------------------


async def serve_stdio(defaults: ServeDefaults) -> None:
    with protocol_fds() as (fd_in, fd_out):
        source = trio.lowlevel.FdStream(fd_in)
        sink = trio.lowlevel.FdStream(fd_out)
        async with source, sink, trio.open_nursery() as nursery:

            async def serve(task_status: trio.TaskStatus[ServeSession]) -> None:
                await serve_stream(source, sink, defaults, task_status=task_status)
                nursery.cancel_scope.cancel()  # done: stop listening for signals

            session: ServeSession = await nursery.start(serve)
            nursery.start_soon(stop_on_signals, session.request_stop, nursery.cancel_scope)


# -- Unix socket ------------------------------------------------------------------------------


async def serve_socket(path: str, defaults: ServeDefaults) -> None:
    if os.path.lexists(path):
        raise ServeError(f"{path} exists; remove it or choose another --socket path")
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        await sock.bind(path)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_umask)
    try:
        sock.listen(16)
        async with trio.SocketListener(sock) as listener, trio.open_nursery() as nursery:
            server = _SocketServer(listener, defaults)
            nursery.start_soon(stop_on_signals, server.stop, nursery.cancel_scope)
            await server.run()
            nursery.cancel_scope.cancel()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _SocketServer:
    """Accepts connections (one session each) until stopped; then stops every session
    in order and returns once all have ended."""

    def __init__(self, listener: trio.SocketListener, defaults: ServeDefaults) -> None:
        self.listener = listener
        self.defaults = defaults
        self.sessions: set[ServeSession] = set()
        self._accepting = trio.CancelScope()

    def stop(self) -> None:
        self._accepting.cancel()
        for session in list(self.sessions):
            session.request_stop()

    async def run(self) -> None:
        async with trio.open_nursery() as connections:
            with self._accepting:
                while True:
                    stream = await self.listener.accept()
                    if not _same_user(stream.socket):
                        await stream.aclose()
                        continue
                    connections.start_soon(self._serve, stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        async with stream, trio.open_nursery() as nursery:
            session: ServeSession = await nursery.start(serve_stream, stream, stream, self.defaults)
            self.sessions.add(session)
            if self._accepting.cancel_called:
                session.request_stop()
        self.sessions.discard(session)


def _same_user(sock: trio.socket.SocketType) -> bool:
    """The peer runs as our user (or root): SO_PEERCRED, beside the socket's 0600 mode."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid in (os.getuid(), 0)
