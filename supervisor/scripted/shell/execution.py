"""``run_script``: one script, one fresh interpreter, one ``ExecResult``.

Parse errors and parse limits are reported before anything runs. The run happens inside a
task group (background jobs) and a cancel scope whose deadline is the execution timeout
(plus a short grace, so a tool callback that timed out on ``execution_deadline`` can report
``callback timeout`` and let the script go on) or the request deadline, whichever comes
first; CPU-bound scripts are stopped by the clock checks in the interpreter. Nothing a
script does makes this function raise.

Differential cases: ``cases_scripts.txt``, ``cases_errors.txt``, ``cases_fidelity.txt``,
``cases_realistic_jq.txt``, ``cases_realistic_text.txt``, ``cases_realistic_shell.txt``,
``cases_realistic_orchestration.txt``, ``cases_realistic_misc.txt``,
``cases_realistic_more.txt``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping

import anyio

from ..budget import Budget, current_budget
from ..contract import ExecResult, ExecutionLimits, ScriptRequest, execution_deadline
from ..errors import (
    AbortExecution,
    LimitExceeded,
    ParseLimitError,
    RequestTimeout,
    ShellSyntaxError,
)
from ..syntax.parser import parse
from .builtins.table import BUILTINS
from .exec_context import ExecContext, duration_debug
from .interpreter import Interpreter
from .io import CappedSink
from .jobs import JobTable, finish_jobs
from .state import ARRAY, EXPORT, Var

#: after the execution deadline, how long a script may go on (a timed-out callback has
#: just failed its command): a tenth of the timeout, between 50 ms and 1 s
GRACE_MIN, GRACE_MAX = 0.05, 1.0

_SHELL_VARS = {
    "HOME": "/home/sandbox",
    "HOSTNAME": "sandvisor",
    "HOSTTYPE": "x86_64",
    "MACHTYPE": "x86_64-pc-linux-gnu",
    "OSTYPE": "linux-gnu",
    "OPTIND": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PPID": "0",
    "PS4": "+ ",
    "SHELL": "/bin/bash",
    "SHLVL": "1",
    "UID": "1000",
    "EUID": "1000",
    "USER": "sandbox",
    "BASH_VERSION": "5.2.15(1)-release",
    "BASHPID": "1",
    "IFS": " \t\n",
}
_VERSINFO = ("5", "2", "15", "1", "release", "virtual")


#: Python frames one nesting level can take (a function call through compound commands,
#: a command substitution...), measured with margin; and the most we ever ask for
_FRAMES_PER_LEVEL = 24
_MAX_RECURSION_LIMIT = 30_000


def ensure_recursion_headroom(limits: ExecutionLimits) -> None:
    """Raise the interpreter's recursion limit (never lower it) so that scripts within
    the nesting limits cannot hit it: each level of function, substitution or subshell
    nesting is a chain of coroutines. Past ``_MAX_RECURSION_LIMIT`` (the C stack's
    comfort zone) a RecursionError aborts the execution with a limit error instead."""
    levels = (
        limits.max_function_depth
        + limits.max_subst_depth
        + limits.max_subshell_depth
        + limits.max_ast_depth
    )
    wanted = min(_MAX_RECURSION_LIMIT, 1000 + _FRAMES_PER_LEVEL * levels)
    if sys.getrecursionlimit() < wanted:
        sys.setrecursionlimit(wanted)


def grace(timeout: float) -> float:
    return min(GRACE_MAX, max(GRACE_MIN, timeout / 10))


def _template() -> dict[str, Var]:
    """The variables every shell starts with. Generation 0 never matches a live shell,
    so a shell that changes one copies it first (copy-on-write): the template is shared."""
    template = {name: Var(value, 0, 0) for name, value in _SHELL_VARS.items()}
    template["PWD"] = Var("/home/user", EXPORT, 0)
    template["BASH_VERSINFO"] = Var(dict(enumerate(_VERSINFO)), ARRAY, 0)
    return template


_TEMPLATE = _template()


def init_shell(sh: Interpreter, env: Mapping[str, str]) -> None:
    sh.vars = dict(_TEMPLATE)
    gen = sh.gen
    for name, value in env.items():
        sh.vars[name] = Var(value, EXPORT, gen)


def abort_result(message: str) -> ExecResult:
    """The result of an execution a limit or an error ended (stdout dropped)."""
    return ExecResult(stdout="", stderr=message, exit_code=1, error=message)


def timeout_result(seconds: float) -> ExecResult:
    """The result of an execution its request's ``timeout_ms`` ended (exit 124)."""
    return ExecResult(
        stdout="",
        stderr=f"sandvisor: execution timed out after {seconds:.1f}s\n",
        exit_code=124,
        error="timeout",
    )


def _cap(text: str, limit: int, truncated: bool) -> tuple[str, bool]:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, truncated
    return data[:limit].decode("utf-8", "ignore"), True


