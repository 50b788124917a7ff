"""A `ProxyServer` on a thread of its own, for a synchronous host (``sandvisor exec``).

``with ProxyThread(network, on_event) as endpoint:`` starts an event loop on a new
thread, opens one endpoint and returns it; leaving the block closes the endpoint (its
connections end, its socket and directories are removed) and joins the thread. Events
are delivered on the proxy's thread: the sink must be quick and thread-safe.
"""

from __future__ import annotations

import contextlib
import threading
from types import TracebackType

import anyio
import anyio.from_thread
import anyio.lowlevel

from .policy import NetworkAllowlist
from .server import Endpoint, EventSink, ProxyServer

START_TIMEOUT = 10.0


class ProxyThread:
    def __init__(self, network: NetworkAllowlist, on_event: EventSink | None = None) -> None:
        self.network = network
        self.on_event = on_event
        self.endpoint: Endpoint | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._stop: anyio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="sandvisor-proxy", daemon=True)

    def __enter__(self) -> Endpoint:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise RuntimeError(f"the network proxy did not start in {START_TIMEOUT} s")
        if self._failure is not None:
            self._thread.join()
            raise self._failure
        assert self.endpoint is not None
        return self.endpoint

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._token is not None and self._stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop is already gone
                anyio.from_thread.run_sync(self._stop.set, token=self._token)
        self._thread.join()

    def _main(self) -> None:
        try:
            anyio.run(self._serve)
        except BaseException as exc:  # reported to the thread that waits in __enter__
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._stop = anyio.Event()
        async with anyio.create_task_group() as group:
            server = await group.start(ProxyServer(self.on_event).run)
            self.endpoint = await server.open(self.network)
            self._ready.set()
            await self._stop.wait()
            group.cancel_scope.cancel()
