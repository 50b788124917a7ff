"""The staged path's ``preexec_fn``: runs in the forked child, as root, before bwrap.

Used when a launch needs what only code in the child can do: map the caller's fds onto
exact numbers (a worker's protocol pipes on 3 and 4), or attach pinned bind sources that
the sandbox's uid could not reach by path. In order: remap fds, join the cgroups (so
nothing of the sandbox ever runs outside them), set rlimits, stage pinned trees in a
private mount namespace, drop to the sandbox uid, arm ``PR_SET_PDEATHSIG`` (after the
uid change, which clears it) and check the parent is still there (bwrap #633).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import signal
from dataclasses import dataclass

from . import linux
from .termination import SETUP_ERROR_KEY

#: In the child's private mount namespace a tmpfs here holds the staged mounts. bwrap
#: mounts its own root over /tmp and finds them again at /oldroot/tmp.
STAGE = "/tmp"


@dataclass(frozen=True)
class ChildSetup:
    fd_map: tuple[tuple[int, int], ...]  # (child fd, parent fd)
    cgroup_fds: tuple[int, ...]
    rlimits: tuple[tuple[int, int, int], ...]
    trees: tuple[tuple[str, int, bool], ...]  # (stage path, tree fd, is dir)
    uid: int
    parent_pid: int
    status_fd: int  # where a set-up error is reported (the parent's number, still open)

    def __call__(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            line = json.dumps({SETUP_ERROR_KEY: f"{type(exc).__name__}: {exc}"}) + "\n"
            with contextlib.suppress(OSError):
                os.write(self.status_fd, line.encode())
            raise

    def _run(self) -> None:
        temps = [(t, fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, 64)) for t, src in self.fd_map]
        for target, temp in temps:
            os.dup2(temp, target, inheritable=True)
        for fd in self.cgroup_fds:
            os.write(fd, b"0")
        for res, soft, hard in self.rlimits:
            resource.setrlimit(res, (soft, hard))
        if self.trees:
            linux.unshare_mount_namespace()
            linux.make_mounts_private_slaves()
            linux.mount_tmpfs(STAGE, "mode=0755,size=64k")
            for path, tree_fd, is_dir in self.trees:
                if is_dir:
                    os.mkdir(path)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
                linux.attach_tree(tree_fd, path)
        os.setgroups([])
        os.setresgid(self.uid, self.uid, self.uid)
        os.setresuid(self.uid, self.uid, self.uid)
        linux.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != self.parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)  # the parent died before we armed it
