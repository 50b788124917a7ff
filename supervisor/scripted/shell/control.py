"""Compound commands: groups, ``if``, loops, ``case``, ``(( ))`` and ``[[ ]]``.

Loops count their iterations against ``max_loop_iterations`` (per loop; condition checks
for ``while``/``until``/C-style ``for``, items for ``for ... in``) and the execution's
``max_total_loop_iterations``; ``break``/``continue`` unwind as exceptions.

Differential cases: ``cases_control.txt``.
"""

from __future__ import annotations

from ..errors import (
    BreakLoop,
    ContinueLoop,
    DiscardLine,
    FatalShellError,
    LimitExceeded,
    ShellError,
)
from ..safe_regex import PatternError
from ..syntax import ast as A
from .arithmetic import ArithError, compile_arith
from .conditions import binary_test, unary_test
from .expansion import REGEX, Expander
from .io import InputStream, Sink
from .patterns import EXTGLOB, NOCASE, ere_regex, fnmatch
from .state import ARRAY, Var


class ControlMixin(Expander):
    """Compound commands (mixed into the interpreter)."""

    loop_depth: int
    errexit_suppressed: int
    lineno: int
    out: Sink
    err: Sink
    stdin: InputStream | None

    async def tick(self) -> None:
        raise NotImplementedError

    async def run_seq(self, seq: A.Sequence) -> int:
        raise NotImplementedError

    async def failed(self, status: int) -> None:
        raise NotImplementedError

    def error(self, message: str) -> None:
        raise NotImplementedError

    async def run_cond_seq(self, seq: A.Sequence) -> int:
        self.errexit_suppressed += 1
        try:
            return await self.run_seq(seq)
        finally:
            self.errexit_suppressed -= 1

    def count_iteration(self, count: int) -> None:
        limits = self.limits
        if count > limits.max_loop_iterations:
            raise LimitExceeded(f"maximum loop iterations exceeded ({limits.max_loop_iterations})")
        ctx = self.ctx  # type: ignore[attr-defined]
        ctx.total_loops += 1
        if ctx.total_loops > limits.max_total_loop_iterations:
            raise LimitExceeded(
                f"maximum total loop iterations exceeded ({limits.max_total_loop_iterations})"
            )

    async def x_group(self, node: A.Group) -> int:
        await self.tick()
        return await self.run_seq(node.body)

    async def x_if(self, node: A.If) -> int:
        await self.tick()
        for cond, body in node.clauses:
            if await self.run_cond_seq(cond) == 0:
                return await self.run_seq(body)
        if node.orelse is not None:
            return await self.run_seq(node.orelse)
        self.status = 0
        return 0

    async def x_while(self, node: A.While) -> int:
        await self.tick()
        status = 0
        count = 0
        until = node.until
        self.loop_depth += 1
        try:
            while True:
                count += 1
                self.count_iteration(count)
                self.errexit_suppressed += 1
                try:
                    ok = await self.run_seq(node.cond) == 0
                finally:
                    self.errexit_suppressed -= 1
                if ok == until:
                    break
                try:
                    status = await self.run_seq(node.body)
                except (BreakLoop, ContinueLoop) as exc:
                    if _unwind(exc):
                        status = 0
                        break
        finally:
            self.loop_depth -= 1
        self.status = status
        return status

    async def x_for(self, node: A.For) -> int:
        await self.tick()
        if node.words is None:
            items = list(self.positional)
        else:
            items = await self.expand_args(node.words)
        if node.select:
            return await self.run_select(node, items)
        status = 0
        self.loop_depth += 1
        name = node.var
        try:
            for count, item in enumerate(items, 1):
                self.count_iteration(count)
                self.assign(name, item)
                try:
                    status = await self.run_seq(node.body)
                except (BreakLoop, ContinueLoop) as exc:
                    if _unwind(exc):
                        status = 0
                        break
        finally:
            self.loop_depth -= 1
        self.status = status
        return status

    async def run_select(self, node: A.For, items: list[str]) -> int:
        """``select``: the menu and prompt go to stderr, answers come from stdin."""
        status = 0
        count = 0
        show_menu = True
        self.loop_depth += 1
        try:
            while True:
                count += 1
                self.count_iteration(count)
                if show_menu:
                    for i, item in enumerate(items, 1):
                        self.err.write(f"{i}) {item}\n")
                self.err.write(self.get("PS3") or "#? ")
                stream = self.stdin
                if stream is None or stream.at_eof():
                    self.out.write("\n")
                    status = 1
                    break
                line, _ = stream.read_until("\n")
                self.assign("REPLY", line)
                show_menu = line.strip() == ""
                if show_menu:
                    continue
                choice = line.strip()
                ok = choice.isdigit() and 1 <= int(choice) <= len(items)
                self.assign(node.var, items[int(choice) - 1] if ok else "")
                try:
                    status = await self.run_seq(node.body)
                except (BreakLoop, ContinueLoop) as exc:
                    if _unwind(exc):
                        status = 0
                        break
        finally:
            self.loop_depth -= 1
        self.status = status
        return status

    async def arith_word(self, word: A.Word | None, default: int = 1) -> int:
        if word is None:
            return default
        text = word.literal if word.literal is not None else await self.expand_string(word)
        return self.arith_expr(text)

    async def x_arith_for(self, node: A.ArithFor) -> int:
        await self.tick()
        status = 0
        count = 0
        self.loop_depth += 1
        init, cond, update = node.init, node.cond, node.update
        # literal expressions (the common case) are compiled once, outside the loop
        cond_fn = compile_arith(cond.literal) if cond is not None and cond.literal else None
        update_fn = compile_arith(update.literal) if update is not None and update.literal else None
        try:
            await self.arith_word(init, 0)
            while True:
                count += 1
                self.count_iteration(count)
                ok = cond_fn(self) if cond_fn is not None else await self.arith_word(cond, 1)
                if not ok:
                    break
                try:
                    status = await self.run_seq(node.body)
                except (BreakLoop, ContinueLoop) as exc:
                    if _unwind(exc):
                        status = 0
                        break
                if update_fn is not None:
                    update_fn(self)
                else:
                    await self.arith_word(update, 0)
        except ArithError as exc:
            text = (cond.literal if cond else "") or ""
            raise DiscardLine(exc.render(text.strip()), 1) from None
        finally:
            self.loop_depth -= 1
        self.status = status
        return status

    async def x_case(self, node: A.Case) -> int:
        await self.tick()
        word = await self.expand_string(node.word)
        status = 0
        items = node.items
        i = 0
        matched = False
        while i < len(items):
            item = items[i]
            if not matched:
                for pat in item.patterns:
                    if fnmatch(word, await self.expand_pattern(pat), self.pattern_flags):
                        matched = True
                        break
            if matched:
                status = await self.run_seq(item.body)
                if item.terminator == ";;":
                    break
                if item.terminator == ";;&":
                    matched = False
            i += 1
        self.status = status
        return status

    async def x_arith(self, node: A.ArithCmd) -> int:
        await self.tick()
        self.lineno = node.line
        expr = node.expr
        text = expr.literal if expr.literal is not None else await self.expand_string(expr)
        try:
            value = compile_arith(text)(self)
        except ArithError as exc:
            self.error("((: " + exc.render(text))
            status = 1
        else:
            status = 0 if value else 1
        self.status = status
        if status:
            await self.failed(status)
        return status

    # ------------------------------------------------------------------- [[ ]]

    async def x_cond(self, node: A.CondCmd) -> int:
        await self.tick()
        self.lineno = node.line
        try:
            status = 0 if await self.cond(node.expr) else 1
        except ArithError as exc:
            self.error("[[: " + exc.render(exc.token or ""))
            status = 1
        except FatalShellError:
            raise
        except ShellError as exc:
            self.error(exc.message)
            status = exc.status
        self.status = status
        if status:
            await self.failed(status)
        return status

    async def cond(self, e: A.CondExpr) -> bool:
        if isinstance(e, A.CondBinary):
            return await self.cond_binary(e)
        if isinstance(e, A.CondUnary):
            return unary_test(self, e.op, await self.expand_string(e.operand))
        if isinstance(e, A.CondWord):
            return (await self.expand_string(e.word)) != ""
        if isinstance(e, A.CondNot):
            return not await self.cond(e.expr)
        if isinstance(e, A.CondAnd):
            return await self.cond(e.left) and await self.cond(e.right)
        return await self.cond(e.left) or await self.cond(e.right)

    async def cond_binary(self, e: A.CondBinary) -> bool:
        op = e.op
        left = await self.expand_string(e.left)
        if op in ("==", "=", "!="):
            pattern = await self.expand_pattern(e.right)
            result = fnmatch(left, pattern, self.pattern_flags | EXTGLOB)
            return not result if op == "!=" else result
        if op == "=~":
            return self.regex_match(left, await self.expand_pattern(e.right, REGEX))
        right = await self.expand_string(e.right)
        return binary_test(self, op, left, right, True)

    def regex_match(self, text: str, ere: str) -> bool:
        try:
            rx = ere_regex(ere, bool(self.pattern_flags & NOCASE))
        except (PatternError, ValueError, IndexError):
            raise ShellError(f"[[: invalid regular expression `{ere}'", 2) from None
        m = rx.search(text)
        if m is None:
            self.vars.pop("BASH_REMATCH", None)
            self.vars["BASH_REMATCH"] = Var({}, ARRAY, self.gen)
            return False
        groups = [m.group(0)] + [g if g is not None else "" for g in m.groups()]
        self.vars["BASH_REMATCH"] = Var(dict(enumerate(groups)), ARRAY, self.gen)
        return True


def _unwind(exc: BreakLoop | ContinueLoop) -> bool:
    """For a loop that caught break/continue: re-raise for outer loops (``break 2``),
    else True when the loop must stop."""
    if exc.levels > 1:
        exc.levels -= 1
        raise exc
    return isinstance(exc, BreakLoop)
