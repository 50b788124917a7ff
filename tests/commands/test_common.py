"""``--config FILE``: `sandvisor script`, `serve` and `mcp` take their tool groups from a
TOML file (real commands, real sandboxes); a secret a hostile adapter prints comes back
redacted through each (chunks, results, errors); the file's per-tool overrides and
stream redactors hold in the real sandboxes of one group and not the other's; serve's
audit stream carries each connection of a group with a network allowlist; a bad file or
a clash of options is one line, exit 2. Without a file, the one group's allowlist comes
from ``--allow-net`` (as ``sandvisor exec`` takes it) or from serve's ``hello``, each
tried with a real round trip through the proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hosting_helpers import ROOT, SANDVISOR, child_env
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent
from net_helpers import http_server
from serve_client import ServeClient

SECRET = "alpha-secret-0123456789"
CONFIG = """
[groups.alpha]
adapters = ["sv_group_adapters:a"]
pool_size = 1

[groups.alpha.secrets]
ALPHA_TOKEN = { env = "SV_TEST_ALPHA" }

[groups.alpha.sandbox]
memory = "256M"

[groups.alpha.tools."a.leak"]
max_attempts = 2

[groups.bravo]
adapters = ["sv_group_adapters:b"]
"""
REDACTED = "result holds [redacted:ALPHA_TOKEN] and {'[redacted:ALPHA_TOKEN]': 1}"


def env() -> dict[str, str]:
    """The checkout and the group adapters importable; the secret in the host's env."""
    base = child_env()
    adapters = ROOT / "tests" / "workers" / "adapters"
    base["PYTHONPATH"] = os.pathsep.join([str(adapters), base["PYTHONPATH"]])
    base["SV_TEST_ALPHA"] = SECRET
    return base


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "groups.toml"
    path.write_text(CONFIG)
    return path


def sandvisor(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SANDVISOR, *args], input=stdin, capture_output=True, text=True,
                          env=env(), timeout=120)  # fmt: skip


def test_script_runs_the_groups_of_the_file(config: Path) -> None:
    done = sandvisor("script", "--config", str(config), "-c",
                     "echo ALPHA_TOKEN | a.leak; echo; echo PATH | b.leak")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == REDACTED
    assert lines[1].startswith("result holds /usr/local/bin")  # bravo: no secret to hide
    assert SECRET not in done.stdout + done.stderr


def test_serve_runs_the_groups_of_the_file_and_hello_cannot_change_them(config: Path) -> None:
    client = ServeClient.spawn([*SANDVISOR, "serve", "--config", str(config)], env=env())
    try:
        refused = client.call("hello", adapters=["sv_group_adapters:b"])
        assert refused["event"] == "error"
        assert "--config names the groups" in refused["error"]["message"]
        ready = client.call("hello")
        assert ready["event"] == "ready", ready
        assert {t["name"] for t in ready["tools"]} == {"a.leak", "a.probe", "b.leak", "b.probe"}
        events = client.invoke("a.leak", "ALPHA_TOKEN")
        assert [e["text"] for e in events if e["event"] == "chunk"] == [
            "chunk holds [redacted:ALPHA_TOKEN]!"
        ]
        assert events[-1]["outcome"]["value"] == REDACTED
        failed = client.invoke("a.leak", "ALPHA_TOKEN", idempotency_key="leak-error")
        assert failed[-1]["outcome"]["error"] == (
            "failed, and the message holds [redacted:ALPHA_TOKEN]"
        )
        assert client.call("shutdown")["event"] == "bye"
    finally:
        client.close_input()
        assert client.wait() == 0
    assert SECRET not in str(client.seen)


