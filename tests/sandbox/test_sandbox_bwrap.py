"""bwrap's argv: the fixed hardening is always there, mounts keep their order."""

from __future__ import annotations

import os

import pytest

from sandbox.bwrap import (
    BwrapInvocation,
    Dev,
    Proc,
    RemountRo,
    RoBind,
    RwBind,
    Symlink,
    Tmpfs,
    build_argv,
)
from sandbox.layout import synthetic_etc, system_mounts


def invocation(**changes: object) -> BwrapInvocation:
    base: dict[str, object] = {
        "mounts": [RoBind("/usr", "/usr"), Proc(), Dev(), Tmpfs("/tmp", 1 << 20)],
        "command": ["/bin/true"],
        "env": {"PATH": "/usr/bin"},
        "seccomp_fd": 3,
        "status_fd": 4,
    }
    base.update(changes)
    return BwrapInvocation(**base)  # type: ignore[arg-type]


def test_fixed_hardening_is_always_present() -> None:
    argv = build_argv(invocation())
    for flag in (
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
        "--unshare-net",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert flag in argv, flag
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--seccomp") + 1] == "3"
    assert argv[argv.index("--json-status-fd") + 1] == "4"
    assert argv[argv.index("--uid") + 1] == "1000"
    assert "--share-net" not in argv


def test_more_arguments_come_from_an_fd_after_the_environment() -> None:
    argv = build_argv(invocation(args_fd=9))
    tail = argv[argv.index("--setenv") :]
    assert tail == ["--setenv", "PATH", "/usr/bin", "--args", "9", "--", "/bin/true"]
    assert "--args" not in build_argv(invocation())


def test_argv0_is_the_executable_unless_a_tag_is_given() -> None:
    assert build_argv(invocation(), bwrap="/usr/bin/bwrap")[0] == "/usr/bin/bwrap"
    tagged = build_argv(invocation(argv0="sandvisor-bwrap:ab12"), bwrap="/usr/bin/bwrap")
    assert tagged[0] == "sandvisor-bwrap:ab12" and tagged[1:] == build_argv(invocation())[1:]


def test_network_only_when_asked() -> None:
    assert "--unshare-net" not in build_argv(invocation(network=True))


def test_command_comes_after_the_separator_and_root_is_read_only() -> None:
    argv = build_argv(invocation(command=["--dev-bind", "/", "/"]))
    sep = argv.index("--")
    assert argv[sep + 1 :] == ["--dev-bind", "/", "/"]  # defanged: an argument, not an option
    remount = argv.index("--remount-ro")
    assert remount < sep and argv[remount + 1] == "/"  # the root itself is read-only
    assert argv[:sep].count("--dev-bind") == 0


def test_mounts_in_order_and_env_sorted() -> None:
    mounts = [
        RoBind("/a", "/a"),
        RwBind("/b", "/x"),
        Symlink("usr/bin", "/bin"),
        Tmpfs("/tmp", 42),
        RemountRo("/x"),
    ]
    argv = build_argv(invocation(mounts=mounts, env={"B": "2", "A": "1"}))
    joined = " ".join(argv)
    assert joined.index("--ro-bind /a /a") < joined.index("--bind /b /x")
    assert joined.index("--bind /b /x") < joined.index("--symlink usr/bin /bin")
    assert "--size 42 --tmpfs /tmp" in joined
    assert joined.index("--setenv A 1") < joined.index("--setenv B 2")


def test_empty_command_is_refused() -> None:
    with pytest.raises(ValueError):
        build_argv(invocation(command=[]))


def test_system_runtime_is_read_only_and_minimal() -> None:
    ops = system_mounts(False)
    assert all(isinstance(op, (RoBind, Symlink)) for op in ops)
    dests = {op.dest for op in ops}
    assert "/usr" in dests
    assert not any(d in dests for d in ("/etc", "/root", "/home", "/etc/shadow", "/var"))
    if os.path.islink("/bin"):
        assert Symlink(os.readlink("/bin"), "/bin") in ops  # merged /usr recreated
    assert "/etc/resolv.conf" not in dests  # only with the network
    if os.path.exists("/etc/resolv.conf"):
        assert "/etc/resolv.conf" in {op.dest for op in system_mounts(True)}


def test_synthetic_etc_names_the_sandbox_user_only() -> None:
    files = synthetic_etc("box")
    assert "sandbox:x:1000:1000" in files["/etc/passwd"]
    assert "box" in files["/etc/hosts"]
    with open("/etc/passwd") as f:
        host_passwd = f.read()
    extra_users = {line.split(":")[0] for line in host_passwd.splitlines()} - {"root", "nobody"}
    assert not any(f"\n{u}:" in "\n" + files["/etc/passwd"] for u in extra_users)


def test_the_fresh_etc_files_come_before_every_bind() -> None:
    from sandbox.launch import Command, prepare_launch
    from sandbox.policy import Bind, SandboxPolicy

    policy = SandboxPolicy(binds=(Bind("/usr/share", "/etc"),), memory_bytes=None, pids=None)
    try:
        plan = prepare_launch(policy, Command(("/bin/true",)))
    except Exception as exc:  # a machine without bwrap or user namespaces
        pytest.skip(str(exc))
    try:
        argv = plan.argv
        files = [i for i, a in enumerate(argv) if a == "--file"]
        binds = [i for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")]
        user_bind = argv.index("--ro-bind-fd")  # the policy's bind: from its checked fd
        assert argv[user_bind + 2] == "/etc"
        assert len(files) == 4 and max(files) < user_bind
        assert all(argv[i - 2 : i] == ["--perms", "0444"] for i in files)
        assert "--ro-bind-data" not in argv and binds
    finally:
        plan.abort()
