"""An ordinary user to run sandvisor as, made and unmade by root: the rootless test runs'
(`tests/rootless/`) and the rootless side of ``scripts/bench_sandbox.py``.

`RootlessUser.create()` (as root) makes a throwaway user (``useradd``), a virtual
environment it can run (outside ``/root``, whose 0700 hides the project's own venv and
pyenv interpreters: ``/usr/bin/python3`` with the project's dependencies, built once and
cached under `CACHE` by the hash of what it holds), and a copy of the checkout it can
read (`SOURCE_PARTS`, put first on its ``PYTHONPATH``; with the real MCP test servers
where ``scripts/setup`` installed them, `ensure_mcp_python`). Then:

- `delegate(setup)`: the cgroups this user gets, as a machine would give them: ``"v1"``
  a subtree per v1 hierarchy (``sandvisor doctor --delegate USER --apply``: the command
  under test); ``"v2"`` a delegated v2 cgroup the user's runs are started in;
  ``"hybrid"`` both on a hybrid machine, whose v2 has no memory or pids to give (this
  one): v1 subtrees for the limits and a delegated v2 cgroup for ``cgroup.kill``, as
  systemd's ``--user`` scopes give a user there; ``"none"`` nothing. `v2_unavailable` and
  `hybrid_unavailable` say why a machine has no such set-up (this one: cgroup v2 is
  mounted with no controllers to give);
- `run(argv)`: a command as the user (``setpriv``), in the set-up's cgroup, with an
  optional process limit of its own;
- `destroy()`: every process of the user killed, the delegation undone, the user
  removed, the files gone, and all of it checked (``getent passwd``, the cgroup trees,
  the process table); `sweep_stale()` does the same for users of test sessions that
  died (their GECOS names the owning process).

Use it as a context manager, or call `destroy` in a ``finally`` (a pytest finaliser).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

import psutil

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path("/var/tmp/sandvisor-rootless")
#: The interpreter the user runs: the system's (an interpreter under /root is hidden).
PYTHON = "/usr/bin/python3"
#: What of the checkout the user's copy holds.
SOURCE_PARTS = ("sandbox", "supervisor", "worker_runtime", "tests", "scripts", "pyproject.toml")
#: The real MCP servers of the tests (``scripts/mcp-test-servers``), where they are installed.
MCP_SERVERS = ROOT / ".cache" / "mcp-servers"
#: Test tools the user's venv adds to the project's dependencies.
TEST_TOOLS = ("pytest>=8", "pytest-trio>=0.8", "pytest-timeout>=2.3", "hypothesis>=6.100")
MARK = "sandvisor rootless test user"
PREFIX = "svtest"

Setup = Literal["v1", "v2", "hybrid", "none"]


class RootlessSetupError(RuntimeError):
    """The machine cannot give the test its user, venv or cgroups (the message says why)."""


def require_root() -> None:
    if os.geteuid() != 0:
        raise RootlessSetupError("making a throwaway user needs root")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
            raise RootlessSetupError(f"{tool} is missing (apt-get install passwd util-linux)")


def _run(argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )
    if done.returncode != 0:
        raise RootlessSetupError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()}")
    return done


def _account(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``useradd``/``userdel``, one at a time: shadow's tools give up at once ("cannot lock
    /etc/passwd; try again later") while another holds the lock, and xdist's workers make
    users in parallel. Ours wait for each other on a file lock; another program's hold on
    /etc/passwd is waited out for up to 30 s."""
    CACHE.mkdir(mode=0o755, exist_ok=True)
    deadline = time.monotonic() + 30
    with open(CACHE / ".accounts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        while True:
            done = subprocess.run(list(argv), capture_output=True, text=True)
            if "cannot lock" not in done.stderr or time.monotonic() > deadline:
                return done
            time.sleep(0.1)


# --- the venv ---------------------------------------------------------------------------


def requirements() -> list[str]:
    """The project's dependencies, its ``mcp`` extra and `TEST_TOOLS`."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    extras = project["optional-dependencies"]["mcp"]
    return sorted([*project["dependencies"], *extras, *TEST_TOOLS])


def ensure_venv() -> Path:
    """The cached venv for this checkout's dependencies, built if missing (under a lock:
    several test processes may want it at once); world-readable."""
    version = _run([PYTHON, "-c", "import sys; print(sys.version)"]).stdout.strip()
    newer = _run([PYTHON, "-c", "import sys; print(sys.version_info >= (3, 11))"]).stdout
    if newer.strip() != "True":
        raise RootlessSetupError(f"{PYTHON} is {version}: sandvisor needs Python >= 3.11")
    key = hashlib.sha256("\n".join([version, *requirements()]).encode()).hexdigest()[:16]
    return _cached_venv(f"venv-{key}", requirements())


def ensure_mcp_python() -> Path:
    """A venv of the system python with the MCP test servers' Python side (the pins of
    ``tests/mcp/servers/requirements.txt``: mcp-server-time and the SDK the hostile server
    runs on), for the user's copy of ``.cache/mcp-servers`` (the checkout's own is made
    from an interpreter the user may not reach); cached by the pins' stamp."""
    stamp = (MCP_SERVERS / "stamp").read_text().strip()
    pins = str(ROOT / "tests/mcp/servers/requirements.txt")
    return _cached_venv(f"mcp-py-{stamp}", ["--only-binary", ":all:", "-r", pins])