@asynccontextmanager
async def mcp_session(config: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "supervisor", "mcp", "--config", str(config)],
        env=env(),
    )  # fmt: skip
    async with (
        stdio_client(params, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: object) -> str:
    assert isinstance(result, CallToolResult)
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


async def test_mcp_runs_the_groups_of_the_file(config: Path) -> None:
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with mcp_session(config) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"a.leak", "a.probe", "b.leak", "b.probe"} <= names
        ok = await session.call_tool(
            "a.leak", {"input": "ALPHA_TOKEN"}, progress_callback=on_progress
        )
        failed = await session.call_tool("a.leak", {"input": "ALPHA_TOKEN fail"})
    assert text_of(ok) == REDACTED
    assert progress == ["chunk holds [redacted:ALPHA_TOKEN]!"]  # the chunk, as progress
    assert isinstance(failed, CallToolResult) and failed.is_error
    assert "failed, and the message holds [redacted:ALPHA_TOKEN]" in text_of(failed)
    assert SECRET not in text_of(failed)


OVERRIDES = """
[groups.alpha]
adapters = ["sv_group_adapters:a"]

[groups.alpha.sandbox]
env = { CARD = "4111 1111 1111 1111" }

[groups.alpha.tools."a.probe"]
deadline = 1

[groups.alpha.tools."a.leak"]
max_input_bytes = 16
redactor = "sv_group_adapters:mask_digits"

[groups.bravo]
adapters = ["sv_group_adapters:b"]

[groups.bravo.sandbox]
env = { CARD = "4111 1111 1111 1111" }
"""
CARD = "4111 1111 1111 1111"
MASKED = "chunk holds #### #### #### ####!"


def test_the_files_overrides_and_redactors_hold_in_real_sandboxes(tmp_path: Path) -> None:
    """alpha's deadline, input bound and stream redactor are its tools' own: bravo runs
    the same code with the adapters' defaults."""
    path = tmp_path / "groups.toml"
    path.write_text(OVERRIDES)
    client = ServeClient.spawn([*SANDVISOR, "serve", "--config", str(path)], env=env())
    try:
        ready = client.call("hello")
        assert ready["event"] == "ready", ready
        described = {t["name"]: t for t in ready["tools"]}
        assert described["a.probe"]["deadline"] == 1
        assert described["a.leak"]["max_input_bytes"] == 16
        assert described["b.leak"]["max_input_bytes"] > 16
        assert described["a.leak"]["max_attempts"] == described["b.leak"]["max_attempts"]
        slow = client.invoke("a.probe", {"sleep": 3})[-1]["outcome"]
        # killed at alpha's 1 s: the effect may have happened (it is not idempotent)
        assert (slow["status"], slow["kill_reason"]) == ("indeterminate", "deadline")
        assert client.invoke("b.probe", {"sleep": 3})[-1]["outcome"]["status"] == "completed"
        long_input = "CARD" + " " * 20
        refused = client.invoke("a.leak", long_input)[-1]
        assert (refused["event"], refused["error"]["code"]) == ("error", "invalid_input")
        assert client.invoke("b.leak", long_input)[-1]["outcome"]["status"] == "completed"
        for tool, chunk in (("a.leak", MASKED), ("b.leak", f"chunk holds {CARD}!")):
            events = client.invoke(tool, "CARD")
            assert [e["text"] for e in events if e["event"] == "chunk"] == [chunk]
            # a stream redactor sees chunks only: the result is the tool's
            assert events[-1]["outcome"]["value"] == f"result holds {CARD} and {{'{CARD}': 1}}"
        assert client.call("shutdown")["event"] == "bye"
    finally:
        client.close_input()
        assert client.wait() == 0


