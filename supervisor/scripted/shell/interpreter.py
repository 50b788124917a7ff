"""The interpreter core: simple commands, command resolution, redirections, pipelines,
lists, subshells and functions. Compound commands live in ``control``, builtins in
``builtins/`` (their table is handed in through ``ExecContext``), expansion in
``expansion``.

Everything is in memory and single-threaded: a pipeline runs its commands one after the
other, each reading the previous one's output, which is how commands that are pure
functions of (args, stdin) compose. Every command is counted and the clock is checked, so
neither a busy loop nor a slow command outlives the execution's limits.

Differential cases: ``cases_basics.txt``, ``cases_functions.txt``,
``cases_scripts.txt``.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio.lowlevel

from ..budget import current_budget
from ..contract import READS_STDIN, CommandResult
from ..errors import (
    AbortExecution,
    BreakLoop,
    ContinueLoop,
    DiscardLine,
    ExitShell,
    FatalShellError,
    LimitExceeded,
    RequestTimeout,
    ReturnFromFunction,
    ShellError,
    ShellSyntaxError,
)
from ..syntax import ast as A
from ..syntax.parser import parse
from .arithmetic import ArithError
from .builtins.variables import run_declaration
from .control import ControlMixin
from .exec_context import BUILTIN, ExecContext
from .expansion import Expander
from .io import InputStream, Sink
from .jobs import finish_jobs, start_job
from .redirects import apply_redirects
from .state import ARRAY, EXPORT, Var, _generations

_shell_ids = itertools.count(1)
#: a builtin: ``fn(sh, args) -> status`` (or an awaitable, for the few that run code); the
#: table of them is ``builtins.table.BUILTINS``, handed in through ``ExecContext``
Builtin = Callable[["Interpreter", list[str]], "int | Awaitable[int]"]
#: builtins whose prefix assignments persist (POSIX special builtins)
SPECIAL_BUILTINS = frozenset(
    {
        ":",
        "eval",
        "export",
        "readonly",
        "set",
        "shift",
        "unset",
        "exit",
        "return",
        "break",
        "continue",
        "trap",
        "times",
        "declare",
        "typeset",
        "local",
    }
)


class Interpreter(ControlMixin, Expander):
    """One shell. Subshells reuse it (state is saved and restored); background jobs get
    a ``fork``."""

    def __init__(self, ctx: ExecContext, out: Sink, err: Sink) -> None:
        self.init_variables()
        self.ctx = ctx
        self.limits = ctx.limits
        self.out = out
        self.err = err
        self.stdin: InputStream | None = None
        self.functions: dict[str, A.FunctionDef] = {}
        self.status = 0
        self.last_bg: int | None = None
        self.lineno = 1
        self.opt_errexit = False
        self.opt_nounset = False
        self.opt_pipefail = False
        self.opt_xtrace = False
        self.opt_noglob = False
        self.opt_noclobber = False
        self.opt_allexport = False
        self.opt_errtrace = False  # set -E: the ERR trap reaches functions and subshells
        self.pattern_flags = 0
        self.shopts: set[str] = set()
        self.errexit_suppressed = 0
        self.loop_depth = 0
        #: in `( ... )` inside a loop, bash ignores break/continue without a word
        self.silent_loops = False
        self.func_depth = 0
        self.subst_depth = 0
        self.subshell_depth = 0
        self.cmdsub_status = 0
        self.traps: dict[str, str] = {}
        #: the ERR trap fires in the function depth it was set at (or outer ones)
        self.err_trap_depth = 0
        self.getopts_pos = 0
        self.getopts_ind: int | None = None
        self.shell_id = next(_shell_ids)

    # -------------------------------------------------------------- diagnostics

    def error(self, message: str) -> None:
        self.err.write(f"bash: line {self.lineno}: {message}\n")

    def nounset_check(self, name: str) -> bool:
        return self.opt_nounset

    def flags_string(self) -> str:
        """``$-``, in bash's order."""
        flags = [
            ("a", self.opt_allexport),
            ("e", self.opt_errexit),
            ("f", self.opt_noglob),
            ("h", True),
            ("u", self.opt_nounset),
            ("x", self.opt_xtrace),
            ("B", True),
            ("C", self.opt_noclobber),
            ("E", self.opt_errtrace),
        ]
        return "".join(c for c, on in flags if on)

    def get(self, name: str) -> str | None:
        if name == "LINENO":
            return str(self.lineno)
        if name == "BASH_SUBSHELL" and name not in self.vars:
            return str(self.subshell_depth)
        return super().get(name)

    # ----------------------------------------------------------------- running

    async def run_program(self, program: A.Program) -> int:
        """Run a whole script: ``exit`` and fatal errors end it with their status."""
        try:
            status = await self.run_lines(program)
        except ExitShell as exc:
            status = exc.status
        except FatalShellError as exc:
            self.error(exc.message)
            status = exc.status
        except (BreakLoop, ContinueLoop):
            status = self.status
        except ReturnFromFunction as exc:
            status = exc.status
        self.status = status
        return await self.run_exit_trap(status)

    async def run_lines(self, program: A.Program) -> int:
        """The top-level commands, line by line as bash reads a script file: an error
        that makes bash abandon a line (``DiscardLine``) skips the rest of that line's
        commands, sets ``$?`` to 1, and the script goes on with the next line."""
        body = program.body.body
        status = self.status
        i = 0
        while i < len(body):
            node = body[i]
            try:
                status = await _DISPATCH[type(node)](self, node)
            except DiscardLine as exc:
                self.error(exc.message)
                status = self.status = 1
                i = next((k for k in program.lines if k > i), len(body))
                continue
            i += 1
        return status

    async def run_to_exit(self, node: A.Node) -> int:
        """Run a (sub)shell's code; ``exit``, fatal errors and stray break/continue/
        return end it with a status instead of propagating."""
        try:
            return await _DISPATCH[type(node)](self, node)
        except ExitShell as exc:
            return exc.status
        except FatalShellError as exc:
            self.error(exc.message)
            return exc.status
        except (BreakLoop, ContinueLoop):
            return self.status
        except ReturnFromFunction as exc:
            return exc.status

    async def run_exit_trap(self, status: int) -> int:
        handler = self.traps.pop("EXIT", None)
        if not handler:
            return status
        self.status = status  # the trap sees the status the shell exits with
        try:
            await self.run_seq(parse(handler).body)
        except ExitShell as exc:
            return exc.status
        except FatalShellError as exc:
            self.error(exc.message)
            return exc.status
        return status

    async def run_seq(self, seq: A.Sequence) -> int:
        status = self.status
        dispatch = _DISPATCH
        for node in seq.body:
            status = await dispatch[type(node)](self, node)
        return status

    async def run_node(self, node: A.Node) -> int:
        return await _DISPATCH[type(node)](self, node)

    async def failed(self, status: int) -> None:
        """A command failed (status != 0) where ``set -e`` and the ERR trap apply:
        not in a condition, not before ``&&``/``||``, not under ``!``."""
        if self.errexit_suppressed:
            return
        handler = self.traps.get("ERR")
        if handler and (self.func_depth <= self.err_trap_depth or self.opt_errtrace):
            del self.traps["ERR"]  # not while it runs
            try:  # $LINENO in the handler is the failed command's line
                await self.run_seq(parse(at_line(handler, self.lineno)).body)
            finally:
                self.traps.setdefault("ERR", handler)
            self.status = status
        if self.opt_errexit:
            raise ExitShell(status)

    async def tick(self) -> None:
        """Count a command against the limits; check the clock; yield now and then
        (``x_simple`` inlines the same steps)."""
        ctx = self.ctx
        n = ctx.command_count = ctx.command_count + 1
        if n > ctx.max_commands:
            raise LimitExceeded(f"maximum command count exceeded ({ctx.max_commands})")
        if time.monotonic() >= ctx.stop_at:
            ctx.out_of_time()
        if not n & 255:
            _check_memory()
            await anyio.lowlevel.checkpoint()

    # ----------------------------------------------------------- simple commands

    async def x_simple(self, cmd: A.SimpleCommand) -> int:
        ctx = self.ctx
        n = ctx.command_count = ctx.command_count + 1
        if n > ctx.max_commands:
            raise LimitExceeded(f"maximum command count exceeded ({ctx.max_commands})")
        if time.monotonic() >= ctx.stop_at:
            ctx.out_of_time()
        if not n & 255:
            _check_memory()
            await anyio.lowlevel.checkpoint()
        self.lineno = cmd.line
        if not cmd.words:
            assigns = cmd.assigns
            if len(assigns) == 1 and not cmd.redirs and not self.opt_allexport:
                a = assigns[0]
                fn = a.arith
                if fn is not None:  # name=$((expr)): no expansion machinery needed
                    try:
                        self.arith_set(a.name, fn(self))
                    except ArithError as exc:
                        raise DiscardLine(exc.render(_arith_text(a)), 1) from None
                    except FatalShellError:
                        raise
                    except ShellError as exc:
                        raise DiscardLine(exc.message, exc.status) from None
                    self.status = 0
                    return 0
            status = await self.assignments_only(cmd.assigns, cmd.redirs)
            self.status = status
            if status:
                await self.failed(status)
            return status
        words = cmd.words
        first = words[0]
        if (
            len(words) == 1
            and type(first) is A.Word
            and first.literal is not None
            and not (self.shopts and "nullglob" in self.shopts)
        ):
            argv = [first.literal]
        else:
            fast = self.fast_args(words)
            argv = fast if fast is not None else await self.expand_args(words)
            if len(argv) > 1 and sum(map(len, argv)) > self.limits.max_value_bytes:
                raise LimitExceeded(f"maximum value size exceeded ({self.limits.max_value_bytes})")
        if not argv:
            status = await self.assignments_only(cmd.assigns, cmd.redirs)
            self.status = status
            if status:
                await self.failed(status)
            return status
        if self.opt_xtrace:
            self.err.write("+ " + " ".join(argv) + "\n")
        if cmd.redirs:
            saved = (self.out, self.err, self.stdin)
            if not await apply_redirects(self, cmd.redirs):
                self.status = 1
                await self.failed(1)
                return 1
            try:
                status = await self.invoke(argv, cmd.assigns)
            finally:
                self.out, self.err, self.stdin = saved
        else:
            r = self.start_command(argv, cmd.assigns)
            status = r if type(r) is int else await r  # type: ignore[misc]
        self.status = status
        if status and not self.errexit_suppressed and (self.opt_errexit or self.traps):
            await self.failed(status)
        return status

    async def assignments_only(
        self, assigns: tuple[A.Assign, ...], redirs: tuple[A.Redir, ...]
    ) -> int:
        self.cmdsub_status = 0
        for a in assigns:
            try:
                await self.do_assign(a)
            except FatalShellError:
                raise
            except ShellError as exc:
                raise DiscardLine(exc.message, exc.status) from None
        status = self.cmdsub_status
        if redirs:
            saved = (self.out, self.err, self.stdin)
            ok = await apply_redirects(self, redirs)
            self.out, self.err, self.stdin = saved
            if not ok:
                return 1
        return status

    async def do_assign(self, a: A.Assign) -> None:
        (await self.prepare_assign(a))()

    async def prepare_assign(self, a: A.Assign) -> Callable[[], None]:
        """Expand an assignment's value now; the returned thunk stores it (``local
        a=("${a[@]}")`` reads the outer ``a`` before the local one exists)."""
        if a.array is not None:
            items: list[tuple[str | None, str, bool]] = []
            for item in a.array:
                if item.key is not None:
                    item_key = await self.expand_string(item.key)
                    items.append((item_key, await self.expand_string(item.value), item.append))
                else:
                    for v in await self.expand_args((item.value,)):
                        items.append((None, v, False))
            return lambda: self.assign_array(a.name, items, a.append)
        value = "" if a.value is None else await self.expand_string(a.value)
        if len(value) > self.limits.max_value_bytes:
            raise LimitExceeded(f"maximum value size exceeded ({self.limits.max_value_bytes})")
        key = await self.subscript_key(a.name, a.index) if a.index is not None else None
        if key == "" and a.index is not None:
            raise ShellError(f"{a.name}[{a.index.text}]: bad array subscript")

        def store() -> None:
            if key is not None:
                self.assign_item(a.name, key, value, a.append)
            else:
                self.assign(a.name, value, a.append)
            if self.opt_allexport:
                self.declare_var(a.name, EXPORT)

        return store

    async def invoke(self, argv: list[str], assigns: tuple[A.Assign, ...] = ()) -> int:
        """Resolve and run one command: function, builtin or table entry."""
        r = self.start_command(argv, assigns)
        return r if type(r) is int else await r  # type: ignore[misc]

    def start_command(
        self, argv: list[str], assigns: tuple[A.Assign, ...] = ()
    ) -> int | Awaitable[int]:
        """``invoke`` without an ``await`` when none is needed: a sync builtin or table
        command (the common case in a loop of tool calls) returns its status directly;
        anything that must wait comes back as an awaitable."""
        name = argv[0]
        if assigns or name in self.functions:
            return self._invoke_slow(argv, assigns)
        ctx = self.ctx
        builtin = ctx.unhidden.get(name)  # ctx.resolve, inlined: this runs for every command
        if builtin is not None:
            try:
                r = builtin(self, argv[1:])
            except FatalShellError:
                raise
            except ShellError as exc:
                self.error(exc.message)
                return exc.status
            if type(r) is int:
                return r
            return self._await_builtin(r)
        impl = ctx.commands.get(name)
        if impl is None:
            self.error(f"{name}: command not found{did_you_mean(name, ctx.names())}")
            return 127
        stdin = None
        if self.stdin is not None:
            reads = getattr(impl, READS_STDIN, None)  # jq -n, seq: the input stays
            if reads is None or reads(argv[1:]):
                stdin = self.stdin.read_all()
        try:
            result = impl(argv[1:], stdin)
        except (AbortExecution, RequestTimeout):
            raise  # a limit or the deadline, met inside the command: ends the execution
        except Exception as exc:  # a command must not take the interpreter down
            self.error(f"{name}: {type(exc).__name__}: command failed")
            return 1
        if type(result) is CommandResult:
            return self.table_output(result)
        return self._await_table(name, result)

    async def _await_builtin(self, pending: Awaitable[int]) -> int:
        try:
            return await pending
        except FatalShellError:
            raise
        except ShellError as exc:
            self.error(exc.message)
            return exc.status

    async def _await_table(self, name: str, result: Any) -> int:
        try:
            if inspect.isawaitable(result):
                result = await result
                self.ctx.late_command()
        except (AbortExecution, RequestTimeout):
            raise
        except Exception as exc:
            self.error(f"{name}: {type(exc).__name__}: command failed")
            return 1
        if type(result) is not CommandResult:
            self.error(f"{name}: command returned no result")
            return 1
        return self.table_output(result)

    def table_output(self, result: CommandResult) -> int:
        if result.stdout:
            self.out.write(result.stdout)
        if result.stderr:
            self.err.write(result.stderr)
        return result.exit_code

    async def _invoke_slow(self, argv: list[str], assigns: tuple[A.Assign, ...]) -> int:
        name = argv[0]
        fn = self.functions.get(name)
        if fn is not None:
            if assigns:
                return await self.with_temp_assigns(assigns, lambda: self.call_function(fn, argv))
            return await self.call_function(fn, argv)
        entry = self.ctx.resolve(name)
        if entry is None:
            for a in assigns:  # expansions still happen (side effects, errors)
                if a.value is not None:
                    await self.expand_string(a.value)
            self.error(f"{name}: command not found{did_you_mean(name, self.ctx.names())}")
            return 127
        kind, impl = entry
        if kind == BUILTIN:
            if assigns and name not in SPECIAL_BUILTINS:
                return await self.with_temp_assigns(assigns, lambda: self.run_builtin(impl, argv))
            for a in assigns:
                try:
                    await self.do_assign(a)
                except FatalShellError:
                    raise
                except ShellError as exc:
                    self.error(exc.message)
            return await self.run_builtin(impl, argv)
        for a in assigns:
            if a.value is not None:
                await self.expand_string(a.value)
        return await self.invoke(argv)

    async def run_builtin(self, impl: Builtin, argv: list[str]) -> int:
        try:
            r = impl(self, argv[1:])
            if type(r) is not int:
                r = await r  # type: ignore[misc]
            return r
        except FatalShellError:
            raise
        except ShellError as exc:
            self.error(exc.message)
            return exc.status

    async def with_temp_assigns(
        self, assigns: tuple[A.Assign, ...], run: Callable[[], Awaitable[int]]
    ) -> int:
        """``NAME=value cmd``: the assignments hold while ``run`` runs. One that fails
        (a readonly variable) is reported and skipped; the command still runs, as in bash."""
        saved: list[tuple[str, Var | None]] = []
        try:
            for a in assigns:
                saved.append((a.name, self.vars.get(a.name)))
                if a.name in self.vars:
                    self.vars[a.name] = self.vars[a.name].copy(self.gen)
                try:
                    await self.do_assign(a)
                except FatalShellError:
                    raise
                except ShellError as exc:
                    self.error(exc.message)
            return await run()
        finally:
            for name, old in reversed(saved):
                if old is None:
                    self.vars.pop(name, None)
                else:
                    self.vars[name] = old

    async def call_function(self, fn: A.FunctionDef, argv: list[str]) -> int:
        if self.func_depth >= self.limits.max_function_depth:
            raise LimitExceeded(
                f"maximum function depth exceeded ({self.limits.max_function_depth})"
            )
        saved_pos, saved_loops = self.positional, (self.loop_depth, self.silent_loops)
        self.positional = argv[1:]
        self.loop_depth, self.silent_loops = 0, False  # bash: a function is not in the loop
        self.func_depth += 1
        self.funcnames.append(fn.name)
        self.call_lines.append(self.lineno)
        self.push_frame()
        # a RETURN trap is not inherited: it fires for the function that set it
        outer_return = self.traps.pop("RETURN", None) if self.traps else None
        try:
            try:
                status = await _DISPATCH[type(fn.body)](self, fn.body)
            except ReturnFromFunction as exc:
                status = exc.status
            if self.traps and "RETURN" in self.traps:
                self.status = status
                await self.run_seq(parse(at_line(self.traps["RETURN"], self.lineno)).body)
        finally:
            if outer_return is not None:
                self.traps.setdefault("RETURN", outer_return)
            self.pop_frame()
            self.funcnames.pop()
            self.lineno = self.call_lines.pop()  # back on the line of the call
            self.func_depth -= 1
            self.positional = saved_pos
            self.loop_depth, self.silent_loops = saved_loops
        self.status = status
        return status

    async def x_function_def(self, node: A.FunctionDef) -> int:
        await self.tick()
        self.functions[node.name] = node
        self.status = 0
        return 0

    async def x_decl(self, cmd: A.DeclCommand) -> int:
        await self.tick()
        self.lineno = cmd.line
        if cmd.redirs:
            saved = (self.out, self.err, self.stdin)
            if not await apply_redirects(self, cmd.redirs):
                self.status = 1
                return 1
            try:
                status = await run_declaration(self, cmd)
            finally:
                self.out, self.err, self.stdin = saved
        else:
            status = await run_declaration(self, cmd)
        self.status = status
        if status:
            await self.failed(status)
        return status

    # ------------------------------------------------------------- redirections

    async def x_redirected(self, node: A.Redirected) -> int:
        saved = (self.out, self.err, self.stdin)
        if not await apply_redirects(self, node.redirs):
            self.status = 1
            return 1
        try:
            return await _DISPATCH[type(node.body)](self, node.body)
        finally:
            self.out, self.err, self.stdin = saved

    # ------------------------------------------------------- pipelines and lists

    async def x_pipeline(self, node: A.Pipeline) -> int:
        cmds = node.cmds
        if len(cmds) == 1:
            if node.negate:
                self.errexit_suppressed += 1
                try:
                    status = await _DISPATCH[type(cmds[0])](self, cmds[0])
                finally:
                    self.errexit_suppressed -= 1
                status = 0 if status else 1
                self.status = status
                return status
            return await _DISPATCH[type(cmds[0])](self, cmds[0])
        statuses: list[int] = []
        saved_out, saved_err, saved_in = self.out, self.err, self.stdin
        stdin = saved_in
        last = len(cmds) - 1
        if node.negate:  # bash: nothing in a negated pipeline triggers `set -e`
            self.errexit_suppressed += 1
        try:
            for i, c in enumerate(cmds):
                if i < last:
                    sink = Sink(self.limits.max_value_bytes)
                    self.out = sink
                    self.err = sink if node.stderr_too[i] else saved_err
                else:
                    self.out, self.err = saved_out, saved_err
                self.stdin = stdin
                if i == last and "lastpipe" in self.shopts:  # in this shell (no job control)
                    statuses.append(await _DISPATCH[type(c)](self, c))
                else:
                    statuses.append(await self.in_subshell(c, loops=False))
                if i < last:
                    stdin = InputStream(sink.getvalue())
        finally:
            self.out, self.err, self.stdin = saved_out, saved_err, saved_in
            if node.negate:
                self.errexit_suppressed -= 1
        status = statuses[-1]
        if self.opt_pipefail:
            status = next((s for s in reversed(statuses) if s), 0)
        self.vars["PIPESTATUS"] = Var(dict(enumerate(map(str, statuses))), ARRAY, self.gen)
        if node.negate:
            status = 0 if status else 1
        self.status = status
        if not node.negate and status:
            await self.failed(status)
        return status

    async def x_andor(self, node: A.AndOr) -> int:
        self.errexit_suppressed += 1
        try:
            status = await _DISPATCH[type(node.first)](self, node.first)
        finally:
            self.errexit_suppressed -= 1
        rest = node.rest
        last = len(rest) - 1
        for i, (op, cmd) in enumerate(rest):
            if (op == "&&") != (status == 0):
                continue
            if i < last:
                self.errexit_suppressed += 1
                try:
                    status = await _DISPATCH[type(cmd)](self, cmd)
                finally:
                    self.errexit_suppressed -= 1
            else:
                status = await _DISPATCH[type(cmd)](self, cmd)
        self.status = status
        return status

    async def x_sequence(self, node: A.Sequence) -> int:
        return await self.run_seq(node)

    async def x_background(self, node: A.Background) -> int:
        await self.tick()
        await start_job(self, node.body)
        self.status = 0
        return 0

    # ------------------------------------------------------------- subshells

    def enter_subshell(self) -> tuple[Any, ...]:
        if self.subshell_depth >= self.limits.max_subshell_depth:
            raise LimitExceeded(
                f"maximum subshell depth exceeded ({self.limits.max_subshell_depth})"
            )
        saved = (
            self.vars,
            self.frames,
            self.gen,
            self.positional,
            self.functions,
            self.traps,
            self.options(),
            self.loop_depth,
            self.shell_id,
            self.silent_loops,
        )
        self.shell_id = next(_shell_ids)
        self.vars = dict(self.vars)
        self.frames = [dict(f) for f in self.frames]
        self.gen = next(_generations)
        self.functions = dict(self.functions)
        err_trap = self.traps.get("ERR") if self.opt_errtrace else None
        self.traps = {} if err_trap is None else {"ERR": err_trap}  # set -E keeps ERR
        self.shopts = set(self.shopts)
        self.subshell_depth += 1
        return saved

    def options(self) -> tuple[Any, ...]:
        """The ``set`` and ``shopt`` options (a subshell's changes stay in it)."""
        return (
            self.opt_errexit,
            self.opt_nounset,
            self.opt_pipefail,
            self.opt_xtrace,
            self.opt_noglob,
            self.opt_noclobber,
            self.opt_allexport,
            self.opt_errtrace,
            self.shopts,
            self.pattern_flags,
        )

    def leave_subshell(self, saved: tuple[Any, ...]) -> None:
        (
            self.vars,
            self.frames,
            self.gen,
            self.positional,
            self.functions,
            self.traps,
            opts,
            self.loop_depth,
            self.shell_id,
            self.silent_loops,
        ) = saved
        (
            self.opt_errexit,
            self.opt_nounset,
            self.opt_pipefail,
            self.opt_xtrace,
            self.opt_noglob,
            self.opt_noclobber,
            self.opt_allexport,
            self.opt_errtrace,
            self.shopts,
            self.pattern_flags,
        ) = opts
        self.subshell_depth -= 1

    async def in_subshell(
        self, node: A.Node | A.Sequence, errexit: bool | None = None, loops: bool = True
    ) -> int:
        """Run ``node`` in a subshell environment; returns its exit status. A pipeline
        element (``loops=False``) is outside the loops around it, as in bash."""
        saved = self.enter_subshell()
        if errexit is not None:
            self.opt_errexit = errexit
        if not loops:
            self.loop_depth, self.silent_loops = 0, False
        try:
            status = await self.run_to_exit(node)
            if self.traps:
                status = await self.run_exit_trap(status)
            if self.ctx.jobs is not None and self.ctx.jobs.jobs:
                await finish_jobs(self)
        finally:
            self.leave_subshell(saved)
        return status

    def fork(self, out: Sink, err: Sink) -> Interpreter:
        """An independent copy of this shell for a background job."""
        child = copy.copy(self)
        # both sides get a new generation: a Var of the moment of the fork is copied
        # before either of them changes it (the parent keeps running concurrently)
        self.gen = next(_generations)
        child.vars = dict(self.vars)
        child.frames = [dict(f) for f in self.frames]
        child.gen = next(_generations)
        child.functions = dict(self.functions)
        child.positional = list(self.positional)
        child.funcnames = list(self.funcnames)
        child.call_lines = list(self.call_lines)
        child.traps = {}
        child.shopts = set(self.shopts)
        child.out = out
        child.err = err
        child.stdin = None if self.stdin is None else InputStream("")
        child.shell_id = next(_shell_ids)
        child.loop_depth = 0
        return child

    async def x_subshell(self, node: A.Subshell) -> int:
        await self.tick()
        if self.loop_depth:
            saved_loops = (self.loop_depth, self.silent_loops)
            self.loop_depth, self.silent_loops = 0, True
            try:
                status = await self.in_subshell(node.body)
            finally:
                self.loop_depth, self.silent_loops = saved_loops
        else:
            status = await self.in_subshell(node.body)
        self.status = status
        if status:
            await self.failed(status)
        return status

    async def command_substitution(self, program: A.Program) -> str:
        output, status = await self.run_captured(program)
        self.status = status
        self.cmdsub_status = status
        return output.rstrip("\n")

    async def capture_output(self, program: A.Program) -> str:
        """``<(...)`` read through ``< <(...)``: the output, trailing newlines kept; its
        status is not ``$?`` (bash runs it as an asynchronous process)."""
        output, _ = await self.run_captured(program)
        return output

    async def run_captured(self, program: A.Program) -> tuple[str, int]:
        """Run ``program`` in a subshell, capturing its stdout."""
        limits = self.limits
        if self.subst_depth >= limits.max_subst_depth:
            raise LimitExceeded(
                f"maximum command substitution depth exceeded ({limits.max_subst_depth})"
            )
        sink = Sink(limits.max_value_bytes)
        saved_out = self.out
        self.out = sink
        self.subst_depth += 1
        try:
            status = await self.in_subshell(program.body, errexit=False)
        finally:
            self.subst_depth -= 1
            self.out = saved_out
        return sink.getvalue(), status

    async def run_string(self, script: str) -> int:
        """``eval``: parse and run text in this shell."""

        limits = self.limits
        try:  # the text's first line is the line of the `eval`
            program = parse(
                at_line(script, self.lineno), limits.max_ast_depth, limits.max_parser_operations
            )
        except ShellSyntaxError as exc:
            self.error(f"eval: {exc.message}")
            return 2
        line = self.lineno
        try:
            return await self.run_seq(program.body)
        except DiscardLine as exc:
            self.error(exc.message)
            self.status = 1
            return 1
        finally:
            self.lineno = line


