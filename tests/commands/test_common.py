"""``--config FILE``: `sandvisor script`, `serve` and `mcp` take their tool groups from a
TOML file (real commands, real sandboxes); a secret a hostile adapter prints comes back
redacted through each; a bad file or a clash of options is one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hosting_helpers import ROOT, SANDVISOR, child_env
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent
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


async def test_mcp_runs_the_groups_of_the_file(config: Path) -> None:
    async with mcp_session(config) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"a.leak", "a.probe", "b.leak", "b.probe"} <= names
        result = await session.call_tool("a.leak", {"input": "ALPHA_TOKEN"})
    (content,) = result.content
    assert isinstance(content, TextContent)
    assert content.text == REDACTED


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
