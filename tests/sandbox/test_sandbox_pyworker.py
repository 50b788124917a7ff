"""A Python worker in a real sandbox: only the modules it was given, the protocol on fds 3
and 4 and nothing else, and a real ``python -m worker_runtime`` session end to end."""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path

import msgspec
import pytest
from sandbox_helpers import PREFIX

from sandbox.errors import PolicyError
from sandbox.launch import Command, prepare_launch
from sandbox.policy import Bind, SandboxPolicy
from sandbox.pyworker import SITE, python_command, worker_command
from sandbox.runner import run
from sandbox.spawn import spawn
from supervisor.workers.session_keys import derive_keys, new_session_id, new_session_key
from worker_runtime.protocol.bootstrap import encode_bootstrap
from worker_runtime.protocol.framing import LineReader
from worker_runtime.protocol.host import HostConnection, ResultReceived, WorkerReady
from worker_runtime.protocol.messages import Grant

EXAMPLES = "worker_runtime.examples:registry"
ROOT = Path(__file__).resolve().parents[2]
#: The interpreter under /usr (the system's, as a rootless host's is): nothing to bind.
PREFIX_IN_USR = PREFIX == "/usr" or PREFIX.startswith("/usr/")


def test_worker_command_binds_only_what_the_worker_needs() -> None:
    command = worker_command([EXAMPLES, "tests.worker_runtime.hostile_adapters:registry"])
    dests = {b.dest: b.source for b in command.binds}
    prefix = {} if PREFIX_IN_USR else {PREFIX: PREFIX}  # /usr is there already
    assert dests == {
        **prefix,
        f"{SITE}/worker_runtime": str(ROOT / "worker_runtime"),
        f"{SITE}/msgspec": os.path.dirname(msgspec.__file__ or ""),
        f"{SITE}/tests": str(ROOT / "tests"),
    }
    assert all(not b.writable for b in command.binds)
    assert command.argv[1:5] == ("-S", "-P", "-m", "worker_runtime")
    assert command.argv[5:] == (
        "--adapters",
        EXAMPLES,
        "--adapters",
        "tests.worker_runtime.hostile_adapters:registry",
    )
    assert command.env["PYTHONPATH"] == SITE and command.env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert PREFIX_IN_USR or command.masks  # the bound prefix's site-packages
    assert all(m.startswith(PREFIX) for m in command.masks)
    assert not any(str(ROOT) == b.source or b.source.endswith(".venv") for b in command.binds)


def test_module_lookup_imports_nothing_and_refuses_what_is_missing() -> None:
    before = set(sys.modules)
    python_command("json.tool", modules=["tests.worker_runtime.hostile_adapters"])
    assert not {"tests.worker_runtime.hostile_adapters", "tests.worker_runtime"} & (
        set(sys.modules) - before
    )
    with pytest.raises(PolicyError, match="not installed"):
        python_command("no_such_module_xyz")
    with pytest.raises(PolicyError, match="not found"):
        python_command("json.tool", modules=["tests.worker_runtime.no_such_adapters"])
    with pytest.raises(PolicyError, match="MODULE:ATTR"):
        worker_command(["worker_runtime.examples"])


VIEW = """
import json, os, sys
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        return e.strerror
site = [p for p in sys.path if "site-packages" in p]
out = {"site": listing("/opt/sandvisor/lib"), "path": sys.path, "site_on_path": site,
       "prefix_site": listing(sys.prefix + "/lib/python3.11/site-packages"),
       "work": os.path.exists("/work"), "venv": os.path.exists(sys.prefix + "/../.venv"),
       "modules": {}}
for name in ("msgspec", "worker_runtime", "tests.worker_runtime.hostile_adapters", "pytest", "trio",
             "supervisor", "sandbox", "cryptography"):
    try:
        __import__(name); out["modules"][name] = True
    except ImportError:
        out["modules"][name] = False
print(json.dumps(out))
"""


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_the_worker_sees_only_its_modules() -> None:
    base = python_command(
        "json.tool", modules=["worker_runtime", "msgspec", "tests.worker_runtime.hostile_adapters"]
    )
    command = Command((base.argv[0], "-S", "-P", "-c", VIEW), base.binds, base.env, base.masks)
    result = run(SandboxPolicy(), command, timeout=30)
    assert result.reason == "exited", result.stderr
    seen = json.loads(result.stdout)
    assert seen["site"] == ["msgspec", "tests", "worker_runtime"]
    assert seen["site_on_path"] == []  # not on sys.path
    if not PREFIX_IN_USR:  # the bound prefix's site-packages: masked (/usr's is the system's)
        assert seen["prefix_site"] == []
    assert seen["work"] is False and seen["venv"] is False
    assert seen["modules"] == {
        "msgspec": True,
        "worker_runtime": True,
        "tests.worker_runtime.hostile_adapters": True,
        "pytest": False,
        "trio": False,
        "supervisor": False,
        "sandbox": False,
        "cryptography": False,
    }


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_a_bind_under_tmp_is_seen_beside_pinned_sources(tmp_path: Path) -> None:
    # The interpreter's prefix (under the 0700 /root here) is pinned and staged on a
    # tmpfs at /tmp in the child; a checkout under /tmp (a CI clone) must stay visible.
    assert str(tmp_path).startswith("/tmp/")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "note.txt").write_text("seen\n")
    shared.chmod(0o755)
    for parent in (tmp_path, *tmp_path.parents):  # pytest's own are 0700
        if parent.stat().st_uid == os.geteuid() and str(parent) != "/":
            parent.chmod(parent.stat().st_mode | 0o005)
    base = python_command("json.tool")
    script = "print(open('/opt/shared/note.txt').read(), end='')"
    command = Command(
        (base.argv[0], "-S", "-P", "-c", script),
        (*base.binds, Bind(str(shared), "/opt/shared")),
        base.env,
        base.masks,
    )
    result = run(SandboxPolicy(), command, timeout=30)
    assert result.reason == "exited", result.stderr
    assert result.stdout == b"seen\n"


def _read_line(fd: int, reader: LineReader, timeout: float = 20.0) -> bytes:
    deadline = time.monotonic() + timeout
    while (line := reader.next_line()) is None:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "no frame from the worker in time"
        data = os.read(fd, 65536)
        assert data, "the worker closed its protocol pipe"
        reader.feed(data)
    return line


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_a_real_worker_session_in_the_sandbox() -> None:
    sid, key = new_session_id(), new_session_key()
    grants = [Grant("text.upper", "text", 4, 1024, 1024, None)]
    conn = HostConnection(sid, derive_keys(key), grants, 1)
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    plan = prepare_launch(
        SandboxPolicy(), worker_command([EXAMPLES]), fds={3: to_worker_r, 4: from_worker_w}
    )
    with spawn(plan) as sandbox:
        os.close(to_worker_r)
        os.close(from_worker_w)
        reader = LineReader()
        os.write(to_worker_w, encode_bootstrap(sid, key) + conn.open())
        ready = conn.receive(_read_line(from_worker_r, reader))
        assert isinstance(ready, WorkerReady)
        assert "text.upper" in [t.name for t in ready.tools]
        rid, line = conn.invoke("text.upper", "sandboxed", idempotency_key="k-1")
        os.write(to_worker_w, line)
        result = conn.receive(_read_line(from_worker_r, reader))
        assert isinstance(result, ResultReceived) and result.rid == rid
        assert result.payload.value == "SANDBOXED"
        os.write(to_worker_w, conn.close())
        assert sandbox.wait(20) == 0  # the worker's clean exit after close
        assert sandbox.termination().reason == "exited"
    os.close(to_worker_w)
    os.close(from_worker_r)