def at_line(text: str, line: int) -> str:
    """``text`` with blank lines before it, so that its first line is line ``line``."""
    return "\n" * (line - 1) + text


def _distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance, giving up (cap + 1) once it exceeds ``cap``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > cap:
            return cap + 1
        prev = cur
    return prev[-1]


#: removed on purpose (no alternative to offer), and builtins the peer never suggests
_NO_HINT = frozenset({"source", ".", "exec", "bash", "sh"})
_NOT_SUGGESTED = frozenset({"declare", "typeset", "let", "getopts", "builtin", "command", "time"})


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """The peer's hint after ``command not found``: up to three commands within one
    edit (names of up to three characters) or two, closest first."""
    if "/" in name or not name or name in _NO_HINT:
        return ""
    cap = max(1, min(2, len(name) // 2))
    found = sorted(
        (d, other)
        for other in known
        if other not in _NOT_SUGGESTED and (d := _distance(name, other, cap)) <= cap
    )
    if not found:
        return ""
    return ". Did you mean: " + ", ".join(other for _, other in found[:3]) + "?"


def _arith_text(a: A.Assign) -> str:
    """The expression of ``name=$((expr))`` for error messages."""
    part = a.value.parts[0] if a.value is not None and a.value.parts else None
    if isinstance(part, A.ArithSub) and part.expr.literal is not None:
        return part.expr.literal.strip()
    return a.text


_DISPATCH: dict[type, Callable[[Interpreter, Any], Awaitable[int]]] = {
    A.SimpleCommand: Interpreter.x_simple,
    A.DeclCommand: Interpreter.x_decl,
    A.Pipeline: Interpreter.x_pipeline,
    A.AndOr: Interpreter.x_andor,
    A.Background: Interpreter.x_background,
    A.Sequence: Interpreter.x_sequence,
    A.Subshell: Interpreter.x_subshell,
    A.Group: ControlMixin.x_group,
    A.If: ControlMixin.x_if,
    A.While: ControlMixin.x_while,
    A.For: ControlMixin.x_for,
    A.ArithFor: ControlMixin.x_arith_for,
    A.Case: ControlMixin.x_case,
    A.FunctionDef: Interpreter.x_function_def,
    A.ArithCmd: ControlMixin.x_arith,
    A.CondCmd: ControlMixin.x_cond,
    A.Redirected: Interpreter.x_redirected,
}


def _check_memory() -> None:
    """The execution's memory growth, every 256 commands (big values spend fuel by their
    size, which checks it sooner)."""
    budget = current_budget.get()
    if budget is not None:
        budget.check_memory()
