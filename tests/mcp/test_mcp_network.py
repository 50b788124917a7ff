"""A third-party MCP server in a group with a network allowlist: it reaches what the list
allows through the host's proxy (its bridge starts the sandbox's forwarder), nothing
else, and every connection is audited with the MCP tool that made it."""

from __future__ import annotations

import subprocess
import sys

from mcp_fixtures import Servers
from net_helpers import http_server

from sandbox import SandboxPolicy
from sandbox.netproxy import NetworkAllowlist
from sandbox.netproxy.events import NetEvent
from supervisor import Supervisor


async def test_an_mcp_server_reaches_only_what_its_allowlist_allows(servers: Servers) -> None:
    events: list[NetEvent] = []
    with http_server() as port:
        network = NetworkAllowlist([f"web.test:{port}"], hosts={"web.test": "127.0.0.1"})
        async with Supervisor(mcp_server=servers.hostile, policy=SandboxPolicy(network=network),
                              on_network=events.append, ping_interval=None,
                              start_timeout=30.0) as sup:  # fmt: skip
            allowed = await sup.invoke("fetch", {"url": f"http://web.test:{port}/321"})
            denied = await sup.invoke("fetch", {"url": f"http://other.test:{port}/1"})
            direct = await sup.invoke("open_network", {"host": "127.0.0.1", "port": port})
    assert allowed.value == {"result": "fetched 321 bytes"}, allowed
    assert denied.value == {"result": "refused 403 not_allowed"}, denied
    assert str(direct.value["result"]).startswith("blocked")  # no way but the proxy
    by_host = {e.host: e for e in events}
    assert (by_host["web.test"].allowed, by_host["other.test"].allowed) == (True, False)
    assert by_host["web.test"].tool == "fetch" and by_host["web.test"].call == allowed.rid


def test_mcp_server_takes_allow_net_and_refuses_it_with_network() -> None:
    both = subprocess.run(
        [sys.executable, "-m", "supervisor", "mcp", "--server", "--network",
         "--allow-net", "a.test:443", "--", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert both.returncode == 2
    # the same parsing as sandvisor exec's (and script's, serve's): argparse's words
    assert "argument --allow-net: not allowed with argument --network" in both.stderr
