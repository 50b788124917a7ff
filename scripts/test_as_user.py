"""README's test command (``scripts/setup && scripts/test``) run as a throwaway ordinary
user, as a user would run it, and everything of that user removed afterwards. As root::

    scripts/test-as-user [--cgroups auto|v1|v2|none] [--nice N] [-- PYTEST ARGS...]

1. a user (``useradd``, a nologin shell; `tests/rootless_env.py`: its GECOS names this
   process, so a later run, or the rootless tests, sweep it if this one is killed);
2. a clone of this checkout's HEAD in its home, owned by it (committed work only);
3. its cgroups, delegated as docs/sandbox.md tells an administrator to:
   ``sandvisor doctor --delegate USER --apply`` (``auto``: v1 subtrees where the machine
   has v1 memory and pids, else a delegated v2 cgroup, else none: then the tests that
   need limits skip, saying why);
4. as the user, under ``nice``: ``scripts/setup`` (its own ``.venv``, the MCP test servers
   where npm is), ``sandvisor doctor``, then ``scripts/test`` with the arguments;
5. whatever happened (a failure, Ctrl-C, SIGTERM): every process of the user killed, the
   delegation undone, the user, its home and its temporary files removed, and all of it
   checked (`RootlessUser.destroy`).

Exit status: ``scripts/test``'s; 125 when the user or its set-up could not be made, with
the reason in one line. Not part of ``scripts/test`` (CI runs the suite as root, where
``tests/rootless/`` runs the sandbox, supervisor and command tests as such a user): the
whole suite as a user takes as long again, plus a minute or two of set-up.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import rootless_env  # noqa: E402
from rootless_env import RootlessSetupError, RootlessUser, Setup  # noqa: E402

#: What of root's environment the user's set-up needs to reach the package registries the
#: same way (certificates, proxies, pip's options); nothing else is passed.
PASSED_ON = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "no_proxy", "NO_PROXY")
PASSED_ON_PREFIXES = ("PIP_", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/test-as-user",
        description="Run scripts/setup && scripts/test as a throwaway ordinary user (as root).",
    )
    parser.add_argument("--cgroups", choices=("auto", "v1", "v2", "none"), default="auto")
    parser.add_argument("--nice", type=int, default=5, help="the user's niceness (5)")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to scripts/test")
    return parser.parse_args(argv)


def choose(cgroups: str) -> Setup:
    if cgroups == "auto":
        if not rootless_env.v1_unavailable():
            return "v1"
        return "none" if rootless_env.v2_unavailable() else "v2"
    setup: Setup = cgroups  # type: ignore[assignment]
    return setup


def environment(user: RootlessUser) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(user.home),
        "USER": user.name,
        "LOGNAME": user.name,
        "LANG": "C.UTF-8",
    }
    for key, value in os.environ.items():
        if key in PASSED_ON or key.startswith(PASSED_ON_PREFIXES):
            env[key] = value
    return env


def as_user(user: RootlessUser, niceness: int, argv: list[str], cwd: Path) -> int:
    command = user.command(["nice", "-n", str(niceness), *argv])
    return subprocess.run(command, env=environment(user), cwd=cwd).returncode


def clone(user: RootlessUser) -> Path:
    """HEAD's clone, the user's. Never with hardlinks (a local clone's default): the chown
    would hand this repository's own object files to the user (seen: 5,301 of main's)."""
    checkout = user.home / "sandvisor"
    done = subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(checkout)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RootlessSetupError(f"git clone {ROOT}: {done.stderr.strip()}")
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(checkout)], check=True)
    return checkout


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        rootless_env.require_root()
    except RootlessSetupError as exc:
        print(f"test-as-user: {exc}: run it as root", file=sys.stderr)
        return 125

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # the clean-up below runs

    signal.signal(signal.SIGTERM, stop)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    ).stdout.strip()
    user: RootlessUser | None = None
    status = 125
    try:
        rootless_env.sweep_stale()
        user = RootlessUser.create(copy=False)
        checkout = clone(user)
        setup = choose(args.cgroups)
        user.delegate(setup)
        print(f"test-as-user: user {user.name} (uid {user.uid}), cgroups: {setup}, {head}")
        print(f"test-as-user: {checkout}: scripts/setup (load {load()})", flush=True)
        if as_user(user, args.nice, ["scripts/setup"], checkout):
            print("test-as-user: scripts/setup failed as the user", file=sys.stderr)
            return status
        as_user(user, args.nice, [".venv/bin/sandvisor", "doctor", "--no-smoke"], checkout)
        print(f"test-as-user: scripts/test {' '.join(args.pytest_args)} (load {load()})")
        started = time.monotonic()
        status = as_user(user, args.nice, ["scripts/test", *args.pytest_args], checkout)
        minutes = (time.monotonic() - started) / 60
        print(f"test-as-user: scripts/test exited {status} in {minutes:.1f} min (load {load()})")
        return status
    except RootlessSetupError as exc:
        print(f"test-as-user: {exc}", file=sys.stderr)
        return 125
    except KeyboardInterrupt:
        print("test-as-user: interrupted", file=sys.stderr)
        return 130
    finally:
        if user is not None:
            try:
                user.destroy()
                print(f"test-as-user: user {user.name} and everything of it removed")
            except RootlessSetupError as exc:
                print(f"test-as-user: {exc}", file=sys.stderr)
                status = status or 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
