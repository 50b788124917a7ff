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
    assert {"root", "bubblewrap version", "cgroup pids", "mount API and pidfd"} <= names
    # without bwrap the report says what is missing and how to fix it
    env = {**os.environ, "SANDVISOR_BWRAP": "/nonexistent/bwrap"}
    p = sandvisor("doctor", "--json", env=env)
    report = json.loads(p.stdout)
    assert p.returncode == 1
    missing = {c["name"]: c for c in report["checks"] if c["status"] == "missing"}
    assert report["ok"] is False and "bubblewrap" in missing
    assert "apt-get install bubblewrap" in missing["bubblewrap"]["fix"]
