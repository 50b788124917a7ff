"""What an ordinary user gets, checked as that user (`test_rootless_runs` starts this
module in each set-up; as root it skips): with delegated cgroups the default policy
works, its cgroups in what was delegated, and ``doctor`` says so; without any, every
command refuses in one line naming the fix (exit 125), and per-process limits run the
commands, the library's hosts and ``doctor``'s report says what they give up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.cgroups import detect_layout, user_name
from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import spawn

pytestmark = [pytest.mark.rootless_only]

SETUP = os.environ.get("SANDVISOR_ROOTLESS", "")
SANDVISOR = [sys.executable, "-m", "supervisor"]
EXAMPLES = "worker_runtime.examples:registry"
delegated = pytest.mark.skipif(
    SETUP not in ("v1", "v2", "hybrid"), reason="with delegated cgroups only"
)
undelegated = pytest.mark.skipif(SETUP != "none", reason="with nothing delegated only")


def sandvisor(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SANDVISOR, *args], capture_output=True, text=True, timeout=120, input=input
    )


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@delegated
def test_the_sandboxes_cgroups_are_in_what_was_delegated() -> None:
    layout = detect_layout()
    assert layout.provides("memory") and layout.provides("pids"), layout.problems
    if SETUP in ("v1", "hybrid"):  # the subtrees `doctor --delegate` made, the parents
        names = {os.path.basename(h.parent) for h in layout.hierarchies if h.version == 1}
        assert names == {f"sandvisor-{user_name()}"}
    with spawn(prepare_launch(SandboxPolicy(), Command(("sleep", "30")))) as sandbox:
        assert sandbox.cgroup is not None and sandbox.uid == os.geteuid()
        paths = sandbox.cgroup.paths
        assert all(os.stat(p).st_uid == os.geteuid() for p in paths)
        assert any(h.parent in p for p in paths for h in layout.hierarchies)
        sandbox.kill("done")
    assert not any(os.path.exists(p) for p in paths)


@pytest.mark.skipif(SETUP != "hybrid", reason="with a v2 cgroup for kill on a hybrid machine")
def test_a_hybrid_machines_delegated_v2_cgroup_kills_the_sandbox() -> None:
    """The host's own v2 cgroup (delegated to this user) holds each sandbox's cgroup for
    ``cgroup.kill``; v1's subtrees hold memory and pids."""
    layout = detect_layout()
    assert layout.kill_mechanism == "cgroup.kill", layout
    (v2,) = [h for h in layout.hierarchies if h.version == 2]
    with open("/proc/self/cgroup") as f:
        own = next(line[3:].strip() for line in f if line.startswith("0::"))
    assert v2.roles == {"kill"} and f"{own}/" in v2.parent + "/", (own, v2)
    with spawn(prepare_launch(SandboxPolicy(), Command(("sleep", "30")))) as sandbox:
        assert sandbox.cgroup is not None
        paths = sandbox.cgroup.paths
        (killer,) = [p for p in paths if p.startswith(v2.parent)]
        with open(os.path.join(killer, "cgroup.procs")) as f:
            assert f.read().split()  # the sandbox runs in it
        sandbox.kill("done")
    assert not any(os.path.exists(p) for p in paths)
    run = sandvisor("doctor", "--no-smoke")
    assert re.search(r"ok +cgroup kill +cgroup\.kill", run.stdout), run.stdout


@delegated
def test_doctor_says_this_user_gets_everything_here() -> None:
    run = sandvisor("doctor")
    assert run.returncode == 0, run.stdout
    for text in ("rootless", "delegated to this user", "what root adds", "smoke test"):
        assert text in run.stdout


@delegated
def test_serve_and_mcp_run_sandboxed_tools_as_this_user() -> None:
    serve = subprocess.Popen(
        [*SANDVISOR, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert serve.stdin is not None and serve.stdout is not None
    try:
        for request, until in (
            ({"op": "hello", "id": 1, "adapters": [EXAMPLES], "pool_size": 1}, "ready"),
            ({"op": "invoke", "id": 2, "tool": "text.upper", "input": "hi"}, "outcome"),
        ):
            serve.stdin.write(json.dumps(request) + "\n")
            serve.stdin.flush()
            while (event := json.loads(serve.stdout.readline()))["event"] != until:
                assert event["event"] != "error", event
        assert (event["outcome"]["status"], event["outcome"]["value"]) == ("completed", "HI")
        serve.stdin.close()  # end of input: an orderly shutdown
        assert serve.wait(60) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    run = sandvisor("mcp", "--adapters", EXAMPLES, input="")  # no client: it starts, then ends
    assert run.returncode == 0, run.stderr


@undelegated
def test_every_command_refuses_the_default_policy_in_one_line_with_the_fix() -> None:
    for args in (
        ("exec", "--", "true"),
        ("script", "--example", "-c", "true"),
        ("demo",),
        ("mcp", "--adapters", EXAMPLES),
    ):
        run = sandvisor(*args, input="")
        line = one_line(run.stderr)
        assert run.returncode == 125 and run.stdout == "", (args, run.stderr)
        assert line.startswith(f"sandvisor {args[0]}: ") and "Traceback" not in line
        assert f"--delegate {user_name()}" in line and "--per-process-limits" in line, line
    hello = json.dumps({"op": "hello", "id": 1, "adapters": [EXAMPLES]})
    run = sandvisor("serve", input=hello + "\n")
    (event,) = [json.loads(line) for line in run.stdout.splitlines()]  # one line, the error
    assert event["event"] == "error" and event["error"]["code"] == "sandbox_unavailable"
    assert "--delegate" in event["error"]["message"]


@undelegated
def test_doctor_says_what_is_missing_what_is_degraded_and_the_fixes() -> None:
    run = sandvisor("doctor")
    assert run.returncode == 1
    text = " ".join(run.stdout.split())
    assert re.search(r"MISSING +cgroup memory", run.stdout) and f"--delegate {user_name()}" in text
    assert "no cgroup for this user" in text and "--per-process-limits" in text
    assert "a sandbox without memory and pids limits started" in text  # the smoke test


@undelegated
def test_the_commands_run_with_per_process_limits(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    run = sandvisor("exec", "--per-process-limits", "--report", str(report), "--", "id", "-u")
    assert (run.returncode, run.stdout) == (0, "1000\n"), run.stderr
    weakened = json.loads(report.read_text())["weakened"]
    assert any(w.startswith("memory: RLIMIT_AS") for w in weakened)
    assert any("shared with the host" in w for w in weakened)
    run = sandvisor("script", "--example", "--per-process-limits", "-c", "get_product --id 3")
    assert run.returncode == 0 and "lantern" in run.stdout, run.stderr
    run = sandvisor("demo", "--per-process-limits", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["ok"] is True, run.stderr


@undelegated
def test_the_hosts_run_with_per_process_limits() -> None:
    from supervisor.hosting import SyncSupervisor

    policy = SandboxPolicy(limits="per-process")
    with SyncSupervisor(adapters=[EXAMPLES], policy=policy, pool_size=1) as sup:
        out = sup.invoke("text.upper", "hi", deadline=20)
        assert (out.status, out.value) == ("completed", "HI")
