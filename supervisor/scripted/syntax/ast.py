"""The shell's syntax tree: compact slotted nodes built once per script by ``parser``.

The tree-sitter tree is converted into these nodes a single time (and cached by script
text), so the interpreter never touches tree-sitter while running. Words keep their
quoting as *parts*, because splitting, pattern matching and ``"$@"`` all depend on which
characters were quoted.

Differential cases: ``cases_basics.txt``, ``cases_control.txt``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

# ---------------------------------------------------------------------------- words


@dataclass(slots=True)
class Lit:
    """Literal text. ``quoted`` text is never split, globbed or treated as a pattern."""

    text: str
    quoted: bool = False


@dataclass(slots=True)
class DQ:
    """A double-quoted string: its parts expand without splitting; ``""`` is a field."""

    parts: tuple[Part, ...]


@dataclass(slots=True)
class Tilde:
    """A leading ``~`` (or ``~user``) of a word or of an assignment value segment."""

    user: str = ""


@dataclass(slots=True)
class Param:
    """A parameter expansion: ``$x``, ``${x}`` and every ``${x<op>...}`` form.

    ``op`` is '' for a plain value, 'len' for ``${#x}``, or the operator text
    (``:-``, ``#``, ``//``, ``^^``, ``:`` for substrings, ``@Q`` ...). ``index`` is the
    subscript of ``x[...]`` as a word; ``'@'``/``'*'`` subscripts are kept as strings.
    """

    name: str
    op: str = ""
    index: Word | str | None = None
    arg: Word | None = None
    arg2: Word | None = None
    indirect: bool = False
    text: str = ""  # the source text, for error messages ("bad substitution")


@dataclass(slots=True)
class CmdSub:
    """``$(...)`` or a backquoted command: the program runs in a subshell."""

    body: Program


@dataclass(slots=True)
class ArithSub:
    """``$((...))``: ``expr`` is expanded first, then evaluated as arithmetic."""

    expr: Word


@dataclass(slots=True)
class ProcSub:
    """``<(...)`` / ``>(...)``. Only ``< <(...)`` runs (its output is the command's
    input); as a file name it is refused when reached (there is no filesystem)."""

    text: str
    program: Program | None = None


Part: TypeAlias = Lit | DQ | Tilde | Param | CmdSub | ArithSub | ProcSub


@dataclass(slots=True)
class Word:
    """One shell word. ``literal`` is its value when it has no expansion at all."""

    parts: tuple[Part, ...]
    literal: str | None = None
    text: str = ""


@dataclass(slots=True)
class BraceWord:
    """A word whose brace expansion (``{a,b}``, ``{1..3}``) yields several words."""

    words: tuple[Word, ...]
    text: str = ""


ArgWord: TypeAlias = Word | BraceWord

# ------------------------------------------------------------------ assignments/redirs


@dataclass(slots=True)
class ArrayItem:
    """One element of ``a=(...)``: ``[key]=value`` or a plain word (maybe ``+=``)."""

    value: ArgWord
    key: Word | None = None
    append: bool = False


@dataclass(slots=True)
class Assign:
    """``name=value``, ``name+=value``, ``name[i]=value`` or ``name=(items)``."""

    name: str
    value: Word | None
    index: Word | None = None
    append: bool = False
    array: tuple[ArrayItem, ...] | None = None
    text: str = ""
    #: for ``name=$((literal expression))``: the compiled expression (a fast path)
    arith: Callable[[Any], int] | None = None


@dataclass(slots=True)
class Redir:
    """A redirection. ``op`` is one of ``> >> < <> >| &> &>> >& <& <<< <<``.

    ``fd`` is the explicit descriptor (None for the operator's default). For here-docs
    ``target`` is the body word (already unquoted or not, per the delimiter).
    """

    op: str
    target: Word
    fd: int | None = None


# ------------------------------------------------------------------------- commands


@dataclass(slots=True)
class SimpleCommand:
    assigns: tuple[Assign, ...]
    words: tuple[ArgWord, ...]
    redirs: tuple[Redir, ...] = ()
    line: int = 1


@dataclass(slots=True)
class DeclCommand:
    """``declare``/``local``/``export``/``readonly``/``typeset``: assignment arguments
    keep their structure (arrays, no splitting)."""

    builtin: str
    args: tuple[ArgWord | Assign, ...]
    redirs: tuple[Redir, ...] = ()
    line: int = 1


@dataclass(slots=True)
class Pipeline:
    cmds: tuple[Node, ...]
    negate: bool = False
    #: for each ``|`` (len(cmds) - 1 entries): True when it is ``|&``
    stderr_too: tuple[bool, ...] = ()
    line: int = 1


@dataclass(slots=True)
class AndOr:
    """``a && b || c``: ``rest`` holds (operator, command) pairs, left-associative."""

    first: Node
    rest: tuple[tuple[str, Node], ...]
    line: int = 1


@dataclass(slots=True)
class Background:
    """``cmd &``: runs as a concurrent job (see ``jobs``)."""

    body: Node
    line: int = 1


@dataclass(slots=True)
class Sequence:
    body: tuple[Node, ...]
    line: int = 1


@dataclass(slots=True)
class Subshell:
    body: Sequence
    line: int = 1


@dataclass(slots=True)
class Group:
    body: Sequence
    line: int = 1


@dataclass(slots=True)
class If:
    clauses: tuple[tuple[Sequence, Sequence], ...]
    orelse: Sequence | None = None
    line: int = 1


@dataclass(slots=True)
class While:
    cond: Sequence
    body: Sequence
    until: bool = False
    line: int = 1


@dataclass(slots=True)
class For:
    var: str
    words: tuple[ArgWord, ...] | None  # None: iterate over "$@"
    body: Sequence
    line: int = 1
    select: bool = False


@dataclass(slots=True)
class ArithFor:
    init: Word | None
    cond: Word | None
    update: Word | None
    body: Sequence
    line: int = 1


@dataclass(slots=True)
class CaseItem:
    patterns: tuple[ArgWord, ...]
    body: Sequence
    terminator: str = ";;"  # or ';&' (fall through) or ';;&' (test next)


@dataclass(slots=True)
class Case:
    word: ArgWord
    items: tuple[CaseItem, ...]
    line: int = 1


@dataclass(slots=True)
class FunctionDef:
    name: str
    body: Node
    line: int = 1


@dataclass(slots=True)
class ArithCmd:
    """``(( expr ))``: status 0 when the value is non-zero."""

    expr: Word
    line: int = 1


# [[ ... ]] expressions


@dataclass(slots=True)
class CondWord:
    word: ArgWord


@dataclass(slots=True)
class CondNot:
    expr: CondExpr


@dataclass(slots=True)
class CondAnd:
    left: CondExpr
    right: CondExpr


@dataclass(slots=True)
class CondOr:
    left: CondExpr
    right: CondExpr


@dataclass(slots=True)
class CondUnary:
    op: str
    operand: ArgWord


@dataclass(slots=True)
class CondBinary:
    op: str
    left: ArgWord
    right: ArgWord


CondExpr: TypeAlias = CondWord | CondNot | CondAnd | CondOr | CondUnary | CondBinary


@dataclass(slots=True)
class CondCmd:
    expr: CondExpr
    line: int = 1


@dataclass(slots=True)
class Redirected:
    """A compound command with redirections (``while ...; done < /dev/null``)."""

    body: Node
    redirs: tuple[Redir, ...]
    line: int = 1


Node: TypeAlias = (
    SimpleCommand
    | DeclCommand
    | Pipeline
    | AndOr
    | Background
    | Sequence
    | Subshell
    | Group
    | If
    | While
    | For
    | ArithFor
    | Case
    | FunctionDef
    | ArithCmd
    | CondCmd
    | Redirected
)


@dataclass(slots=True)
class Program:
    body: Sequence
    source: str = ""
    #: indices into ``body.body`` of the commands that start a new line (bash reads a
    #: script file line by line: an abandoned line skips to the next of these)
    lines: tuple[int, ...] = ()


EMPTY_SEQUENCE = Sequence(())