def _cached_venv(name: str, pip_args: Sequence[str]) -> Path:
    """The venv ``name`` under `CACHE`: the system python's, with ``pip install
    pip_args``; built once (under a lock: several test processes may want it at once),
    world-readable."""
    venv = CACHE / name
    CACHE.mkdir(mode=0o755, exist_ok=True)
    os.chmod(CACHE, 0o755)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / "ready").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        _ensure_venv_module()
        _run([PYTHON, "-m", "venv", str(venv)])
        _run([str(venv / "bin/python"), "-m", "pip", "install", "-q", *pip_args])
        _run(["chmod", "-R", "go+rX", str(venv)])
        (venv / "ready").touch()
    return venv


def _ensure_venv_module() -> None:
    """Debian splits ``venv`` (and ``ensurepip``) out of python3: install it if missing."""
    if subprocess.run([PYTHON, "-c", "import ensurepip, venv"], capture_output=True).returncode:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "install", "-y", "-qq", "python3-venv"], env=env)


# --- the user ---------------------------------------------------------------------------


class RootlessUser:
    """One throwaway user with its venv, its copy of the checkout, its home and its set-up."""

    def __init__(self, name: str, venv: Path) -> None:
        account = pwd.getpwnam(name)
        self.name = name
        self.uid = account.pw_uid
        self.gid = account.pw_gid
        self.venv = venv
        self.base = CACHE / name
        self.home = self.base / "home"
        self.src = self.base / "src"
        self.setup: Setup = "none"
        self.v2_cgroup: Path | None = None

    @property
    def python(self) -> str:
        return str(self.venv / "bin/python")

    @classmethod
    def create(cls, *, copy: bool = True) -> RootlessUser:
        """The user, with the shared venv and a copy of the checkout; without ``copy``,
        only the user and its home (``scripts/test-as-user`` clones and sets up itself)."""
        require_root()
        venv = ensure_venv() if copy else CACHE / "no-venv"
        name = f"{PREFIX}{os.urandom(4).hex()}"
        base = CACHE / name
        base.mkdir(mode=0o755)
        gecos = f"{MARK}; owner {os.getpid()} {_start_time(os.getpid())}"
        home = str(base / "home")
        made = _account(["useradd", "-M", "-d", home, "-s", "/usr/sbin/nologin", "-c", gecos, name])
        if made.returncode != 0:
            raise RootlessSetupError(f"useradd {name}: {(made.stderr or made.stdout).strip()}")
        user = cls(name, venv)
        try:
            user.home.mkdir(mode=0o700)
            os.chown(user.home, user.uid, user.gid)
            if copy:
                user._copy_source()
        except BaseException:
            user.destroy()
            raise
        return user

    def _copy_source(self) -> None:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
        self.src.mkdir(mode=0o755)
        for part in SOURCE_PARTS:
            path = ROOT / part
            if path.is_dir():
                shutil.copytree(path, self.src / part, ignore=ignore)
            else:
                shutil.copy2(path, self.src / part)
        if (MCP_SERVERS / "stamp").exists():  # the MCP tests find them installed
            servers = self.src / ".cache" / "mcp-servers"
            servers.mkdir(parents=True)
            shutil.copytree(MCP_SERVERS / "npm", servers / "npm", symlinks=True)
            shutil.copytree(ensure_mcp_python(), servers / "py", symlinks=True)
            shutil.copy2(MCP_SERVERS / "stamp", servers / "stamp")
        # workers run from read-only binds, where Python cannot cache bytecode
        _run([PYTHON, "-m", "compileall", "-q", str(self.src / "worker_runtime")])
        _run(["chown", "-R", f"{self.uid}:{self.gid}", str(self.src)])

    # --- cgroups ----------------------------------------------------------------------

    def delegate(self, setup: Setup) -> None:
        """Give the user the cgroups of ``setup`` (see the module's docstring)."""
        self.setup = setup
        if setup == "v1":
            why = v1_unavailable()
            if why:
                raise RootlessSetupError(why)
            self._sandvisor_as_root("doctor", "--delegate", self.name, "--apply")
        elif setup == "v2":
            why = v2_unavailable()
            if why:
                raise RootlessSetupError(why)
            self.v2_cgroup = _v2_root() / f"sandvisor-{self.name}"
            self._sandvisor_as_root("doctor", "--delegate", self.name, "--apply")
        elif setup == "hybrid":
            why = hybrid_unavailable()
            if why:
                raise RootlessSetupError(why)
            self._sandvisor_as_root("doctor", "--delegate", self.name, "--apply")
            self.v2_cgroup = self._delegate_v2_kill()

    def _delegate_v2_kill(self) -> Path:
        """A v2 cgroup of the user's under the root, delegated as the kernel's model says
        (the directory, ``cgroup.procs``, ``cgroup.subtree_control``, ``cgroup.threads``);
        it gives no controller here, only ``cgroup.kill``."""
        path = _v2_root() / f"sandvisor-{self.name}"
        path.mkdir(exist_ok=True)
        for item in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
            os.chown(path / item, self.uid, self.gid)
        return path

    def undelegate(self) -> None:
        if self.setup == "hybrid" and self.v2_cgroup is not None:
            _remove_cgroup_tree(self.v2_cgroup)
        if self.setup in ("v1", "v2", "hybrid"):
            self._sandvisor_as_root("doctor", "--delegate", self.name, "--remove")
        self.setup = "none"
        self.v2_cgroup = None

    def _sandvisor_as_root(self, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        _run([sys.executable, "-m", "supervisor", *args], env=env)

    # --- running ----------------------------------------------------------------------

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(self.src),
            "SANDVISOR_ROOTLESS": self.setup,
            **(extra or {}),
        }

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as the user, in the set-up's cgroup (moved there as root first: a
        process may only be moved within cgroups its mover may write)."""
        as_user = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
        as_user += ["--", *argv]
        if self.v2_cgroup is None:
            return as_user
        procs = self.v2_cgroup / "cgroup.procs"
        return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *as_user]

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        nproc: int | None = None,
        timeout: float = 600,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as the user and wait; ``nproc``: its RLIMIT_NPROC (soft and hard)."""

        def limits() -> None:
            if nproc is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

        return subprocess.run(
            self.command(argv),
            env=self.environment(env),
            cwd=cwd or self.src,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limits,
        )

    def pytest(
        self,
        selection: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        nproc: int | None = None,
        timeout: float = 900,
    ) -> subprocess.CompletedProcess[str]:
        """pytest over ``selection`` (paths under the copy, and options) as the user, with a
        sandbox required (a skip for want of one fails). It runs in the user's home: the
        copy is on ``PYTHONPATH`` once (twice, as the working directory too, would make
        ``tests`` a namespace package of two equal paths)."""
        paths = [str(self.src / item) if not item.startswith("-") else item for item in selection]
        argv = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
        extra = {"SANDVISOR_REQUIRE_SANDBOX": "1", **(env or {})}
        return self.run(argv, env=extra, nproc=nproc, timeout=timeout, cwd=self.home)

    # --- the end ----------------------------------------------------------------------

    def processes(self) -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["uids"])
            if p.info["uids"] is not None and self.uid in p.info["uids"]
        ]

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every process of the user until none is left (a fork bomb included)."""
        deadline = time.monotonic() + timeout
        while (left := self.processes()) and time.monotonic() < deadline:
            for proc in left:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGCONT)
                    proc.send_signal(signal.SIGKILL)
            time.sleep(0.02)

    def destroy(self) -> None:
        """Everything of the user gone, and checked to be; raises if something is left."""
        problems = []
        self.kill_all()
        with contextlib.suppress(RootlessSetupError):  # what it could not do is checked below
            if self.setup == "none":  # a delegation left by a test that failed midway
                self.setup = _left_setup(self.name)
                self.v2_cgroup = _v2_kill_dir(self.name)
            self.undelegate()
        # checked while the uid is still ours: after userdel another test's new user may be
        # given the same uid at once (seen with two users made in parallel)
        if left_running := self.processes():
            problems.append(f"processes {[p.pid for p in left_running]}")
        for path in self.temp_files():  # pytest's /tmp/pytest-of-NAME, and the like
            _remove(path)
        if left_files := self.temp_files():
            problems.append(f"files {left_files}")
        _account(["userdel", self.name])
        shutil.rmtree(self.base, ignore_errors=True)
        if subprocess.run(["getent", "passwd", self.name], capture_output=True).returncode == 0:
            problems.append("the user still exists")
        if left := delegated_dirs(self.name):
            problems.append(f"cgroups {left}")
        if self.base.exists():
            problems.append(f"files in {self.base}")
        if problems:
            raise RootlessSetupError(f"rootless user {self.name} left: {'; '.join(problems)}")

    def temp_files(self) -> list[Path]:
        """What the user made in the shared temporary directories (the top entries it owns;
        looked up by uid, so only while the uid is still its own)."""
        found = []
        for top in TEMP_DIRS:
            with contextlib.suppress(OSError):
                for entry in os.scandir(top):
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_uid == self.uid:
                            found.append(Path(entry.path))
        return found

    def __enter__(self) -> RootlessUser:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.destroy()


def _v2_kill_dir(name: str) -> Path | None:
    """A hybrid set-up's v2 cgroup of user ``name``, if there is one."""
    with contextlib.suppress(RootlessSetupError):
        path = _v2_root() / f"sandvisor-{name}"
        if path.is_dir():
            return path
    return None


