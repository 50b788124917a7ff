"""bubblewrap containment: policy, argv, seccomp, limits, teardown, environment probe.

A sandbox is one bwrap process tree that runs as the host's own uid (rootless, the normal
way) or, for a root host, as a fresh non-root uid of its own, in new user, pid, mount,
ipc, uts, cgroup (and network) namespaces, with no capabilities, our seccomp filter, a
read-only root, a private size-limited ``/tmp``, an empty environment plus an allowlist,
cgroups of its own for memory and pids (root's, or delegated to the user), and rlimits.
Nothing falls back: what the machine lacks for this host fails the launch with
`SandboxUnavailable` (``sandvisor doctor`` says what and how to fix it); weaker
per-process limits are only ever the policy's explicit choice (``limits="per-process"``).

Running one program (``sandvisor exec`` and the tests)::

    from sandbox import SandboxPolicy, run
    result = run(SandboxPolicy(), ["/bin/echo", "hi"], timeout=5)
    result.stdout, result.exit_status, result.termination.reason

Running a worker from a trio supervisor::

    from sandbox import SandboxPolicy, Spawner, prepare_launch, worker_command

    command = worker_command(["mypkg.tools:registry"])     # python -m worker_runtime ...
    h2w_r, h2w_w = os.pipe(); w2h_r, w2h_w = os.pipe()      # the protocol pipes
    with Spawner() as spawner:                              # one per supervisor
        plan = prepare_launch(policy, command, fds={3: h2w_r, 4: w2h_w})
        sandbox = await spawner.spawn_async(plan, stdout=PIPE, stderr=PIPE)
        os.close(h2w_r); os.close(w2h_w)                   # the child has its copies
        try:
            ...                                             # speak on h2w_w / w2h_r
            await sandbox.wait_async()
        finally:
            sandbox.kill("cancelled")                       # idempotent, synchronous
            termination = sandbox.termination(timed_out=deadline_fired)
            sandbox.cleanup()                               # reaps, proves, removes cgroups

The pieces:

- `SandboxPolicy` (frozen, validated; safe defaults), `Bind` (explicit extra mounts) and
  `NetworkAllowlist` (``network=[...]``: the host's proxy, `sandbox.netproxy`).
- `Command` (argv + the binds, env and masks it needs); `worker_command` and
  `python_command` compute those for Python: the interpreter's prefix, the stdlib,
  ``msgspec``, ``worker_runtime`` and each adapter's top-level package under a synthetic
  ``/opt/sandvisor/lib``; nothing else of the project, the venv or the supervisor.
- `prepare_launch(policy, command, fds={3: r, 4: w}) -> LaunchPlan`: bwrap's argv, its
  (empty) environment, the fds to keep, and the ``preexec_fn`` that maps the given fds onto
  exactly those child fd numbers, joins the sandbox's cgroups, sets rlimits, drops to the
  sandbox uid (as root) and arms ``PR_SET_PDEATHSIG`` after checking the parent is alive. The child
  sees fds 0-2 and the mapped ones, nothing else (bwrap's seccomp and status fds included).
- `Spawner`: the thread sandboxes belong to. ``PR_SET_PDEATHSIG`` follows the parent
  *thread*; ``trio.lowlevel.open_process`` forks from trio's thread cache, whose threads
  exit after 10 s idle and take the sandbox with them. Use `Spawner.spawn_async` instead.
  ``sandbox.spawn.spawn`` starts sandboxes for the calling thread (for synchronous code
  that waits on the same thread).
- Fork servers (`sandbox.forkserver`): each spawning thread's sandboxes are forked by a
  small single-threaded interpreter that thread started, with
  ``clone3(CLONE_PARENT | CLONE_INTO_CGROUP)``: cheap to fork, born in their cgroup, and
  the thread's own children (reaped, waited on and PDEATHSIG'd as if it had forked them).
- A sandbox dies with the thread that spawned it and with its host, whatever bwrap 0.8.0's
  start-up race does: a per-thread record kills what a finished thread left running, and
  one lifeline process per host (`sandbox.lifeline`) kills and removes every cgroup of a
  host that died. `Spawner.close` retires the lifeline when no sandbox is left.
- `Sandbox` (the handle): ``kill(reason)`` (the pid namespace's init first, then the
  cgroup; SIGCONT before SIGKILL), ``wait``/``wait_async``/``poll`` on a pidfd, ``termination``
  (`Termination`: reason ``exited``/``signal``/``timeout``/``cpu``/``memory``/``pids``/
  ``killed``/``setup``, exit code, signal, limits hit, peak memory), ``survivors()``
  (psutil), ``cleanup()`` (kill, reap, prove nothing survives, remove cgroups).
- `run(policy, argv, *, timeout, stdout_cap, stderr_cap, input=None) -> RunResult`.
- `sandbox.gate.require(policy)`: what every launch consults (the first thing missing
  raises `SandboxUnavailable` with its fix); `sandbox.probe.probe()`: the report
  ``sandvisor doctor`` prints (`ProbeReport`).
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: importing typing (and re, enum...) would weigh on the fork
# server, which imports this package. Type checkers treat the name as true.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from .command import Command
    from .errors import (
        ContainmentError,
        LaunchError,
        PolicyError,
        SandboxError,
        SandboxUnavailable,
    )
    from .handle import Sandbox
    from .launch import LaunchPlan, prepare_launch
    from .netproxy.policy import NetworkAllowlist
    from .policy import Bind, SandboxPolicy
    from .probe import ProbeReport
    from .pyworker import python_command, worker_command
    from .runner import RunResult, run
    from .spawn import Spawner
    from .termination import Termination

__all__ = [
    "Bind",
    "Command",
    "ContainmentError",
    "LaunchError",
    "LaunchPlan",
    "NetworkAllowlist",
    "PolicyError",
    "ProbeReport",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxPolicy",
    "SandboxUnavailable",
    "Spawner",
    "Termination",
    "prepare_launch",
    "python_command",
    "run",
    "worker_command",
]

# Everything is imported on first use: `from sandbox import SandboxPolicy` stays light (no
# ctypes, psutil or subprocess machinery), and the fork server, which imports only
# `sandbox.childsetup` and `sandbox.linux`, pays for nothing else (each module it holds
# makes every fork it does dearer).
_LAZY = {
    "Bind": "policy",
    "SandboxPolicy": "policy",
    "ContainmentError": "errors",
    "LaunchError": "errors",
    "PolicyError": "errors",
    "SandboxError": "errors",
    "SandboxUnavailable": "errors",
    "Sandbox": "handle",
    "Command": "command",
    "LaunchPlan": "launch",
    "prepare_launch": "launch",
    "NetworkAllowlist": "netproxy.policy",
    "ProbeReport": "probe",
    "python_command": "pyworker",
    "worker_command": "pyworker",
    "RunResult": "runner",
    "run": "runner",
    "Spawner": "spawn",
    "Termination": "termination",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
