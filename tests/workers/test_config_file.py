"""The TOML config of tool groups: what a good file builds, and the one line a bad one
gets, naming the key and what was expected (no sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import Bind, NetworkAllowlist
from supervisor.ledger import StreamPolicy
from supervisor.workers.config_file import ConfigError, groups_from, load_groups
from supervisor.workers.secrets import Secret

NEEDS_SANDBOX = False

GOOD = """
[groups.search]
adapters = ["mytools.search:registry"]
pool_size = 2
max_in_flight = 2
secrets_as = "file"
cancel_grace = 0.5

[groups.search.sandbox]
network = ["api.search.example:443", "*.cdn.example"]
network_max_connections = 8
network_max_bytes = "16M"
network_hosts = { "api.search.example" = "10.0.0.5" }
ro_binds = ["/srv/index:/index"]
binds = ["/var/cache/search"]
env = { LANG = "C" }
memory = "256M"
pids = "none"

[groups.search.secrets]
API_KEY = { env = "SEARCH_API_KEY" }
OTHER = { value = "a-value-in-the-file" }

[groups.search.tools."search.query"]
max_attempts = 2
deadline = 10
stream = { max_chunks = 8 }
redactor = "builtins:str"

[groups.files]
mcp_server = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"]
tool_prefix = "fs"
"""


def test_a_good_file_builds_its_groups(tmp_path: Path) -> None:
    path = tmp_path / "groups.toml"
    path.write_text(GOOD)
    search, files = load_groups(path)
    assert (search.name, search.adapters, search.pool_size, search.max_in_flight) == (
        "search", ("mytools.search:registry",), 2, 2,
    )  # fmt: skip
    assert (search.secrets_as, search.cancel_grace) == ("file", 0.5)
    policy = search.policy
    assert isinstance(policy.network, NetworkAllowlist)
    assert policy.network.allow == ("api.search.example:443", "*.cdn.example")
    assert (policy.network.max_connections, policy.network.max_bytes) == (8, 16 << 20)
    assert dict(policy.network.hosts) == {"api.search.example": "10.0.0.5"}
    assert policy.binds == (Bind("/srv/index", "/index"), Bind("/var/cache/search", "", True))
    assert policy.env["LANG"] == "C" and policy.env["PATH"]  # added to the defaults
    assert (policy.memory_bytes, policy.pids) == (256 << 20, None)
    assert dict(search.secrets) == {
        "API_KEY": Secret.from_env("SEARCH_API_KEY"),
        "OTHER": Secret.of("a-value-in-the-file"),
    }
    assert dict(search.overrides["search.query"]) == {
        "max_attempts": 2, "deadline": 10.0, "stream": StreamPolicy(max_chunks=8),
    }  # fmt: skip
    assert search.redactors["search.query"] is str
    assert (files.mcp_server, files.tool_prefix) == (
        ("npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"), "fs",
    )  # fmt: skip


def one(**group: object) -> dict[str, object]:
    return {"groups": {"g": {"adapters": ["m:r"], **group}}}


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({}, "groups: required, missing"),
        ({"groups": {}}, "groups: expected at least one [groups.NAME] table"),
        ({"group": {}}, "group: not a known key"),
        (one(pool_size="two"), "groups.g.pool_size: expected an integer, got a string"),
        (one(pool_size=0), "groups.g.pool_size: expected an integer >= 1"),
        (one(pol_size=1), "groups.g.pol_size: not a known key"),
        (one(secrets_as="socket"), "groups.g.secrets_as: expected 'env' or 'file', got 'socket'"),
        (one(sandbox={"pids": "lots"}),
         'groups.g.sandbox.pids: expected an integer >= 1 or "none", got'),
        ({"groups": {"g": {}}}, "groups.g: give exactly one of adapters=[...]"),
        (one(sandbox={"memory": "lots"}),
         'groups.g.sandbox.memory: expected a size like 512M or "none", got \'lots\''),
        (one(sandbox={"tmpfs": "none"}),
         "groups.g.sandbox.tmpfs: expected a size like 512M, got 'none'"),
        (one(sandbox={"network": "yes"}),
         "groups.g.sandbox.network: expected true, false or a list, got a string"),
        (one(sandbox={"network": ["a b"]}), "groups.g.sandbox.network: network allowlist: 'a b'"),
        (one(sandbox={"network_hosts": {"a": "10.0.0.1"}}),
         "groups.g.sandbox.network_hosts: expected only with a network list"),
        (one(sandbox={"ro_binds": ["rel/path"]}),
         "groups.g.sandbox.ro_binds[0]: bind source must be absolute: 'rel/path'"),
        (one(sandbox={"binds": ["/proc/x"]}), "groups.g.sandbox.binds[0]: bind destination"),
        (one(secrets={"K": {"env": "A", "value": "b"}}),
         'groups.g.secrets.K: expected { env = "VAR" } or { value = "..." }'),
        (one(secrets={"K": "bare"}), "groups.g.secrets.K: expected a table, got a string"),
        (one(tools={"t.x": {"max_attempts": 0}}),
         'groups.g.tools."t.x".max_attempts: expected an integer >= 1'),
        (one(tools={"t.x": {"format": "json"}}), 'groups.g.tools."t.x".format: not a known key'),
        (one(tools={"t.x": {"redactor": "no_such_module:f"}}),
         'groups.g.tools."t.x".redactor: cannot import no_such_module:f'),
        (one(tools={"t.x": {"stream": {"max_chunk_bytes": 10, "max_total_bytes": 5}}}),
         'groups.g.tools."t.x".stream: StreamPolicy.max_chunk_bytes must not exceed'),
    ],
)  # fmt: skip
def test_a_bad_file_gets_one_line_naming_the_key(data: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        groups_from(data)
    message = str(caught.value)
    assert message.startswith(line), message
    assert "\n" not in message


def test_the_file_itself(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config .*/missing.toml: cannot read it"):
        load_groups(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[groups.g\n")
    with pytest.raises(ConfigError, match=r"config .*/broken.toml: not TOML: "):
        load_groups(broken)