def _left_setup(name: str) -> Setup:
    """What a user that is being removed still has delegated (for `undelegate`)."""
    if _v2_kill_dir(name) is not None and not v1_unavailable():
        return "hybrid"
    return "v1" if delegated_dirs(name) else "none"


def _remove_cgroup_tree(path: Path) -> None:
    """Remove the cgroup ``path`` and those under it, the deepest first (their processes
    were killed already); what is left, `delegated_dirs` reports."""
    for top, _, _ in sorted(os.walk(path), key=lambda entry: -len(entry[0])):
        with contextlib.suppress(OSError):
            os.rmdir(top)


#: Where a user's processes leave files (pytest's basetemp is /tmp/pytest-of-USER).
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def delegated_dirs(name: str) -> list[str]:
    """Cgroup directories named after user ``name``, in any hierarchy."""
    top = Path("/sys/fs/cgroup")
    candidates = [top / f"sandvisor-{name}"]  # cgroup v2 mounted there
    candidates += [d / f"sandvisor-{name}" for d in top.iterdir() if d.is_dir()]  # v1
    return sorted(str(c) for c in candidates if c.is_dir())


def sweep_stale() -> list[str]:
    """Remove the test users of sessions that died without cleaning up; their names."""
    removed = []
    for account in pwd.getpwall():
        if not account.pw_name.startswith(PREFIX) or MARK not in account.pw_gecos:
            continue
        owner = account.pw_gecos.rpartition("owner ")[2].split()
        if len(owner) == 2 and str(_start_time(int(owner[0]))) == owner[1]:
            continue  # its session still runs
        user = RootlessUser(account.pw_name, Path("/nonexistent"))
        user.setup = _left_setup(user.name)
        user.v2_cgroup = _v2_kill_dir(user.name)
        with contextlib.suppress(RootlessSetupError):
            user.destroy()
        removed.append(account.pw_name)
    # the pytest directories of test users removed before destroy() removed them too
    for path in Path("/tmp").glob(f"pytest-of-{PREFIX}*"):
        name = path.name.removeprefix("pytest-of-")
        if subprocess.run(["getent", "passwd", name], capture_output=True).returncode:
            _remove(path)
    return removed


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rpartition(b")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


# --- what the machine offers ------------------------------------------------------------


def v1_unavailable() -> str:
    """Why this machine has no cgroup v1 memory and pids hierarchies to delegate, or ""."""
    missing = [c for c in ("memory", "pids") if _v1_mount(c) is None]
    if missing:
        return f"no cgroup v1 {' or '.join(missing)} hierarchy on this machine (pure cgroup v2?)"
    return ""


def _v1_mount(controller: str) -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        parts = right.split()
        if len(parts) >= 3 and parts[0] == "cgroup" and controller in parts[2].split(","):
            return left.split()[4]
    return None


def _v2_root() -> Path:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"] and left.split()[3] == "/":
            return Path(left.split()[4])
    raise RootlessSetupError("no cgroup v2 hierarchy is mounted")


def hybrid_unavailable() -> str:
    """Why this machine is not a hybrid one whose v2 hierarchy can give a user a cgroup
    for ``cgroup.kill`` beside v1 memory and pids, or ""."""
    why = v1_unavailable()
    if why:
        return why
    try:
        root = _v2_root()
    except RootlessSetupError as exc:
        return str(exc)
    if not (root / "cgroup.kill").exists() and not any(
        (d / "cgroup.kill").exists() for d in root.iterdir() if d.is_dir()
    ):
        return f"cgroup v2 at {root} has no cgroup.kill (Linux < 5.14)"
    return ""


def v2_unavailable() -> str:
    """Why this machine cannot give a user a delegated cgroup v2 with memory and pids, or
    "" (a hybrid machine mounts cgroup v2 with no controllers: they are all v1's)."""
    try:
        root = _v2_root()
    except RootlessSetupError as exc:
        return str(exc)
    available = set((root / "cgroup.controllers").read_text().split())
    if not {"memory", "pids"} <= available:
        have = ", ".join(sorted(available)) or "none"
        return (
            f"cgroup v2 at {root} offers no memory and pids controllers to delegate "
            f"(it has: {have}; they belong to the v1 hierarchies here)"
        )
    if _v1_mount("memory") is not None or _v1_mount("pids") is not None:
        return "memory and pids are cgroup v1 hierarchies here: the v1 set-up covers them"
    return ""
