#!/usr/bin/env python3
"""Sandbox benchmarks, against baselines measured in the same run (the machines are noisy).

1. Start-up: `sandbox.run(SandboxPolicy(), ["/bin/true"])` (what `sandvisor exec` does, in
   the default policy) against a bare ``bwrap --ro-bind / / --unshare-all /bin/true``
   started from the same process, runs interleaved, median of N each, in a few rounds
   (each printed; the headline is their median). Target: at most 3 ms above bare bwrap.
   Printed in wall time and in CPU time (this process, its reaped children and the fork
   servers that work for it: steadier than wall time when the machine is shared), with
   the CPU split by process.
2. Where one launch's time goes: the wall time of each phase of ours (host-side
   timestamps), and the components measured alone: a fork of this process and of a
   minimal interpreter (what a fork server is), a sandbox's cgroups created and removed,
   and a child joining a fresh cgroup through ``cgroup.procs`` or through ``tasks``
   after an idle pause (the first takes the kernel's global threadgroup lock, which waits
   for an RCU grace period; the second moves one thread without it).
3. The `sandvisor exec` command end to end, against ``python -c pass`` (information).
4. Teardown: a sandbox with 50 processes; from `kill()` until bwrap is reaped and its
   cgroups are empty. Target: within 100 ms.
5. Rootless against root, in the same run: `run()` of ``/bin/true`` and a worker's start
   (``prepare_launch`` to its ``ready``), measured by the same code and interpreter in
   child processes, one as root and one as a throwaway ordinary user with cgroups
   delegated (`tests/rootless_env.py`: v1 subtrees here, a v2 cgroup where the machine
   has one), alternating rounds. Targets: rootless at most 1.2x root, each.

Usage: ``.venv/bin/python scripts/bench_sandbox.py [--runs N] [--only-rootless]`` (as
root, like CI). On a shared machine, ``nice -n -15`` keeps other jobs from stretching the
wall times.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sandbox import cgroups
from sandbox.launch import Command, prepare_launch, warm_up
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BARE = ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "/bin/true"]
TRUE = Command(("/bin/true",))


def helper_cpu_ms() -> float:
    """CPU time of the fork servers (live children of this process that run
    ``sandbox.forkserver_main``), from ``schedstat`` (nanoseconds, unlike ``stat``)."""
    total = 0.0
    for pid in _children():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"sandbox.forkserver_main" not in f.read():
                    continue
            with open(f"/proc/{pid}/schedstat") as f:
                total += int(f.read().split()[0]) / 1e6
        except OSError:
            continue
    return total


def _children() -> list[int]:
    pids = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return pids


def cpu_parts() -> tuple[float, float, float]:
    """CPU ms so far of (this process, its reaped children, the fork servers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        (own.ru_utime + own.ru_stime) * 1000,
        (kids.ru_utime + kids.ru_stime) * 1000,
        helper_cpu_ms(),
    )


