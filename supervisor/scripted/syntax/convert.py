"""Conversion of a tree-sitter-bash tree into ``ast`` nodes (used by ``parser``).

tree-sitter gives the statement structure and reports syntax errors as ERROR/MISSING
nodes; word interiors are lexed by ``word_parser``. A few known tree-sitter-bash quirks are
repaired here (``! a | b`` negates the pipeline, a pipeline or ``&&`` list written after a
here-doc start is nested inside the redirect, ``a\\<newline>b`` is split in two) so that
the tree means what bash means.

Differential cases: ``cases_basics.txt``, ``cases_control.txt``, ``cases_heredoc.txt``,
``cases_quoting.txt``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

from tree_sitter import Node

from ..budget import spend
from ..errors import ParseLimitError, ShellSyntaxError
from ..shell.arithmetic import ArithError, compile_arith
from . import ast as A
from .braces import brace_expand
from .parse_repair import REDIRECT_OP, LostSeparator
from .syntax_errors import UNEXPECTED_IN_COMMAND, empty_for_list, syntax_error
from .word_parser import WordLexer, make_word

RESERVED = frozenset(
    {"then", "fi", "do", "done", "esac", "elif", "else", "in", "}", "]]", "{", "!", "(("}
)
_REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SKIP = frozenset({"comment", "heredoc_body", "heredoc_end"})
_LIST_OPERATORS = frozenset({"|", "|&", "&&", "||"})
#: a character that ends a here-document's delimiter word, and quoted text
_DELIMITER_END = re.compile(r"[;&|<>()\s]")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\\.")


class Converter:
    """Converts one tree; holds the source and the ``$(...)`` node index."""

    def __init__(
        self,
        src: str,
        data: bytes,
        root: Node,
        max_depth: int,
        max_ops: int,
        parse_text: Callable[[str, int, int], A.Program],
    ) -> None:
        self.src = src
        self.root = root
        self.parse_text = parse_text  # for `$(...)` text tree-sitter did not parse
        self.masked: list[tuple[int, int]] = []  # regions tree-sitter saw blanked
        self.bangs: set[int] = set()  # `!` removed before compound commands
        self.fakes: dict[int, int] = {}  # redirections disguised as assignments
        self.herestrings: set[int] = set()  # byte offsets of `<<<` masked as `<`
        # byte offset of a `<<` -> the redirections after its delimiter, masked
        self.heredoc_redirs: dict[int, list[tuple[int, int]]] = {}
        # byte offset of a `<<` -> the commands after `;` on its line, masked
        self.heredoc_tails: dict[int, tuple[str, int, int]] = {}
        self.data = data
        self.parsed = data  # the text tree-sitter parsed (masked and repaired)
        self.ascii = len(src) == len(data)
        self.max_depth = max_depth
        self.max_ops = max_ops
        self.depth = 0
        self.ops = 0
        self._subst: dict[int, Node] | None = None
        self._b2c: list[int] | None = None

    # ------------------------------------------------------------------ positions

    def c(self, byte_offset: int) -> int:
        """Character offset of a byte offset."""
        if self.ascii:
            return byte_offset
        if self._b2c is None:
            table = [0] * (len(self.data) + 1)
            b = 0
            for i, ch in enumerate(self.src):
                n = len(ch.encode("utf-8", "surrogatepass"))
                for k in range(n):
                    table[b + k] = i
                b += n
            table[b] = len(self.src)
            self._b2c = table
        return self._b2c[byte_offset]

    def text(self, node: Node) -> str:
        return self.src[self.c(node.start_byte) : self.c(node.end_byte)]

    def error_at(self, message: str, char_offset: int) -> ShellSyntaxError:
        line = self.src.count("\n", 0, char_offset) + 1
        col = char_offset - (self.src.rfind("\n", 0, char_offset) + 1) + 1
        return ShellSyntaxError(message, line, col)

    # ------------------------------------------------------------------ substitutions

    def resolve(self, offset: int) -> tuple[A.Program, int] | None:
        for start, end in self.masked:
            if start <= offset < end:
                return None  # tree-sitter saw this blanked out: parse the original text
        if self._subst is None:
            index: dict[int, Node] = {}
            stack = [self.root]
            while stack:
                n = stack.pop()
                if n.type in ("command_substitution", "process_substitution"):
                    index[self.c(n.start_byte)] = n
                stack.extend(n.children)
            self._subst = index
        node = self._subst.get(offset)
        if node is None:
            return None
        body = list(node.children)
        if body and not body[0].is_named:
            body = body[1:]  # $( or ` or <(
        if body and not body[-1].is_named and body[-1].type in (")", "`"):
            body = body[:-1]
        return A.Program(self.sequence(body)), self.c(node.end_byte)

    def parse_fragment(self, text: str) -> A.Program:
        return self.parse_text(text, self.max_depth, self.max_ops)

    def lexer(self, start: int, end: int, line: int = 1) -> WordLexer:
        return WordLexer(self.src, start, end, self.resolve, self.parse_fragment, line)

    def word_range(self, start: int, end: int, assignment: bool = False) -> A.Word:
        lx = self.lexer(start, end)
        try:
            return lx.word(assignment)
        except ShellSyntaxError as exc:
            raise self.error_at(exc.message, start) from None

    def arg_word(self, start: int, end: int) -> A.ArgWord:
        return brace_expand(self.word_range(start, end))

    def split_words(self, start: int, end: int) -> list[tuple[int, int]]:
        """Word boundaries in ``src[start:end]``: unquoted blanks separate words."""
        src = self.src
        spans: list[tuple[int, int]] = []
        i = start
        while i < end:
            while i < end and src[i] in " \t\n":
                i += 1
            if i >= end:
                break
            if src[i] == "#":
                nl = src.find("\n", i, end)
                i = end if nl < 0 else nl
                continue
            lx = self.lexer(i, end)
            try:
                lx._parts(stop=" \t\n")
            except ShellSyntaxError as exc:
                raise self.error_at(exc.message, i) from None
            spans.append((i, lx.pos))
            i = lx.pos
        return spans

    def merged_ranges(self, nodes: list[Node]) -> list[tuple[int, int]]:
        """Character ranges of argument nodes, joining nodes that touch (or that are
        separated only by backslash-newline)."""
        spans: list[tuple[int, int]] = []
        for n in nodes:
            s, e = self.c(n.start_byte), self.c(n.end_byte)
            if spans:
                gap = self.src[spans[-1][1] : s]
                if not gap or gap.replace("\\\n", "") == "":
                    spans[-1] = (spans[-1][0], e)
                    continue
            spans.append((s, e))
        return spans

    # ------------------------------------------------------------------ statements

    def tick(self) -> None:
        spend(64)  # a statement's conversion: the deadline holds while parsing
        self.ops += 1
        if self.ops > self.max_ops:
            raise ParseLimitError(
                f"parser fuel exhausted ({self.ops} operations, max {self.max_ops})"
            )

    def check_separators(self, node: Node) -> None:
        """Raise ``LostSeparator`` where a line break inside ``node`` separated two
        commands for bash (tree-sitter-bash issue 347 joins them); a line break is part
        of a command only after ``|``, ``&&`` or ``||`` or when escaped."""
        parsed = self.parsed
        if b"\n" not in parsed[node.start_byte : node.end_byte]:
            return
        prev: Node | None = None
        after_op = False
        for ch in node.children:
            if prev is not None and not after_op:
                gap = parsed[prev.end_byte : ch.start_byte]
                nl = gap.find(b"\n")
                while nl > 0 and gap[nl - 1] == 0x5C:  # backslash-newline joins lines
                    nl = gap.find(b"\n", nl + 1)
                if nl >= 0:
                    comment = prev.type == "comment"
                    blank = (prev.start_byte, prev.end_byte) if comment else None
                    raise LostSeparator(prev.end_byte + nl, blank)
            if ch.type != "comment":
                after_op = ch.type in _LIST_OPERATORS
            prev = ch

    def sequence(self, nodes: list[Node], lines: list[int] | None = None) -> A.Sequence:
        """Statements; ``lines`` receives the indices of those that begin a new line
        (a line break between them and the statement before)."""
        out: list[A.Node] = []
        prev_end = 0
        for n in nodes:
            t = n.type
            if t in _SKIP or not n.is_named:
                if t == "&" and out:
                    out[-1] = A.Background(out[-1], _line_of(out[-1]))
                continue
            if lines is not None and (not out or b"\n" in self.data[prev_end : n.start_byte]):
                lines.append(len(out))
            out.append(self.stmt(n))
            prev_end = n.end_byte
        return A.Sequence(tuple(out), out[0].line if out else 1)

    def body_of(self, node: Node) -> A.Sequence:
        """Statements inside a do_group / compound_statement / subshell."""
        inner = node.children
        if inner and not inner[0].is_named:
            inner = inner[1:]
        if inner and not inner[-1].is_named and inner[-1].type in ("}", ")", "done"):
            inner = inner[:-1]
        return self.sequence(list(inner))

    def stmt(self, node: Node) -> A.Node:
        self.tick()
        self.depth += 1
        if self.depth > self.max_depth:
            raise ParseLimitError(
                f"AST nesting too deep ({self.depth} levels, max {self.max_depth})"
            )
        try:
            method = getattr(self, "s_" + node.type, None)
            if method is None:
                raise self.error_at(
                    f"syntax error near unexpected token `{self.text(node)[:20]}'",
                    self.c(node.start_byte),
                )
            result: A.Node = method(node)
            if self.bangs:
                result = self.restore_bang(node, result)
            return result
        finally:
            self.depth -= 1

    def restore_bang(self, node: Node, result: A.Node) -> A.Node:
        """Negate a compound command whose ``!`` was masked for tree-sitter."""
        i = self.c(node.start_byte) - 1
        while i >= 0 and self.src[i] in " \t":
            i -= 1
        if i in self.bangs:
            self.bangs.discard(i)
            return A.Pipeline((result,), True, (), result.line)
        return result

    def s_command(self, node: Node) -> A.Node:
        self.check_separators(node)
        line = node.start_point[0] + 1
        assigns: list[A.Assign] = []
        redirs: list[A.Redir] = []
        args: list[Node] = []
        children = node.children
        i = -1
        while i + 1 < len(children):
            i += 1
            ch = children[i]
            t = ch.type
            if t == "variable_assignment":
                end, i = self.continued_value(children, i)
                assigns.append(self.assignment(ch, end))
            elif t in _REDIRECT_TYPES:
                redirs.append(self.redirect(ch))
            elif ch.is_named:
                if t != "comment":
                    args.append(ch)
            elif node.field_name_for_child(i) in ("name", "argument"):
                args.append(ch)  # e.g. the `$` tree-sitter splits off `$"..."`
        words = [self.arg_word(s, e) for s, e in self.merged_ranges(args)]
        if words:
            first = words[0]
            if (
                type(first) is A.Word
                and first.literal in UNEXPECTED_IN_COMMAND
                and type(first.parts[0]) is A.Lit
                and not first.parts[0].quoted
            ):
                raise self.error_at(
                    f"syntax error near unexpected token `{first.literal}'",
                    self.c(args[0].start_byte),
                )
        if (
            len(words) > 1 and not assigns and type(words[0]) is A.Word and words[0].text == "!"
        ):  # `! ! cmd`: tree-sitter takes the second `!` for a command name
            inner = A.SimpleCommand((), tuple(words[1:]), tuple(redirs), line)
            return A.Pipeline((inner,), True, (), line)
        return A.SimpleCommand(tuple(assigns), tuple(words), tuple(redirs), line)

    def s_variable_assignment(self, node: Node) -> A.Node:
        return A.SimpleCommand((self.assignment(node),), (), (), node.start_point[0] + 1)

    def s_variable_assignments(self, node: Node) -> A.Node:
        self.check_separators(node)
        assigns: list[A.Assign] = []
        redirs: list[A.Redir] = []
        for ch in node.named_children:
            start = self.c(ch.start_byte)
            if start in self.fakes:
                redirs.append(self.fake_redirect(start, self.fakes[start]))
            elif ch.type == "variable_assignment":
                assigns.append(self.assignment(ch))
        return A.SimpleCommand(tuple(assigns), (), tuple(redirs), node.start_point[0] + 1)

    def fake_redirect(self, start: int, end: int) -> A.Redir:
        """A redirection that was masked as ``Z=...`` (see mask_expansions)."""
        m = REDIRECT_OP.match(self.src, start, end)
        assert m is not None
        fd = int(m.group(1)) if m.group(1) else None
        return A.Redir(m.group(2), self.word_range(m.end(), end), fd)

    def s_declaration_command(self, node: Node) -> A.Node:
        self.check_separators(node)
        line = node.start_point[0] + 1
        builtin = self.text(node.children[0])
        args: list[A.ArgWord | A.Assign] = []
        plain: list[Node] = []

        def flush() -> None:
            args.extend(self.arg_word(s, e) for s, e in self.merged_ranges(plain))
            plain.clear()

        redirs: list[A.Redir] = []
        children = node.children
        i = 0
        while i + 1 < len(children):
            i += 1
            ch = children[i]
            if ch.type == "variable_assignment":
                flush()
                end, i = self.continued_value(children, i)
                args.append(self.assignment(ch, end))
            elif ch.type in _REDIRECT_TYPES:
                redirs.append(self.redirect(ch))
            elif ch.is_named and ch.type != "comment":
                plain.append(ch)
        flush()
        return A.DeclCommand(builtin, tuple(args), tuple(redirs), line)

    def s_unset_command(self, node: Node) -> A.Node:
        self.check_separators(node)
        nodes = [ch for ch in node.children[1:] if ch.is_named and ch.type != "comment"]
        redirs = tuple(self.redirect(ch) for ch in nodes if ch.type in _REDIRECT_TYPES)
        nodes = [ch for ch in nodes if ch.type not in _REDIRECT_TYPES]
        words = [self.arg_word(s, e) for s, e in self.merged_ranges(nodes)]
        unset = make_word([A.Lit(self.text(node.children[0]))], "unset")
        return A.SimpleCommand((), (unset, *words), redirs, node.start_point[0] + 1)

    def s_test_command(self, node: Node) -> A.Node:
        line = node.start_point[0] + 1
        opener = node.children[0].type
        if opener == "[[":
            inner = [ch for ch in node.children[1:-1] if ch.type != "comment"]
            if len(inner) != 1:
                raise self.error_at(
                    "syntax error in conditional expression", self.c(node.start_byte)
                )
            return A.CondCmd(self.cond(inner[0]), line)
        # `[ ... ]`: re-lex the inside into plain words for the `[` builtin
        start = self.c(node.children[0].end_byte)
        end = self.c(node.children[-1].start_byte)
        words: list[A.ArgWord] = [make_word([A.Lit("[")], "[")]
        words.extend(self.arg_word(s, e) for s, e in self.split_words(start, end))
        words.append(make_word([A.Lit("]")], "]"))
        return A.SimpleCommand((), tuple(words), (), line)

    def s_redirected_statement(self, node: Node) -> A.Node:
        self.check_separators(node)
        body_node = node.child_by_field_name("body")
        redirs: list[A.Redir] = []
        tail_pipe: list[A.Node] = []
        tail_list: list[tuple[str, A.Node]] = []
        after: list[A.Node] = []
        for ch in node.children:
            if ch.type in _REDIRECT_TYPES:
                redirs.append(self.redirect(ch))
                if ch.type == "heredoc_redirect":
                    self.heredoc_tail(ch, redirs, tail_pipe, tail_list, after)
        if body_node is None:
            body: A.Node = A.SimpleCommand((), (), (), node.start_point[0] + 1)
        else:
            body = self.stmt(body_node)
        if type(body) in (A.SimpleCommand, A.DeclCommand) and not (
            type(body) is A.SimpleCommand and not body.words and body.assigns
        ):
            body.redirs = body.redirs + tuple(redirs)  # type: ignore[union-attr]
        else:
            body = A.Redirected(body, tuple(redirs), node.start_point[0] + 1)
        if tail_pipe:
            body = _join_pipeline(body, tail_pipe)
        if tail_list:
            body = A.AndOr(body, tuple(tail_list), body.line)
        if after:
            return A.Sequence((body, *after), body.line)
        return body

    def heredoc_tail(
        self,
        node: Node,
        redirs: list[A.Redir],
        pipe: list[A.Node],
        rest: list[tuple[str, A.Node]],
        after: list[A.Node],
    ) -> None:
        """tree-sitter nests what follows ``<<EOF`` on its line inside the redirect
        (the redirections before a pipe were masked: see ``heredoc_redirs``; a tail it
        cannot read was masked too, and is parsed on its own: see ``heredoc_tails``)."""
        marker = next(ch for ch in node.children if ch.type in ("<<", "<<-"))
        for start, end in self.heredoc_redirs.get(marker.start_byte, ()):
            redirs.append(self.fake_redirect(start, end))
        masked = self.heredoc_tails.get(marker.start_byte)
        if masked is not None and masked[1] < masked[2]:
            tail_op, start, end = masked
            line = self.src.count("\n", 0, start)  # parsed at its own line
            stmts = self.parse_fragment("\n" * line + self.src[start:end]).body.body
            first, others = (stmts[0], stmts[1:]) if stmts else (None, ())
            if first is None:
                pass
            elif tail_op == ";":
                after.extend(stmts)
            elif tail_op == "|":
                _pipe_into(first, pipe, rest)
                after.extend(others)
            else:
                _and_or_into(tail_op, first, rest)
                after.extend(others)
        op = None
        for i, ch in enumerate(node.children):
            field = node.field_name_for_child(i)
            if ch.type in _REDIRECT_TYPES:
                redirs.append(self.redirect(ch))
            elif ch.type == "pipeline" and not ch.children[0].is_named:
                _pipe_into(self.stmt(ch), pipe, rest)
            elif field == "operator":
                op = ch.type
            elif field == "right" and op is not None:
                _and_or_into(op, self.stmt(ch), rest)

    def s_pipeline(self, node: Node) -> A.Node:
        self.check_separators(node)
        cmds: list[A.Node] = []
        stderr_too: list[bool] = []
        negate = False
        tail: tuple[tuple[str, A.Node], ...] = ()
        for ch in node.children:
            if not ch.is_named:
                if ch.type in ("|", "|&"):
                    stderr_too.append(ch.type == "|&")
                continue
            if ch.type == "comment":
                continue
            if ch.type == "negated_command" and not cmds:
                negate = True
                inner = ch.named_children[-1]
                cmds.append(self.stmt(inner))
                continue
            converted = self.stmt(ch)
            if type(converted) is A.AndOr:  # tree-sitter: `a | b && c` nested wrongly
                first = converted.first
                if type(first) is A.Pipeline and not first.negate:
                    cmds.extend(first.cmds)
                    stderr_too.extend(first.stderr_too)
                else:
                    cmds.append(first)
                tail = converted.rest
            else:
                cmds.append(converted)
        pipeline: A.Node = A.Pipeline(
            tuple(cmds), negate, tuple(stderr_too), node.start_point[0] + 1
        )
        if tail:
            return A.AndOr(pipeline, tail, pipeline.line)
        return pipeline

    def s_negated_command(self, node: Node) -> A.Node:
        inner = self.stmt(node.named_children[-1])
        if type(inner) is A.Pipeline and not inner.negate:
            inner.negate = True
            return inner
        return A.Pipeline((inner,), True, (), node.start_point[0] + 1)

    def s_list(self, node: Node) -> A.Node:
        self.check_separators(node)
        first: A.Node | None = None
        rest: list[tuple[str, A.Node]] = []
        op = None
        for ch in node.children:
            if not ch.is_named:
                if ch.type in ("&&", "||"):
                    op = ch.type
                continue
            if ch.type == "comment":
                continue
            converted = self.stmt(ch)
            if first is None:
                if type(converted) is A.AndOr:
                    first = converted.first
                    rest.extend(converted.rest)
                else:
                    first = converted
            elif op is not None:
                rest.append((op, converted))
        assert first is not None
        return A.AndOr(first, tuple(rest), node.start_point[0] + 1)

    def s_subshell(self, node: Node) -> A.Node:
        return A.Subshell(self.body_of(node), node.start_point[0] + 1)

    def s_compound_statement(self, node: Node) -> A.Node:
        line = node.start_point[0] + 1
        if node.children and node.children[0].type == "((":
            start = self.c(node.children[0].end_byte)
            end = self.c(node.children[-1].start_byte)
            return A.ArithCmd(self.arith_range(start, end), line)
        return A.Group(self.body_of(node), line)

    def s_do_group(self, node: Node) -> A.Node:
        return A.Group(self.body_of(node), node.start_point[0] + 1)

    def s_if_statement(self, node: Node) -> A.Node:
        clauses: list[tuple[A.Sequence, A.Sequence]] = []
        orelse: A.Sequence | None = None
        cond: list[Node] = []
        body: list[Node] = []
        state = "cond"
        for ch in node.children:
            t = ch.type
            if t in ("if", "elif"):
                state = "cond"
            elif t == "then":
                state = "body"
            elif t == "elif_clause":
                clauses.append((self.sequence(cond), self.sequence(body)))
                cond, body = [], []
                self._clause(ch, cond, body)
            elif t == "else_clause":
                clauses.append((self.sequence(cond), self.sequence(body)))
                cond, body = [], []
                orelse = self.sequence([x for x in ch.children if x.type != "else"])
                state = "done"
            elif t == "fi":
                break
            elif state == "cond":
                cond.append(ch)
            elif state == "body":
                body.append(ch)
        if state != "done":
            clauses.append((self.sequence(cond), self.sequence(body)))
        return A.If(tuple(clauses), orelse, node.start_point[0] + 1)

    def _clause(self, node: Node, cond: list[Node], body: list[Node]) -> None:
        state = "cond"
        for ch in node.children:
            if ch.type == "elif":
                continue
            if ch.type == "then":
                state = "body"
            elif state == "cond":
                cond.append(ch)
            else:
                body.append(ch)

    def s_while_statement(self, node: Node) -> A.Node:
        until = node.children[0].type == "until"
        cond = [
            ch for i, ch in enumerate(node.children) if node.field_name_for_child(i) == "condition"
        ]
        body = node.child_by_field_name("body")
        assert body is not None
        return A.While(self.sequence(cond), self.body_of(body), until, node.start_point[0] + 1)

    def s_for_statement(self, node: Node) -> A.Node:
        var = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        assert var is not None and body is not None
        values = [
            ch for i, ch in enumerate(node.children) if node.field_name_for_child(i) == "value"
        ]
        has_in = any(ch.type == "in" or empty_for_list(ch) for ch in node.children)
        words = (
            tuple(self.arg_word(s, e) for s, e in self.merged_ranges(values)) if has_in else None
        )
        select = node.children[0].type == "select"
        return A.For(self.text(var), words, self.body_of(body), node.start_point[0] + 1, select)

    def s_c_style_for_statement(self, node: Node) -> A.Node:
        line = node.start_point[0] + 1
        open_tok = next(ch for ch in node.children if ch.type == "((")
        close_tok = next(ch for ch in node.children if ch.type == "))")
        start, end = self.c(open_tok.end_byte), self.c(close_tok.start_byte)
        pieces: list[A.Word | None] = []
        depth, seg = 0, start
        for i in range(start, end + 1):
            c = self.src[i] if i < end else ";"
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == ";" and depth == 0:
                text = self.src[seg:i]
                pieces.append(self.arith_range(seg, i) if text.strip() else None)
                seg = i + 1
        if len(pieces) != 3:
            raise self.error_at("syntax error: arithmetic for", start)
        body = node.child_by_field_name("body")
        assert body is not None
        return A.ArithFor(pieces[0], pieces[1], pieces[2], self.body_of(body), line)

    def s_case_statement(self, node: Node) -> A.Node:
        value = node.child_by_field_name("value")
        assert value is not None
        items: list[A.CaseItem] = []
        for ch in node.children:
            if ch.type == "case_item":
                items.append(self.case_item(ch))
        word = self.arg_word(self.c(value.start_byte), self.c(value.end_byte))
        return A.Case(word, tuple(items), node.start_point[0] + 1)

    def case_item(self, node: Node) -> A.CaseItem:
        patterns: list[A.ArgWord] = []
        body: list[Node] = []
        term = ";;"
        seen_paren = False
        for i, ch in enumerate(node.children):
            field = node.field_name_for_child(i)
            if not seen_paren:
                if field == "value":
                    s, e = self.c(ch.start_byte), self.c(ch.end_byte)
                    patterns.append(self.word_range(s, e))
                elif ch.type == ")":
                    seen_paren = True
                continue
            if ch.type in (";;", ";&", ";;&"):
                term = ch.type
            else:
                body.append(ch)
        return A.CaseItem(tuple(patterns), self.sequence(body), term)

    def s_function_definition(self, node: Node) -> A.Node:
        name = node.child_by_field_name("name")
        body_node = node.child_by_field_name("body")
        assert name is not None and body_node is not None
        body = self.stmt(body_node)
        redirs = [self.redirect(ch) for ch in node.children if ch.type in _REDIRECT_TYPES]
        if redirs:
            body = A.Redirected(body, tuple(redirs), body.line)
        return A.FunctionDef(self.text(name), body, node.start_point[0] + 1)

    def s_ERROR(self, node: Node) -> A.Node:
        raise self.syntax_error(node)

    # ---------------------------------------------------------------- components

    def arith_range(self, start: int, end: int) -> A.Word:
        lx = self.lexer(start, end)
        parts = lx._parts(stop="")
        return make_word(parts, self.src[start:end])

    def continued_value(self, nodes: list[Node], i: int) -> tuple[int, int]:
        """The end of the assignment ``nodes[i]`` and the index of its last node: a value
        continued by backslash-newline (``x="a"\\<newline>"b"``) is one word for bash,
        where tree-sitter ends the assignment at the line break and reads the rest as
        words."""
        end = self.c(nodes[i].end_byte)
        continued = False
        while i + 1 < len(nodes):
            nxt = nodes[i + 1]
            if not nxt.is_named or nxt.type in _REDIRECT_TYPES or nxt.type == "comment":
                break
            gap = self.src[end : self.c(nxt.start_byte)]
            if gap.replace("\\\n", "") or not (gap or continued):
                break
            continued = True
            end = self.c(nxt.end_byte)
            i += 1
        return end, i

    def assignment(self, node: Node, end: int | None = None) -> A.Assign:
        """``node`` as an assignment (its value ends at ``end`` when continued past it:
        see ``continued_value``)."""
        name_node = node.child_by_field_name("name")
        assert name_node is not None
        index: A.Word | None = None
        if name_node.type == "subscript":
            base = name_node.child_by_field_name("name")
            assert base is not None
            name = self.text(base)
            open_b = self.c(base.end_byte) + 1
            close_b = self.c(name_node.end_byte) - 1
            index = self.word_range(open_b, close_b)
        else:
            name = self.text(name_node)
        op_node = next(ch for ch in node.children if ch.type in ("=", "+="))
        append = op_node.type == "+="
        start = self.c(op_node.end_byte)
        end = self.c(node.end_byte) if end is None else end
        value_node = node.child_by_field_name("value")
        text = self.text(node)
        if value_node is not None and value_node.type == "array":
            items = self.array_items(self.c(value_node.start_byte) + 1, end - 1)
            return A.Assign(name, None, index, append, items, text)
        value = self.word_range(start, end, assignment=True) if end > start else None
        assign = A.Assign(name, value, index, append, None, text)
        if value is not None and index is None and not append and len(value.parts) == 1:
            part = value.parts[0]
            if type(part) is A.ArithSub and part.expr.literal is not None:
                with contextlib.suppress(ArithError):  # reported when it runs, like bash
                    assign.arith = compile_arith(part.expr.literal)
        return assign

    def array_items(self, start: int, end: int) -> tuple[A.ArrayItem, ...]:
        items: list[A.ArrayItem] = []
        src = self.src
        for s, e in self.split_words(start, end):
            key: A.Word | None = None
            append = False
            if src[s] == "[":
                depth, j = 0, s
                while j < e:
                    if src[j] == "[":
                        depth += 1
                    elif src[j] == "]":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                if j < e and src.startswith("]=", j):
                    key = self.word_range(s + 1, j)
                    s = j + 2
                elif j < e and src.startswith("]+=", j):
                    key = self.word_range(s + 1, j)
                    append = True
                    s = j + 3
            value = self.arg_word(s, e) if key is None else self.word_range(s, e, True)
            items.append(A.ArrayItem(value, key, append))
        return tuple(items)

    def redirect(self, node: Node) -> A.Redir:
        fd: int | None = None
        op = ""
        target_start = -1
        heredoc_start: Node | None = None
        for ch in node.children:
            t = ch.type
            if t == "file_descriptor":
                fd = int(self.text(ch))
            elif not ch.is_named and not op:
                op = "<<<" if t == "<" and ch.start_byte in self.herestrings else t
                target_start = self.c(ch.end_byte)
            elif t == "heredoc_start":
                heredoc_start = ch
                bad = _DELIMITER_END.search(_QUOTED.sub("", self.text(ch)))
                if bad:  # `cat <<EOF; cmd`: tree-sitter took `EOF;` (parsed again masked)
                    raise self.error_at(
                        f"syntax error near unexpected token `{bad.group()}'",
                        self.c(ch.start_byte),
                    )
        if node.type == "heredoc_redirect":
            assert heredoc_start is not None
            return A.Redir(op, self.heredoc_body(node, heredoc_start), fd)
        end = self.c(node.end_byte)
        dest = [
            ch
            for i, ch in enumerate(node.children)
            if ch.is_named and ch.type not in ("file_descriptor", "comment")
        ]
        if dest:
            end = self.c(dest[-1].end_byte)
            target_start = self.c(dest[0].start_byte)
        if op == "<" and self.src[target_start - 1 : target_start + 1] == "((":
            op = "<"
        return A.Redir(op, self.word_range(target_start, end), fd)

    def heredoc_body(self, node: Node, start_node: Node) -> A.Word:
        delim = self.text(start_node)
        quoted = any(q in delim for q in "'\"\\")
        strip = any(ch.type == "<<-" for ch in node.children)
        body = next((ch for ch in node.children if ch.type == "heredoc_body"), None)
        end_node = next((ch for ch in node.children if ch.type == "heredoc_end"), None)
        if body is None or end_node is None:
            return make_word([A.Lit("", True)], "")
        b_start = self.c(body.start_byte)
        line_start = self.src.rfind("\n", 0, b_start) + 1
        e = self.c(end_node.start_byte)
        end_line = self.src.find("\n", e)
        if end_node.end_byte > end_node.start_byte and self.src[
            self.c(end_node.end_byte) : len(self.src) if end_line < 0 else end_line
        ].strip(" \t"):  # `END_NOT` ended the body of <<END (parsed again masked)
            raise self.error_at(f"here-document ended early (wanted `{delim}')", e)
        last_nl = self.src.rfind("\n", line_start, e)
        b_end = last_nl + 1 if last_nl >= line_start else line_start
        if b_end <= line_start:
            return make_word([A.Lit("", True)], "")
        raw = self.src[line_start:b_end]
        if strip:
            raw = "".join(line.lstrip("\t") for line in raw.splitlines(keepends=True))
        if quoted:
            return make_word([A.Lit(raw, True)], raw)
        if strip and raw != self.src[line_start:b_end]:
            lx = WordLexer(raw, 0, len(raw), lambda _o: None, self.parse_fragment)
        else:
            lx = self.lexer(line_start, b_end)
        try:
            return lx.heredoc()
        except ShellSyntaxError as exc:
            raise self.error_at(exc.message, line_start) from None

    # ----------------------------------------------------------------- [[ ... ]]

    def cond(self, node: Node) -> A.CondExpr:
        t = node.type
        if t == "parenthesized_expression":
            inner = [ch for ch in node.named_children if ch.type != "comment"]
            return self.cond(inner[0])
        if t == "unary_expression":
            op_node = node.children[0]
            operand = node.children[-1]
            op = self.text(op_node)
            if op == "!":
                return A.CondNot(self.cond(operand))
            s, e = self.c(op_node.end_byte), self.c(node.end_byte)
            while s < e and self.src[s] in " \t":
                s += 1
            return A.CondUnary(op, self.arg_word(s, e))
        if t == "binary_expression":
            bin_op = node.child_by_field_name("operator")
            left_node = node.child_by_field_name("left")
            assert bin_op is not None and left_node is not None
            left = left_node
            op = self.text(bin_op)
            if op == "&&":
                right = node.child_by_field_name("right")
                assert right is not None
                return A.CondAnd(self.cond(left), self.cond(right))
            if op == "||":
                right = node.child_by_field_name("right")
                assert right is not None
                return A.CondOr(self.cond(left), self.cond(right))
            ls, le = self.c(left.start_byte), self.c(left.end_byte)
            rs, re_ = self.c(bin_op.end_byte), self.c(node.end_byte)
            while rs < re_ and self.src[rs] in " \t":
                rs += 1
            if op == "=~":
                right_word: A.ArgWord = self.word_range(rs, re_)
            elif op in ("==", "=", "!="):
                right_word = self.word_range(rs, re_)
            else:
                right_word = self.arg_word(rs, re_)
            return A.CondBinary(op, self.arg_word(ls, le), right_word)
        return A.CondWord(self.arg_word(self.c(node.start_byte), self.c(node.end_byte)))

    # ------------------------------------------------------------------- errors

    def syntax_error(self, node: Node) -> ShellSyntaxError:
        return syntax_error(self, node)


def _line_of(node: A.Node) -> int:
    return node.line


def _pipe_into(node: A.Node, pipe: list[A.Node], rest: list[tuple[str, A.Node]]) -> None:
    """What follows ``<<EOF |`` on its line: the pipeline's next commands, then the
    and-or list it starts."""
    if type(node) is A.Pipeline and not node.negate:
        pipe.extend(node.cmds)
    elif type(node) is A.AndOr:
        first = node.first
        pipe.extend(first.cmds if type(first) is A.Pipeline and not first.negate else [first])
        rest.extend(node.rest)
    else:
        pipe.append(node)


def _and_or_into(op: str, node: A.Node, rest: list[tuple[str, A.Node]]) -> None:
    """What follows ``<<EOF &&`` (or ``||``) on its line."""
    if type(node) is A.AndOr:
        rest.append((op, node.first))
        rest.extend(node.rest)
    else:
        rest.append((op, node))


def _join_pipeline(head: A.Node, tail: list[A.Node]) -> A.Node:
    return A.Pipeline((head, *tail), False, (False,) * len(tail), head.line)
