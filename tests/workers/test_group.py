"""Tool groups in one supervisor, with real sandboxes, a real proxy and real servers:
calls go to their tool's group, and two groups see nothing of each other's binds,
secrets or network; a secret a tool prints comes back redacted, and reaches neither the
journal nor the audit log."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from net_helpers import http_server
from sv_support import supervisor

from sandbox import Bind, NetworkAllowlist, SandboxPolicy
from sandbox.netproxy.events import NetEvent
from supervisor.workers.groups import ToolGroup
from supervisor.workers.secrets import Secret, SecretError

ALPHA = "alpha-secret-0123456789"
BRAVO = "bravo-secret-9876543210"


@pytest.fixture
def server() -> Iterator[int]:
    with http_server() as port:
        yield port


def shared_dir(root: Path, name: str, *, writable: bool = False) -> Path:
    path = root / name
    path.mkdir()
    (path / "name").write_text(name)
    os.chmod(path, 0o777 if writable else 0o755)  # the sandbox's uid is not ours
    (path / "name").chmod(0o644)
    return path


def groups(tmp: Path, port: int) -> list[ToolGroup]:
    def net(name: str) -> NetworkAllowlist:
        return NetworkAllowlist([f"{name}.test:{port}"], hosts={f"{name}.test": "127.0.0.1"})

    alpha_data, alpha_state = shared_dir(tmp, "alpha"), shared_dir(tmp, "state", writable=True)
    return [
        ToolGroup(
            "alpha",
            adapters=["sv_group_adapters:a"],
            policy=SandboxPolicy(
                binds=(Bind(str(alpha_data), "/data"), Bind(str(alpha_state), "/state", True)),
                network=net("alpha"),
            ),
            secrets={"ALPHA_TOKEN": ALPHA},
            pool_size=2,
        ),
        ToolGroup(
            "bravo",
            adapters=["sv_group_adapters:b"],
            policy=SandboxPolicy(
                binds=(Bind(str(shared_dir(tmp, "bravo")), "/data"),), network=net("bravo")
            ),
            secrets={"BRAVO_TOKEN": Secret.from_env("SV_TEST_BRAVO_TOKEN")},
            secrets_as="file",
        ),
    ]


def probe(port: int, write: str) -> dict[str, object]:
    return {
        "env": ["ALPHA_TOKEN", "BRAVO_TOKEN"],
        "files": ["/data/name", "/run/sandvisor/secrets/BRAVO_TOKEN"],
        "write": write,
        "urls": [f"http://alpha.test:{port}/100", f"http://bravo.test:{port}/200"],
    }


async def test_two_groups_see_nothing_of_each_other(
    tmp_path: Path, server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SV_TEST_BRAVO_TOKEN", BRAVO)
    audit, journal = tmp_path / "audit.jsonl", tmp_path / "ledger.db"
    network: list[NetEvent] = []
    async with supervisor(groups=groups(tmp_path, server), audit_log=audit, ledger_path=journal,
                          on_network=network.append) as sup:  # fmt: skip
        assert (sup.group_of("a.probe"), sup.group_of("b.leak")) == ("alpha", "bravo")
        a = await sup.invoke("a.probe", probe(server, "/state/kept"))
        b = await sup.invoke("b.probe", probe(server, "/data/planted"))
        alpha_pool, bravo_pool = sup.group("alpha").pool, sup.group("bravo").pool
        assert alpha_pool is not bravo_pool and (alpha_pool.size, bravo_pool.size) == (2, 1)
        assert a.session_id in {s.id for s in alpha_pool.sessions}
        assert b.session_id in {s.id for s in bravo_pool.sessions}
    assert (a.status, b.status) == ("completed", "completed"), (a.error, b.error)
    assert a.value == {
        "env": {"ALPHA_TOKEN": "[redacted:ALPHA_TOKEN]", "BRAVO_TOKEN": None},
        "files": {"/data/name": "alpha", "/run/sandvisor/secrets/BRAVO_TOKEN": "ENOENT"},
        "write": "ok",
        "urls": {
            f"http://alpha.test:{server}/100": 100,
            f"http://bravo.test:{server}/200": [403, "not_allowed"],
        },
    }
    assert b.value == {
        "env": {"ALPHA_TOKEN": None, "BRAVO_TOKEN": None},  # bravo's comes as a file
        "files": {"/data/name": "bravo",
                  "/run/sandvisor/secrets/BRAVO_TOKEN": "[redacted:BRAVO_TOKEN]"},
        "write": "EROFS",  # a read-only bind; alpha's writable one is not here
        "urls": {
            f"http://alpha.test:{server}/100": [403, "not_allowed"],
            f"http://bravo.test:{server}/200": 200,
        },
    }  # fmt: skip
    assert (tmp_path / "state" / "kept").read_text() == "persisted"  # the writable bind
    by_group = {(e.group, e.host): e for e in network}
    assert {key: e.allowed for key, e in by_group.items()} == {
        ("alpha", "alpha.test"): True,
        ("alpha", "bravo.test"): False,
        ("bravo", "alpha.test"): False,
        ("bravo", "bravo.test"): True,
    }
    allowed = by_group["alpha", "alpha.test"]  # charged to the call that made it
    assert (allowed.tool, allowed.sandbox, allowed.call) == ("a.probe", a.session_id, a.rid)
    assert allowed.bytes_down > 100
    logged = [json.loads(line) for line in audit.read_text().splitlines()]
    assert sorted(e["event"] for e in logged) == ["call", "call"] + ["net"] * 4
    for path in (audit, journal):  # never a secret where the host keeps things
        data = path.read_bytes() + _sqlite_text(path)
        assert ALPHA.encode() not in data and BRAVO.encode() not in data


def _sqlite_text(path: Path) -> bytes:
    if path.suffix != ".db":
        return b""
    with sqlite3.connect(path) as db:
        rows = []
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            rows += [repr(row).encode() for row in db.execute(f"SELECT * FROM {table}")]
    return b"".join(rows)


async def test_a_secret_a_tool_prints_comes_back_redacted(tmp_path: Path, server: int) -> None:
    audit = tmp_path / "audit.jsonl"
    group = ToolGroup("alpha", adapters=["sv_group_adapters:a"], secrets={"ALPHA_TOKEN": ALPHA})
    chunks: list[str] = []
    async with supervisor(groups=[group], audit_log=audit) as sup:
        ok = await sup.invoke("a.leak", "ALPHA_TOKEN", on_chunk=chunks.append)
        failed = await sup.invoke("a.leak", "ALPHA_TOKEN", idempotency_key="leak-error")
    assert chunks == ["chunk holds [redacted:ALPHA_TOKEN]!"]
    assert ok.value == ("result holds [redacted:ALPHA_TOKEN] and {'[redacted:ALPHA_TOKEN]': 1}")
    assert failed.status == "failed"
    assert failed.error == "failed, and the message holds [redacted:ALPHA_TOKEN]"
    assert ALPHA not in audit.read_text()


async def test_a_secret_from_a_missing_variable_refuses_the_start() -> None:
    group = ToolGroup(
        "alpha", adapters=["sv_group_adapters:a"],
        secrets={"ALPHA_TOKEN": Secret.from_env("SV_TEST_NEVER_SET_TOKEN")},
    )  # fmt: skip
    with pytest.raises(SecretError, match=r"secret ALPHA_TOKEN: the host's \$SV_TEST_NEVER_SET"):
        async with supervisor(groups=[group]):
            pass


async def test_only_a_group_with_an_allowlist_has_proxy_endpoints(server: int) -> None:
    def endpoints() -> list[str]:
        prefix = f"sandvisor-net-{os.getpid()}-"
        return [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(prefix)]

    plain = ToolGroup("plain", adapters=["sv_group_adapters:a"], pool_size=2)
    async with supervisor(groups=[plain]) as sup:
        assert (await sup.invoke("a.leak", "PATH")).status == "completed"
        assert endpoints() == []  # no proxy runs at all
    networked = ToolGroup(
        "net", adapters=["sv_group_adapters:b"],
        policy=SandboxPolicy(network=[f"127.0.0.1:{server}"]), pool_size=1,
    )  # fmt: skip
    async with supervisor(groups=[plain, networked]) as sup:
        assert len(endpoints()) == 1  # the one worker of the group with an allowlist
    assert endpoints() == []


async def test_per_tool_stream_redactors_and_overrides() -> None:
    async with supervisor(redactors={"chunks": str.upper}) as sup:
        chunks: list[str] = []
        out = await sup.invoke("chunks", "2", on_chunk=chunks.append)
    assert out.status == "completed" and chunks == ["C1", "C2"]
    group = ToolGroup(
        "g", adapters=["sv_test_adapters:registry"], overrides={"echo": {"max_attempts": 3}}
    )
    async with supervisor(groups=[group]) as sup:
        echo = sup.tools["echo"]
        assert echo.max_attempts == 3
        assert echo.max_calls > 1 and echo.stream is not None  # the rest as described