def cpu_ms() -> float:
    return sum(cpu_parts())


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    c0, t0 = cpu_ms(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000, cpu_ms() - c0


def cpu_split(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Mean CPU ms per call of each of ``fns`` (interleaved, as the headline is) spent by
    this process, by its reaped children (the sandbox: its set-up, bwrap and the program)
    and by the fork servers."""
    totals = {name: [0.0, 0.0, 0.0] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            before = cpu_parts()
            fn()
            after = cpu_parts()
            for i in range(3):
                totals[name][i] += (after[i] - before[i]) / runs
    return totals


def interleaved(
    fns: dict[str, Callable[[], object]], runs: int
) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            out[name].append(timed(fn))
    return out


def med(samples: list[tuple[float, float]], index: int) -> float:
    return statistics.median(s[index] for s in samples)


def bare() -> None:
    subprocess.run(BARE, check=True)


def ours() -> None:
    result = run(SandboxPolicy(), ["/bin/true"], timeout=30)
    assert result.exit_status == 0, result.termination


def phases(runs: int) -> dict[str, float]:
    """Median wall ms of each step of one launch, from the host's side ("bwrap set-up"
    ends when bwrap reports its sandbox's pid, all namespaces made)."""
    names = ("prepare", "fork+set-up+exec", "bwrap set-up", "sandbox to exit", "cleanup")
    steps: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(runs):
        t0 = time.perf_counter()
        plan = prepare_launch(SandboxPolicy(), TRUE)
        status_fd = plan.status_read_fd
        t1 = time.perf_counter()
        sandbox = spawn(plan)
        t2 = time.perf_counter()
        warm_up()  # as `run` does: the next launch's cgroups, while bwrap sets this one up
        while sandbox.status.child_pid is None and sandbox.poll() is None:
            select.select([status_fd], [], [], 1.0)  # bwrap's namespaces exist
        t3 = time.perf_counter()
        sandbox.wait()
        t4 = time.perf_counter()
        sandbox.termination()
        sandbox.cleanup()
        t5 = time.perf_counter()
        for name, a, b in zip(names, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5), strict=True):
            steps[name].append((b - a) * 1000)
    return {name: statistics.median(values) for name, values in steps.items()}


def fork_ms(python: list[str] | None, runs: int = 100) -> float:
    """Median ms of fork + _exit + wait, in this process or in a fresh interpreter."""
    code = (
        "import os, time, statistics\nts = []\n"
        f"for _ in range({runs}):\n"
        "    t = time.perf_counter(); pid = os.fork()\n"
        "    if pid == 0: os._exit(0)\n"
        "    os.waitpid(pid, 0); ts.append((time.perf_counter() - t) * 1000)\n"
        "result = statistics.median(ts)\n"
    )
    if python is None:
        scope: dict[str, float] = {}
        exec(code, scope)
        return scope["result"]
    argv = [*python, "-c", code + "print(result)"]
    return float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def cgroup_ms(runs: int) -> tuple[float, float]:
    """Median ms to create a default sandbox's cgroups (limits set), and to remove them."""
    layout = cgroups.detect_layout()
    made, removed = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        group = cgroups.SandboxCgroup.create(
            layout, cgroups.sandbox_cgroup_name(0x7F000000), memory_bytes=512 << 20, pids=128
        )
        t1 = time.perf_counter()
        group.remove()
        t2 = time.perf_counter()
        made.append((t1 - t0) * 1000)
        removed.append((t2 - t1) * 1000)
    return statistics.median(made), statistics.median(removed)


def join_ms(filename: str, runs: int, pause: float = 0.05) -> float | None:
    """Median ms for a forked child to move itself into a fresh v1 memory cgroup through
    ``filename``, each after ``pause`` seconds of quiet (None without a v1 memory)."""
    layout = cgroups.detect_layout()
    parent = next(
        (h.parent for h in layout.hierarchies if h.version == 1 and "memory" in h.roles), None
    )
    if parent is None:
        return None
    samples = []
    for i in range(runs):
        path = os.path.join(parent, f"sv-bench-join-{os.getpid()}-{i}")
        os.mkdir(path)
        try:
            fd = os.open(os.path.join(path, filename), os.O_WRONLY | os.O_CLOEXEC)
            read, write = os.pipe()
            time.sleep(pause)
            pid = os.fork()
            if pid == 0:
                t0 = time.perf_counter()
                os.write(fd, b"0")
                os.write(write, str((time.perf_counter() - t0) * 1000).encode())
                os._exit(0)
            os.close(write)
            samples.append(float(os.read(read, 64)))
            os.waitpid(pid, 0)
            os.close(read)
            os.close(fd)
        finally:
            os.rmdir(path)
    return statistics.median(samples)


FIFTY = (
    "/bin/sh",
    "-c",
    "i=0; while [ $i -lt 48 ]; do sleep 1000 & i=$((i+1)); done; echo ready; wait",
)


def teardown_once() -> float:
    """ms from kill() until bwrap is reaped and nothing is left in the cgroups."""
    plan = prepare_launch(SandboxPolicy(), Command(FIFTY))
    sandbox = spawn(plan, stdout=subprocess.PIPE)
    try:
        assert sandbox.popen.stdout is not None and plan.cgroup is not None
        assert sandbox.popen.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while len(plan.cgroup.pids()) < 50 and time.monotonic() < deadline:
            time.sleep(0.001)  # bwrap, its init, sh and 48 sleepers (51 with init)
        assert len(plan.cgroup.pids()) >= 50, len(plan.cgroup.pids())
        t0 = time.perf_counter()
        sandbox.kill("teardown")
        sandbox.wait()
        while plan.cgroup.pids():
            time.sleep(0.0002)
        elapsed = (time.perf_counter() - t0) * 1000
        assert not sandbox.survivors()
        return elapsed
    finally:
        sandbox.cleanup()


def startup_round(runs: int) -> tuple[float, float, float, float]:
    """(bare wall, ours wall, bare CPU, ours CPU): medians of ``runs`` interleaved runs."""
    samples = interleaved({"bare bwrap": bare, "sandvisor run": ours}, runs)
    bare_s, ours_s = samples["bare bwrap"], samples["sandvisor run"]
    return med(bare_s, 0), med(ours_s, 0), med(bare_s, 1), med(ours_s, 1)


# --- 5. rootless against root -----------------------------------------------------------


def worker_ready_once() -> float:
    """ms from `prepare_launch` of a worker to its ``ready`` (the protocol's first frame)."""
    from sandbox.pyworker import worker_command
    from supervisor.workers.session_keys import derive_keys, new_session_id, new_session_key
    from worker_runtime.protocol.bootstrap import encode_bootstrap
    from worker_runtime.protocol.framing import LineReader
    from worker_runtime.protocol.host import HostConnection, WorkerReady
    from worker_runtime.protocol.messages import Grant

    sid, key = new_session_id(), new_session_key()
    conn = HostConnection(
        sid, derive_keys(key), [Grant("text.upper", "text", 4, 1024, 1024, None)], 1
    )
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    t0 = time.perf_counter()
    plan = prepare_launch(
        SandboxPolicy(), worker_command(["worker_runtime.examples:registry"]),
        fds={3: to_r, 4: from_w},
    )  # fmt: skip
    sandbox = spawn(plan)
    try:
        os.close(to_r)
        os.close(from_w)
        os.write(to_w, encode_bootstrap(sid, key) + conn.open())
        reader = LineReader()
        while (line := reader.next_line()) is None:
            select.select([from_r], [], [], 30)
            data = os.read(from_r, 65536)
            assert data, "the worker closed its protocol pipe"
            reader.feed(data)
        assert isinstance(conn.receive(line), WorkerReady)
        return (time.perf_counter() - t0) * 1000
    finally:
        sandbox.kill("done")
        sandbox.cleanup()
        os.close(to_w)
        os.close(from_r)


def measure(runs: int) -> dict[str, float | str]:
    """What a child prints for section 5 (JSON): medians of ``runs`` of each."""
    ours()
    worker_ready_once()  # warm: the fork server, the module lookups, the page cache
    launch = [timed(ours)[0] for _ in range(runs)]
    ready = [worker_ready_once() for _ in range(max(5, runs // 3))]
    from sandbox.limits import enforce

    layout = cgroups.detect_layout()
    return {
        "run_ms": statistics.median(launch),
        "ready_ms": statistics.median(ready),
        "uid": os.geteuid(),
        "limits": "per-process"
        if enforce(SandboxPolicy(), layout, "host").per_process
        else "cgroup",
    }


def rootless_against_root(runs: int, rounds: int) -> None:
    """Section 5: the same measurement as root and as an ordinary user, alternating."""
    import json

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import rootless_env

    if os.geteuid() != 0:
        print("rootless against root: skipped (it makes a user: run the bench as root)")
        return
    setup: rootless_env.Setup = "none"
    if not rootless_env.v1_unavailable():
        setup = "v1"
    elif not rootless_env.v2_unavailable():
        setup = "v2"
    with rootless_env.RootlessUser.create() as user:
        user.delegate(setup)
        child = user.src / "bench_sandbox.py"  # the user's copy (this one may be under /root)
        shutil.copy(__file__, child)
        argv = [user.python, str(child), "--measure", str(runs)]
        print(
            f"rootless against root: run(/bin/true) and a worker's start to ready, median of "
            f"{runs} and {max(5, runs // 3)} per child, {rounds} rounds; the rootless user's "
            f"cgroups: {setup}; the same interpreter ({user.python}) and code for both"
        )
        results: dict[str, list[dict[str, float | str]]] = {"root": [], "rootless": []}
        env = user.environment()
        for number in range(1, rounds + 1):
            as_root = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
            as_user = user.run(argv)
            if as_user.returncode != 0:
                raise SystemExit(f"the rootless child failed: {as_user.stderr[-2000:]}")
            root_r, user_r = json.loads(as_root.stdout), json.loads(as_user.stdout)
            results["root"].append(root_r)
            results["rootless"].append(user_r)
            print(
                f"  round {number}: run root {root_r['run_ms']:6.2f} rootless "
                f"{user_r['run_ms']:6.2f} ms; ready root {root_r['ready_ms']:6.2f} rootless "
                f"{user_r['ready_ms']:6.2f} ms ({user_r['limits']} limits)"
            )
        for key, what in (("run_ms", "run() of /bin/true"), ("ready_ms", "worker start to ready")):
            root_v = statistics.median(float(r[key]) for r in results["root"])
            user_v = statistics.median(float(r[key]) for r in results["rootless"])
            print(
                f"  {what}: root {root_v:7.2f} ms   rootless {user_v:7.2f} ms   "
                f"ratio {user_v / root_v:5.2f}   (target: 1.2)"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="start-up comparisons to repeat")
    parser.add_argument("--only-rootless", action="store_true", help="section 5 alone")
    parser.add_argument("--measure", type=int, metavar="RUNS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:  # a child of section 5
        import json

        print(json.dumps(measure(args.measure)))
        return 0
    if args.only_rootless:
        rootless_against_root(args.runs, args.rounds)
        return 0
    runs = args.runs
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    ours()
    bare()  # warm caches
    print(
        f"sandbox start-up, /bin/true, median of {runs} interleaved runs each, {args.rounds} rounds"
    )
    rounds = []
    for number in range(1, args.rounds + 1):
        b_wall, o_wall, b_cpu, o_cpu = startup_round(runs)
        rounds.append((b_wall, o_wall, b_cpu, o_cpu))
        print(
            f"  round {number}: wall bare {b_wall:6.2f} ours {o_wall:6.2f} "
            f"(+{o_wall - b_wall:5.2f}); cpu bare {b_cpu:5.2f} ours {o_cpu:5.2f} "
            f"(+{o_cpu - b_cpu:5.2f})"
        )
    b_wall, o_wall, b_cpu, o_cpu = (statistics.median(r[i] for r in rounds) for i in range(4))
    print(
        f"  wall: bare {b_wall:7.2f} ms   ours {o_wall:7.2f} ms   "
        f"+{o_wall - b_wall:6.2f} ms   ratio {o_wall / b_wall:5.2f}   (target: +3 ms)"
    )
    print(
        f"  cpu:  bare {b_cpu:7.2f} ms   ours {o_cpu:7.2f} ms   "
        f"+{o_cpu - b_cpu:6.2f} ms   ratio {o_cpu / b_cpu:5.2f}"
    )
    for name, (host, kids, server) in cpu_split({"bare": bare, "ours": ours}, runs).items():
        print(
            f"  cpu of {name} by process (mean ms): host {host:.2f}, "
            f"sandbox processes {kids:.2f}, fork server {server:.2f}"
        )
    steps = phases(max(10, runs // 2))
    shown = ", ".join(f"{k} {v:.2f}" for k, v in steps.items())
    print(f"  ours by phase (median wall ms): {shown}")
    made, removed = cgroup_ms(max(10, runs // 2))
    procs, tasks = join_ms("cgroup.procs", 10), join_ms("tasks", 10)
    print(
        f"  components (median ms): fork of this process ({rss_mb():.0f} MB) {fork_ms(None):.2f}, "
        f"of `python -I -S` {fork_ms([sys.executable, '-I', '-S']):.2f}; "
        f"cgroups create {made:.2f}, remove {removed:.2f}"
    )
    if procs is not None and tasks is not None:
        print(
            f"  joining a fresh v1 cgroup after 50 ms of quiet: cgroup.procs {procs:.2f} ms, "
            f"tasks {tasks:.2f} ms"
        )

    cli = [sys.executable, "-m", "supervisor", "exec", "--", "/bin/true"]
    startup = interleaved(
        {
            "python -c pass": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
            "sandvisor exec": lambda: subprocess.run(cli, check=True),
        },
        max(5, runs // 3),
    )
    py, ex = med(startup["python -c pass"], 0), med(startup["sandvisor exec"], 0)
    print(
        f"  `sandvisor exec -- /bin/true` end to end: {ex:.1f} ms "
        f"(python -c pass {py:.1f} ms, ratio {ex / py:.2f})"
    )

    n = max(5, runs // 2)
    print(f"teardown of a 50-process sandbox, median of {n}")
    times = [teardown_once() for _ in range(n)]
    worst = max(times)
    print(
        f"  kill -> all reaped: median {statistics.median(times):.1f} ms, max {worst:.1f} ms, "
        f"ratio to the 100 ms target {statistics.median(times) / 100:.2f}"
    )
    rootless_against_root(runs, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
