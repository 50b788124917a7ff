"""The table of text tools: each tool behind its ``--help``/``--version`` and its output
cap (see the package docstring).

Differential cases: ``cases_text_tools.txt``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from supervisor.scripted.contract import READS_STDIN, Command, CommandResult

from .awk import awk
from .awk import reads_stdin as awk_reads_stdin
from .b64 import base64
from .common import OutputLimitError, limit_result
from .cut import cut
from .expr import expr
from .extras import cat, fold, nl, paste, rev, tac, tee
from .grep import grep
from .headtail import head, tail
from .jq_tool.options import reads_stdin as jq_reads_stdin
from .jq_tool.pool import jq
from .pathnames import basename, dirname
from .sed import sed
from .seq import seq
from .sort import sort
from .tr import tr
from .uniq import uniq
from .wc import wc

_USAGE = {
    "base64": "Usage: base64 [OPTION]... [FILE]",
    "basename": "Usage: basename NAME [SUFFIX]\n  or:  basename OPTION... NAME...",
    "cat": "Usage: cat [OPTION]... [FILE]...",
    "dirname": "Usage: dirname [OPTION] NAME...",
    "awk": "Usage: awk [POSIX or GNU style options] [--] 'program' [file ...]",
    "jq": "Usage:\tjq [OPTIONS] FILTER [FILES...]",
    "cut": "Usage: cut OPTION... [FILE]...",
    "expr": "Usage: expr EXPRESSION",
    "fold": "Usage: fold [OPTION]... [FILE]...",
    "grep": "Usage: grep [OPTION]... PATTERNS [FILE]...",
    "head": "Usage: head [OPTION]... [FILE]...",
    "nl": "Usage: nl [OPTION]... [FILE]...",
    "paste": "Usage: paste [OPTION]... [FILE]...",
    "rev": "Usage: rev [options] [file ...]",
    "sed": "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...",
    "seq": "Usage: seq [OPTION]... LAST\n  or:  seq [OPTION]... FIRST LAST\n"
    "  or:  seq [OPTION]... FIRST INCREMENT LAST",
    "sort": "Usage: sort [OPTION]... [FILE]...",
    "tac": "Usage: tac [OPTION]... [FILE]...",
    "tail": "Usage: tail [OPTION]... [FILE]...",
    "tee": "Usage: tee [OPTION]... [FILE]...",
    "tr": "Usage: tr [OPTION]... STRING1 [STRING2]",
    "uniq": "Usage: uniq [OPTION]... [INPUT [OUTPUT]]",
    "wc": "Usage: wc [OPTION]... [FILE]...",
}


#: Tools that answer ``--help``/``--version`` themselves.
_OWN_HELP = frozenset({"jq", "awk"})


def _guarded(name: str, tool: Command, limit_status: int) -> Command:
    """The tool, plus ``--help``/``--version`` and the output cap turned into an error."""
    usage = _USAGE.get(name, f"Usage: {name} [OPTION]...")

    def run(args: list[str], stdin: str | None) -> CommandResult | Awaitable[CommandResult]:
        if args and args[0] == "--help" and name not in _OWN_HELP:
            return CommandResult(usage + "\n(sandvisor: reads standard input only)\n", "", 0)
        if args and args[0] == "--version" and name not in _OWN_HELP:
            return CommandResult(f"{name} (sandvisor text tools)\n", "", 0)
        try:
            return tool(args, stdin)
        except OutputLimitError:
            return limit_result(name, limit_status)

    reads = _READS_STDIN.get(name, _reads_operands)

    def reads_stdin(args: list[str]) -> bool:
        if args and args[0] in ("--help", "--version") and name not in _OWN_HELP:
            return False
        return reads(args)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = tool.__doc__
    setattr(run, READS_STDIN, reads_stdin)
    return run


def _reads_operands(args: list[str]) -> bool:
    """A filter reads standard input (GNU tools with no operand or ``-`` read it; a file
    operand is refused, so counting it as a read changes nothing)."""
    return True


#: Tools that read standard input only with some arguments (``reads_stdin``, see
#: ``contract.READS_STDIN``): the rest are filters and read it all.
def _no_input(args: list[str]) -> bool:
    return False


_READS_STDIN: dict[str, Callable[[list[str]], bool]] = {
    "awk": awk_reads_stdin,
    "basename": _no_input,
    "dirname": _no_input,
    "expr": _no_input,
    "jq": jq_reads_stdin,
    "seq": _no_input,
}


#: Each tool and its exit status when its output is over the cap. A tool is a `Command`:
#: ``jq`` returns an awaitable (the interpreter awaits it) inside an event loop when its
#: engine's answer takes a while; the others answer at once.
_TOOLS: dict[str, tuple[Command, int]] = {
    "awk": (awk, 2),
    "base64": (base64, 1),
    "basename": (basename, 1),
    "cat": (cat, 1),
    "cut": (cut, 1),
    "dirname": (dirname, 1),
    "expr": (expr, 2),
    "fold": (fold, 1),
    "grep": (grep, 2),
    "head": (head, 1),
    "jq": (jq, 5),
    "nl": (nl, 1),
    "paste": (paste, 1),
    "rev": (rev, 1),
    "sed": (sed, 4),
    "seq": (seq, 1),
    "sort": (sort, 2),
    "tac": (tac, 1),
    "tail": (tail, 1),
    "tee": (tee, 1),
    "tr": (tr, 1),
    "uniq": (uniq, 1),
    "wc": (wc, 1),
}

TEXT_COMMANDS: dict[str, Command] = {
    name: _guarded(name, tool, status) for name, (tool, status) in sorted(_TOOLS.items())
}

__all__ = ["TEXT_COMMANDS"]