async def run_script(request: ScriptRequest) -> ExecResult:
    """Run one script (see the module docstring); works under trio and asyncio. Nothing
    the script does escapes as an exception: a defect is a clean ``internal error``."""
    try:
        return await _run_script(request)
    except Exception as exc:  # parse or set-up: fail closed, the host goes on
        message, _ = _classify(exc)
        return abort_result(message or "execution error: internal error")


async def _run_script(request: ScriptRequest) -> ExecResult:
    start = time.monotonic()
    limits = request.limits
    script = request.script
    if not script.strip():
        return ExecResult()
    size = len(script.encode("utf-8", "surrogatepass"))
    if size > limits.max_input_bytes:
        return abort_result(
            f"parse error: input too large ({size} bytes, max {limits.max_input_bytes} bytes)"
        )
    ensure_recursion_headroom(limits)
    exec_deadline = start + limits.timeout_seconds
    request_deadline = (
        start + request.request_timeout_seconds
        if request.request_timeout_seconds is not None
        else None
    )
    ctx = ExecContext(
        request.commands,
        request.overrides,
        limits,
        exec_deadline,
        request_deadline,
        BUILTINS,
        grace(limits.timeout_seconds),
    )
    budget = Budget(ctx.check_time, limits.max_memory_bytes, lambda: ctx.stop_at, ctx.expire)
    budget_token = current_budget.set(budget)  # parsing spends fuel under the deadline
    try:
        program = parse(script, limits.max_ast_depth, limits.max_parser_operations)
    except ShellSyntaxError as exc:
        return abort_result(exc.render())
    except ParseLimitError as exc:
        return abort_result(f"parse error: {exc}")
    except RecursionError:
        return abort_result(f"parse error: AST nesting too deep (max {limits.max_ast_depth})")
    except AbortExecution as exc:
        return abort_result(exc.message)
    except RequestTimeout:
        return timeout_result(request.request_timeout_seconds or 0.0)
    finally:
        current_budget.reset(budget_token)
    out = CappedSink(limits.max_stdout_bytes)
    err = CappedSink(limits.max_stderr_bytes)
    sh = Interpreter(ctx, out, err)
    init_shell(sh, request.env)
    token = execution_deadline.set(exec_deadline)
    budget_token = current_budget.set(budget)
    status = 1
    abort: str | None = None
    timed_out = False
    try:
        # the scope bounds the waits (a callback, a job); the interpreter's own clock
        # checks stop CPU-bound work at the deadline; the grace is for a late command
        stop_at = exec_deadline + grace(limits.timeout_seconds)
        if request_deadline is not None:
            stop_at = min(stop_at, request_deadline)
        with anyio.CancelScope(
            deadline=anyio.current_time() + (stop_at - time.monotonic())
        ) as scope:
            try:
                async with anyio.create_task_group() as tg:
                    ctx.jobs = JobTable(tg, limits.max_background_jobs)
                    status = await sh.run_program(program)
                    await finish_jobs(sh)
            except BaseException as exc:
                abort, timed_out = _classify(exc)
                if abort is None and not timed_out:
                    raise
        if scope.cancelled_caught:
            now = time.monotonic()
            if request_deadline is not None and now >= request_deadline - 0.001:
                timed_out = True
            else:
                abort = LimitExceeded(
                    f"execution timeout ({duration_debug(limits.timeout_seconds)})"
                ).message
    finally:
        execution_deadline.reset(token)
        current_budget.reset(budget_token)
    if timed_out:
        assert request.request_timeout_seconds is not None
        return timeout_result(request.request_timeout_seconds)
    if abort is not None:
        return abort_result(abort)
    stdout, out_cut = _cap(out.getvalue(), limits.max_stdout_bytes, out.truncated)
    stderr, err_cut = _cap(err.getvalue(), limits.max_stderr_bytes, err.truncated)
    return ExecResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=status,
        stdout_truncated=out_cut,
        stderr_truncated=err_cut,
    )


def _classify(exc: BaseException) -> tuple[str | None, bool]:
    """(abort message, request timed out) for an exception out of the run; (None, False)
    when it is not ours (cancellation of the caller, a bug) and must propagate."""
    if isinstance(exc, BaseExceptionGroup):
        found: tuple[str | None, bool] = (None, False)
        for sub in exc.exceptions:
            found = _classify(sub)
            if found[1]:
                return found
        for sub in exc.exceptions:
            found = _classify(sub)
            if found[0] is not None:
                return found
        return None, False
    if isinstance(exc, RequestTimeout):
        return None, True
    if isinstance(exc, AbortExecution):
        return exc.message, False
    if isinstance(exc, RecursionError):
        return "resource limit exceeded: maximum recursion depth exceeded", False
    if isinstance(exc, MemoryError):
        return "resource limit exceeded: memory limit exceeded (the host is out of memory)", False
    if isinstance(exc, Exception):  # a defect must not take the host down: fail closed
        text = " ".join(str(exc).split())
        text = text if len(text) <= 200 else text[:200] + "..."
        return f"execution error: internal error ({type(exc).__name__}: {text})", False
    return None, False
