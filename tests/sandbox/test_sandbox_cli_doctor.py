"""`sandvisor doctor` as a user runs it (real processes): the report and its exit status."""

from __future__ import annotations

import json
import os

import pytest
from sandbox_helpers import sandvisor

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


def test_doctor_reports_and_exits_zero_here() -> None:
    p = sandvisor("doctor")
    assert p.returncode == 0, p.stdout
    text = p.stdout.decode()
    for name in ("bubblewrap", "user namespaces", "seccomp", "cgroup memory", "smoke test"):
        assert name in text
    assert "Everything a default sandbox needs is here." in text


def test_doctor_json_names_missing_things_and_their_fix() -> None:
    p = sandvisor("doctor", "--json", "--no-smoke")
    report = json.loads(p.stdout)
    assert report["ok"] is True and p.returncode == 0
    names = {c["name"] for c in report["checks"]}
    assert {"host user", "bubblewrap version", "cgroup pids", "mount API and pidfd"} <= names
    assert {"bind by fd", "leftovers", "what root adds"} <= names
    # without bwrap the report says what is missing and how to fix it
    env = {**os.environ, "SANDVISOR_BWRAP": "/nonexistent/bwrap"}
    p = sandvisor("doctor", "--json", env=env)
    report = json.loads(p.stdout)
    assert p.returncode == 1
    missing = {c["name"]: c for c in report["checks"] if c["status"] == "missing"}
    assert report["ok"] is False and "bubblewrap" in missing
    assert "apt-get install bubblewrap" in missing["bubblewrap"]["fix"]


def test_doctor_delegate_prints_the_set_up_and_refuses_what_it_cannot_do() -> None:
    if os.geteuid() != 0:
        p = sandvisor("doctor", "--delegate", "nobody")
        assert p.returncode == 1 and b"run it as root" in p.stderr
        return
    p = sandvisor("doctor", "--delegate", "nobody")  # without --apply: printed, not done
    assert p.returncode == 0, p.stderr
    assert b"sandvisor-nobody" in p.stdout and b"--apply does it" in p.stdout
    assert not any(
        os.path.exists(f"/sys/fs/cgroup/{h}/sandvisor-nobody") for h in ("memory", "pids")
    )
    for args, status, said in (
        (("--delegate", "no-such-user-here"), 1, b"no user named"),
        (("--delegate", "root"), 1, b"root needs no delegation"),
        (("--apply",), 2, b"go with --delegate"),
        (("--delegate", "nobody", "--apply", "--remove"), 2, b"not both"),
    ):
        p = sandvisor("doctor", *args)
        assert p.returncode == status and said in p.stderr and len(p.stderr.splitlines()) == 1
