"""The suite as an ordinary user: the sandbox, supervisor and command tests that apply,
run by a throwaway user in each set-up a machine can give it (`rootless_env`):

- ``v1``: cgroup v1 subtrees delegated by ``sandvisor doctor --delegate USER --apply``;
  the escape suite's rows, the rest of the sandbox tests (the network allowlist's proxy
  among them), the supervisor's three hosts, tool groups (their binds, secrets and
  network) and the commands, and MCP servers as workers and behind ``mcp --server``;
- ``v2``: a delegated cgroup v2, the same runs (skipped, saying why, where cgroup v2 has
  no controllers to give: a hybrid machine);
- ``hybrid``: on a hybrid machine (cgroup v2 with no memory or pids to give, as here), the
  v1 subtrees and a delegated v2 cgroup the user's runs are started in: its sandboxes are
  killed by ``cgroup.kill`` in the user's own v2 cgroup; the teardown and leftover tests;
- ``none``: nothing delegated: every command refuses the default policy in one line, and
  with per-process limits the sandboxes run, the fork and memory bombs stay contained,
  the host still forks, and nothing survives a kill or the host's death.

Each run is one pytest process of the user's, with a sandbox required (a skip for want of
one fails; a test of another set-up skips, saying so); a failure shows the end of its
output.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rootless_env import MCP_SERVERS as MCP_SERVERS_CACHE
from rootless_env import RootlessUser, Setup

pytestmark = [pytest.mark.root_only, pytest.mark.bwrap, pytest.mark.timeout(1200)]

RootlessUserFactory = Callable[[Setup], RootlessUser]

SANDBOX = "tests/sandbox/"
ESCAPE_ROWS = [
    f"{SANDBOX}test_sandbox_escape_{part}.py" for part in ("fs", "kernel", "net", "resources")
]
SANDBOX_MODULES = [
    f"{SANDBOX}test_sandbox_{name}.py"
    for name in (
        "binds",
        "cgroup_pool",
        "cgroups",
        "cli_doctor",
        "cli_exec",
        "forkserver",
        "handle",
        "leftovers",
        "lifeline",
        "limits",
        "pidns",
        "pyworker",
        "spawn",
    )
] + ["tests/sandbox/test_netproxy_sandbox.py", "tests/rootless/test_rootless_mode.py"]
HOSTS_AND_COMMANDS = [
    "tests/workers/test_invoke.py",
    "tests/workers/test_group.py",
    "tests/hosting/test_sync_host.py",
    "tests/hosting/test_asyncio_host.py",
    "tests/commands/test_cli.py",
    "tests/commands/test_serve.py::test_a_client_with_nothing_but_the_standard_library",
    "tests/commands/test_mcp_server.py::test_tools_scripts_discovery_and_progress",
]
#: MCP servers as workers, through the library and `sandvisor mcp --server` (the real servers
#: of ``scripts/mcp-test-servers``, copied for the user where they are installed).
MCP_SERVERS = ["tests/mcp/test_mcp_servers.py", "tests/mcp/test_mcp_proxy.py"]
#: A hybrid machine's v2 cgroup for kill: what tears sandboxes down and collects leftovers.
HYBRID = [
    f"{SANDBOX}test_sandbox_{name}.py"
    for name in ("cgroups", "handle", "leftovers", "lifeline", "spawn", "termination")
] + ["tests/rootless/test_rootless_mode.py"]
#: Without a cgroup: what runs, and what must not (a skip would hide it: none is allowed).
NONE = [
    f"{SANDBOX}test_sandbox_limits.py",
    f"{SANDBOX}test_sandbox_handle.py::test_without_a_cgroup_kill_and_cleanup_leave_nothing",
    f"{SANDBOX}test_sandbox_handle.py::"
    "test_without_a_cgroup_or_a_uid_of_its_own_survivors_are_found_by_pid_namespace",
    f"{SANDBOX}test_sandbox_handle.py::test_a_kill_before_bwrap_names_its_child_finds_the_child_anyway",
    f"{SANDBOX}test_sandbox_lifeline.py::test_a25_host_sigkill_takes_every_sandbox_with_it[none]",
    f"{SANDBOX}test_sandbox_lifeline.py::"
    "test_a25_host_death_during_bwrap_start_up_leaves_nothing[none]",
    "tests/rootless/test_rootless_mode.py",
]
#: The none run's RLIMIT_NPROC: its per-process fork bomb stops at a few hundred.
NONE_NPROC = 512


def passes(user: RootlessUser, selection: list[str], **kwargs: object) -> None:
    """The selection passes as ``user``. A test or two that fail are run once more, alone
    (a timing-sensitive test may fail while others load the machine; a second failure is
    real), as the suite's own rule says."""
    done = user.pytest(selection, **kwargs)  # type: ignore[arg-type]
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-80:])
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    if done.returncode != 0 and 0 < len(failed) <= 2 and all("/src/" in f for f in failed):
        again = user.pytest([f.split("/src/", 1)[1] for f in failed], **kwargs)  # type: ignore[arg-type]
        tail += "\n--- run once more, alone:\n" + "\n".join(again.stdout.splitlines()[-40:])
        assert again.returncode == 0, f"as {user.name} ({user.setup}):\n{tail}"
        return
    assert done.returncode == 0, f"as {user.name} ({user.setup}):\n{tail}"
    assert " passed" in done.stdout, tail


def mcp_user(rootless_user: RootlessUserFactory, setup: Setup) -> RootlessUser:
    """The user of ``setup``, where the MCP test servers are installed (for root's own MCP
    tests too: ``scripts/setup`` installs them where npm is)."""
    if not (MCP_SERVERS_CACHE / "stamp").exists():
        pytest.skip(f"the MCP test servers are not installed in {MCP_SERVERS_CACHE}: scripts/setup")
    return rootless_user(setup)


def test_v1_escape_rows(rootless_user: RootlessUserFactory) -> None:
    passes(rootless_user("v1"), ESCAPE_ROWS)


def test_v1_sandbox(rootless_user: RootlessUserFactory) -> None:
    passes(rootless_user("v1"), SANDBOX_MODULES)


def test_v1_hosts_and_commands(rootless_user: RootlessUserFactory) -> None:
    passes(rootless_user("v1"), HOSTS_AND_COMMANDS)


def test_v1_mcp_servers(rootless_user: RootlessUserFactory) -> None:
    passes(mcp_user(rootless_user, "v1"), MCP_SERVERS)


def test_v2(rootless_user: RootlessUserFactory) -> None:
    passes(rootless_user("v2"), [*ESCAPE_ROWS, *SANDBOX_MODULES])


def test_v2_hosts_commands_and_mcp_servers(rootless_user: RootlessUserFactory) -> None:
    passes(mcp_user(rootless_user, "v2"), [*HOSTS_AND_COMMANDS, *MCP_SERVERS])


def test_hybrid(rootless_user: RootlessUserFactory) -> None:
    passes(rootless_user("hybrid"), HYBRID)


def test_none(rootless_user: RootlessUserFactory) -> None:
    passes(rootless_user("none"), NONE, nproc=NONE_NPROC)
