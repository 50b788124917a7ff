"""SandboxPolicy and Bind: safe defaults, and every invalid input refused at construction."""

from __future__ import annotations

import argparse

import pytest

from sandbox.cli_exec import parse_size
from sandbox.errors import PolicyError
from sandbox.policy import DEFAULT_ENV, Bind, MiB, SandboxPolicy


def test_defaults_are_the_safe_ones() -> None:
    p = SandboxPolicy()
    assert p.network is False
    assert dict(p.env) == dict(DEFAULT_ENV)
    assert p.binds == ()
    assert p.memory_bytes == 512 * MiB and p.pids == 128
    assert p.seccomp == "default"
    assert p.sandbox_uid is None  # a fresh uid per sandbox
    assert p.limits == "cgroup"  # per-process limits only when asked for
    assert p.file_size_bytes is not None and p.open_files > 0


def test_policy_is_frozen_and_env_is_a_copy() -> None:
    env = {"A": "1"}
    p = SandboxPolicy(env=env)
    env["B"] = "2"
    assert dict(p.env) == {"A": "1"}
    with pytest.raises(TypeError):
        p.env["C"] = "3"  # type: ignore[index]
    with pytest.raises(AttributeError):
        p.network = True  # type: ignore[misc]


@pytest.mark.parametrize(
    "changes",
    [
        {"network": 1},
        {"env": {"BAD-NAME": "x"}},
        {"env": {"": "x"}},
        {"env": {"A": "nul\0"}},
        {"tmpfs_bytes": 1024},
        {"memory_bytes": 1},
        {"memory_bytes": True},
        {"pids": 2},
        {"cpu_seconds": 0},
        {"open_files": 3},
        {"file_size_bytes": 0},
        {"address_space_bytes": 1024},
        {"hostname": "Bad_Host"},
        {"seccomp": "none"},
        {"sandbox_uid": 0},
        {"sandbox_uid": 65534},
        {"sandbox_uid": -5},
        {"limits": "none"},
        {"limits": "cgroups"},
        {"binds": ("/usr",)},
        {"binds": (Bind("/a", "/x"), Bind("/b", "/x"))},
    ],
)
def test_invalid_policies_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(PolicyError):
        SandboxPolicy(**changes)  # type: ignore[arg-type]


def test_seccomp_cannot_be_turned_off() -> None:
    with pytest.raises(PolicyError, match="cannot be turned off"):
        SandboxPolicy(seccomp="off")  # type: ignore[arg-type]


def test_replace_validates_again() -> None:
    p = SandboxPolicy().replace(pids=None, memory_bytes=None)
    assert p.pids is None and p.memory_bytes is None
    with pytest.raises(PolicyError):
        SandboxPolicy().replace(pids=1)


@pytest.mark.parametrize(
    "source",
    ["relative/path", "", "/a/../b", "/a/./b", "/a//b", "/a/", "//a", "/a\0b"],
)
def test_bind_sources_must_be_absolute_and_normalised(source: str) -> None:
    with pytest.raises(PolicyError):
        Bind(source)


@pytest.mark.parametrize(
    "dest", ["/", "/proc", "/proc/sys", "/dev", "/dev/shm", "/sys/fs", "/tmp", "/etc/passwd"]
)
def test_bind_destinations_reserved_by_the_layout(dest: str) -> None:
    with pytest.raises(PolicyError, match="reserved"):
        Bind("/srv/data", dest)


def test_bind_defaults_and_parse() -> None:
    assert Bind("/srv/data") == Bind("/srv/data", "/srv/data", False)
    assert Bind("/srv/data", "/tmp/work").dest == "/tmp/work"  # inside /tmp is fine
    assert Bind.parse("/a:/b", writable=True) == Bind("/a", "/b", True)
    assert Bind.parse("/a", writable=False) == Bind("/a")
    with pytest.raises(PolicyError):
        Bind.parse("/a:", writable=False)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512M", 512 << 20),
        ("1G", 1 << 30),
        ("64k", 64 << 10),
        ("100", 100),
        ("2MiB", 2 << 20),
        ("none", None),
        ("unlimited", None),
    ],
)
def test_exec_sizes(text: str, value: int | None) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["-1", "1.5G", "12X", "", "M"])
def test_exec_bad_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)
