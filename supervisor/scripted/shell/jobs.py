"""Background jobs: ``cmd &`` runs concurrently; ``wait`` collects.

Each job runs in a forked interpreter (a copy of the shell state) as a task of the
execution's task group, with its own output buffers. Output is flushed per job and in job
order: ``wait`` (or the end of the (sub)shell) appends the output of finished jobs, stopping
at the first job still running, so concurrent tool calls never interleave their output.

Differential cases: ``cases_builtins.txt``, ``cases_control.txt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from ..errors import LimitExceeded
from ..syntax import ast as A
from .io import Sink

if TYPE_CHECKING:
    from .interpreter import Interpreter

PID_BASE = 1000


@dataclass(eq=False)
class Job:
    number: int
    out: Sink
    err: Sink
    owner: int
    done: anyio.Event = field(default_factory=anyio.Event)
    status: int = 0
    flushed: bool = False

    @property
    def pid(self) -> int:
        return PID_BASE + self.number


class JobTable:
    """The jobs of one execution; ``tg`` is the task group they run in."""

    def __init__(self, tg: TaskGroup, max_jobs: int) -> None:
        self.tg = tg
        self.max_jobs = max_jobs
        self.jobs: list[Job] = []
        self.running = 0


async def start_job(sh: Interpreter, node: A.Node) -> None:
    table = sh.ctx.jobs
    if table is None:  # no task group (should not happen): run in the foreground
        await sh.in_subshell(node)
        return
    if table.running >= table.max_jobs:
        raise LimitExceeded(f"maximum background jobs exceeded ({table.max_jobs})")
    limit = sh.limits.max_value_bytes
    job = Job(len(table.jobs) + 1, Sink(limit), Sink(limit), sh.shell_id)
    table.jobs.append(job)
    table.running += 1
    child = sh.fork(job.out, job.err)
    sh.last_bg = job.pid
    table.tg.start_soon(_run_job, child, node, job, table)


async def _run_job(child: Interpreter, node: A.Node, job: Job, table: JobTable) -> None:
    status = 1
    try:
        status = await child.run_to_exit(node)
        await finish_jobs(child)
    finally:
        job.status = status
        table.running -= 1
        job.done.set()


def _flush_ready(sh: Interpreter) -> None:
    table = sh.ctx.jobs
    if table is None:
        return
    for job in table.jobs:
        if job.owner != sh.shell_id or job.flushed:
            continue
        if not job.done.is_set():
            return
        job.flushed = True
        sh.out.write(job.out.getvalue())
        sh.err.write(job.err.getvalue())


async def finish_jobs(sh: Interpreter) -> None:
    """Wait for every job this shell started and flush their output in order."""
    table = sh.ctx.jobs
    if table is None:
        return
    for job in list(table.jobs):
        if job.owner == sh.shell_id and not job.flushed:
            await job.done.wait()
    _flush_ready(sh)


async def wait_jobs(sh: Interpreter, args: list[str]) -> int:
    table = sh.ctx.jobs
    if table is None:
        return 0
    mine = [j for j in table.jobs if j.owner == sh.shell_id]
    if not [a for a in args if not a.startswith("-")]:
        for job in mine:
            await job.done.wait()
        _flush_ready(sh)
        return 0
    status = 0
    for a in args:
        if a.startswith("-"):
            continue
        found = _find(mine, a)
        if found is None:
            sh.error(f"wait: pid {a} is not a child of this shell")
            status = 127
            continue
        await found.done.wait()
        status = found.status
    _flush_ready(sh)
    return status


def _find(jobs: list[Job], spec: str) -> Job | None:
    if spec.startswith("%"):
        n = spec[1:]
        return next((j for j in jobs if str(j.number) == n), None)
    return next((j for j in jobs if str(j.pid) == spec), None)