def test_serve_audits_each_connection_through_the_proxy(tmp_path: Path) -> None:
    """With ``audit``, a group with an allowlist: one ``net`` event per connection,
    allowed or refused (a host not allowed; the metadata address, which ``*:80`` does
    not open), joined to its call's audit event by sandbox and call."""
    with http_server() as port:
        path = tmp_path / "groups.toml"
        path.write_text(
            f'[groups.alpha]\nadapters = ["sv_group_adapters:a"]\n'
            f'[groups.alpha.sandbox]\nnetwork = ["alpha.test:{port}", "*:80"]\n'
            f'network_hosts = {{ "alpha.test" = "127.0.0.1" }}\n'
        )
        client = ServeClient.spawn([*SANDVISOR, "serve", "--config", str(path)], env=env())
        try:
            assert client.call("hello", audit=True)["event"] == "ready"
            urls = [f"http://alpha.test:{port}/1000", f"http://bravo.test:{port}/10",
                    "http://169.254.169.254/latest/meta-data/"]  # fmt: skip
            outcome = client.invoke("a.probe", {"urls": urls})[-1]["outcome"]
            assert outcome["status"] == "completed", outcome
            assert outcome["value"]["urls"] == {
                urls[0]: 1000, urls[1]: [403, "not_allowed"], urls[2]: [403, "metadata"],
            }  # fmt: skip
            assert client.call("shutdown")["event"] == "bye"
        finally:
            client.close_input()
            assert client.wait() == 0
    (call,) = [e["audit"] for e in client.seen if e["event"] == "audit"]
    net = [e["net"] for e in client.seen if e["event"] == "net"]
    # in the order the connections ended, which a loaded machine may shuffle
    assert sorted((e["host"], e["allowed"], e["reason"]) for e in net) == [
        ("169.254.169.254", False, "metadata"), ("alpha.test", True, None),
        ("bravo.test", False, "not_allowed"),
    ]  # fmt: skip
    net.sort(key=lambda e: e["host"])
    for event in net:
        assert (event["group"], event["tool"]) == ("alpha", "a.probe")
        assert (event["sandbox"], event["call"]) == (call["session_id"], call["rid"])
    assert net[1]["bytes_down"] > 1000 and net[2]["bytes_down"] == 0


@pytest.mark.parametrize("command", ["script", "serve", "mcp"])
def test_a_bad_file_is_one_line_naming_the_key(tmp_path: Path, command: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[groups.alpha]\nadapters = ["sv_group_adapters:a"]\npool_size = "two"\n')
    extra = ["-c", "true"] if command == "script" else []
    done = sandvisor(command, "--config", str(bad), *extra)
    assert done.returncode == 2
    assert done.stderr == (
        f"sandvisor {command}: config {bad}: groups.alpha.pool_size: expected an integer, "
        "got a string\n"
    )


@pytest.mark.parametrize("option", [["--pool-size", "3"], ["--per-process-limits"]])
def test_the_file_or_the_one_group_options_not_both(config: Path, option: list[str]) -> None:
    done = sandvisor("script", "--config", str(config), *option, "-c", "true")
    assert done.returncode == 2
    assert done.stderr == (
        f"sandvisor script: --config names the groups; {option[0]} cannot go with it "
        "(set them in the file)\n"
    )


# -- one group's allowlist: --allow-net, and serve's hello --------------------------------------


def probe_urls(port: int) -> list[str]:
    """An allowed URL (1000 bytes) and one the allowlist refuses (the same server, both
    by names the proxy pins to 127.0.0.1: the sandbox's own loopback is not the proxy's)."""
    return [f"http://alpha.test:{port}/1000", f"http://bravo.test:{port}/10"]


def allow_alpha(port: int) -> list[str]:
    return ["--allow-net", f"alpha.test:{port}", "--net-host", "alpha.test=127.0.0.1"]


def assert_probed(value: dict[str, Any], port: int) -> None:
    allowed, refused = probe_urls(port)
    assert value["urls"] == {allowed: 1000, refused: [403, "not_allowed"]}, value


def test_serve_hello_gives_a_network_allowlist() -> None:
    """``policy.network`` as a list: the workers reach those hosts through the proxy and
    nothing else; a bad entry is ``bad_config`` in one line, and the session can try
    again."""
    with http_server() as port:
        client = ServeClient.spawn([*SANDVISOR, "serve", "--adapters", "sv_group_adapters:a"],
                                   env=env())  # fmt: skip
        try:
            bad = client.call("hello", policy={"network": ["no such host:80"]})
            assert bad["error"]["code"] == "bad_config"
            assert bad["error"]["message"] == (
                "network allowlist: 'no such host:80': 'no such host' is not a host name, "
                "'*.domain', an IP address or '*'"
            )
            assert client.call("hello", policy={"network": []})["error"]["code"] == "bad_config"
            bad = client.call("hello", policy={"network_hosts": {"a.test": "10.0.0.1"}})
            assert bad["error"]["message"] == (
                'policy network_hosts: only with "network": ["HOST[:PORT]", ...]'
            )
            allow = {"network": [f"alpha.test:{port}"], "network_max_connections": 5,
                     "network_hosts": {"alpha.test": "127.0.0.1"}}  # fmt: skip
            ready = client.call("hello", policy=allow, audit=True)
            assert ready["event"] == "ready", ready
            outcome = client.invoke("a.probe", {"urls": probe_urls(port)})[-1]["outcome"]
            assert outcome["status"] == "completed", outcome
            assert_probed(outcome["value"], port)
            assert client.call("shutdown")["event"] == "bye"
        finally:
            client.close_input()
            assert client.wait() == 0
    net = sorted((e["net"]["host"], e["net"]["allowed"], e["net"]["reason"])
                 for e in client.seen if e["event"] == "net")  # fmt: skip
    assert net == [("alpha.test", True, None), ("bravo.test", False, "not_allowed")]


def test_serve_takes_allow_net_as_the_hellos_default() -> None:
    with http_server() as port:
        client = ServeClient.spawn(
            [*SANDVISOR, "serve", "--adapters", "sv_group_adapters:a",
             "--allow-net", "example.invalid:443", *allow_alpha(port)],
            env=env(),
        )  # fmt: skip
        try:
            assert client.call("hello")["event"] == "ready"
            outcome = client.invoke("a.probe", {"urls": probe_urls(port)})[-1]["outcome"]
            assert_probed(outcome["value"], port)
            assert client.call("shutdown")["event"] == "bye"
        finally:
            client.close_input()
            assert client.wait() == 0


def test_script_takes_allow_net() -> None:
    with http_server() as port:
        allowed, refused = probe_urls(port)
        done = sandvisor(
            "script", "--adapters", "sv_group_adapters:a", *allow_alpha(port),
            "-c", f"a.probe --urls {allowed}; a.probe --urls {refused}",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines() if line)
    assert (first["urls"], second["urls"]) == ({allowed: 1000}, {refused: [403, "not_allowed"]})


async def test_mcp_takes_allow_net() -> None:
    with http_server() as port:
        params = StdioServerParameters(
            command=sys.executable, env=env(),
            args=["-m", "supervisor", "mcp", "--adapters", "sv_group_adapters:a",
                  *allow_alpha(port)],
        )  # fmt: skip
        async with (
            stdio_client(params, errlog=sys.stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("a.probe", {"urls": probe_urls(port)})
    assert_probed(json.loads(text_of(result)), port)


@pytest.mark.parametrize("command", ["script", "serve", "mcp"])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--allow-net", "no such host"],
         "network allowlist: 'no such host': 'no such host' is not a host name, '*.domain', "
         "an IP address or '*'"),
        (["--net-host", "a.test=10.0.0.1"],
         "--net-host, --net-max-bytes and --net-max-connections need --allow-net"),
        (["--allow-net", "a.test", "--net-host", "a.test"],
         "--net-host 'a.test' is not NAME=ADDRESS"),
    ],
)  # fmt: skip
def test_a_bad_allow_net_is_one_line_as_exec_says_it(
    command: str, options: list[str], message: str
) -> None:
    extra = ["-c", "true"] if command == "script" else []
    done = sandvisor(command, "--adapters", "sv_group_adapters:a", *options, *extra)
    assert (done.returncode, done.stderr) == (2, f"sandvisor {command}: {message}\n")
    exec_done = sandvisor("exec", *options, "--", "true")
    assert exec_done.stderr == f"sandvisor exec: {message}\n"


@pytest.mark.parametrize("command", ["script", "serve", "mcp"])
def test_allow_net_and_network_or_config_do_not_go_together(command: str, config: Path) -> None:
    extra = ["-c", "true"] if command == "script" else []
    done = sandvisor(command, "--allow-net", "a.test", "--network", *extra)
    assert done.returncode == 2
    assert "argument --network: not allowed with argument --allow-net" in done.stderr
    done = sandvisor(command, "--config", str(config), "--allow-net", "a.test", *extra)
    assert (done.returncode, done.stderr) == (2, (
        f"sandvisor {command}: --config names the groups; --allow-net cannot go with it "
        "(set them in the file)\n"
    ))  # fmt: skip
