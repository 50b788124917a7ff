"""The parser entry point: script text -> ``ast.Program``, cached by text (bounded LRU).

tree-sitter-bash builds the tree (``convert`` turns it into ``ast`` nodes); when it
reports an error, the script is parsed once more with the regions that are known to
confuse it masked (``parse_repair``), and only if that fails too is the first error
reported, with line and column, before anything runs. When the tree has silently joined
two lines into one command (a line break lost, ``LostSeparator``), a ``;`` is written at
that line break and the script parsed again, so no line is ever lost.

Differential cases: ``cases_basics.txt``, ``cases_control.txt``, ``cases_errors.txt``.
"""

from __future__ import annotations

import time

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from ..budget import check_time, expire, seconds_left
from ..errors import ShellSyntaxError
from ..sized_cache import sized_cache
from . import ast as A
from .convert import Converter
from .parse_repair import LostSeparator, mask_expansions
from .syntax_errors import first_error

_LANGUAGE = Language(tree_sitter_bash.language())
_PARSER = Parser(_LANGUAGE)


def parse(script: str, max_depth: int = 100, max_ops: int = 100_000) -> A.Program:
    """Parse a script (cached by text). Raises ShellSyntaxError / ParseLimitError."""
    return _parse_cached(script, max_depth, max_ops)


@sized_cache(max_entries=512, max_bytes=1 << 20)
def _parse_cached(script: str, max_depth: int, max_ops: int) -> A.Program:
    data = script.encode("utf-8", "surrogatepass")
    text = bytearray(data)  # what tree-sitter reads: repaired, then maybe masked
    repairs = _Repairs()
    error: ShellSyntaxError | None = None
    for _ in range(_MAX_ROUNDS):
        root = _tree(bytes(text))
        err = first_error(root)
        if err is None:
            try:
                return _convert(script, data, bytes(text), root, max_depth, max_ops, repairs)
            except LostSeparator as lost:
                lost.apply(text)
                repairs.lost.append(lost)
                continue
            except ShellSyntaxError as exc:
                failure = exc
        else:
            conv = Converter(script, data, root, max_depth, max_ops, parse)
            failure = conv.syntax_error(err)
        error = error or failure
        # tree-sitter-bash misparses some valid scripts: parse again with the regions
        # that confuse it masked (see mask_expansions); if that fails too, report the
        # first error
        if repairs.masked:
            break
        repairs.masked = True
        masked = mask_expansions(
            script,
            repairs.spans,
            repairs.bangs,
            repairs.fakes,
            repairs.herestrings,
            repairs.heredoc_redirs,
            repairs.heredoc_tails,
        )
        if masked == script:
            break
        text = bytearray(masked.encode("utf-8", "surrogatepass"))
        for repaired in repairs.lost:
            repaired.apply(text)
    raise error or ShellSyntaxError("syntax error: the parser could not read the script")


#: parse rounds: each repairs one lost line break (or masks once) and parses again
_MAX_ROUNDS = 64
#: tree-sitter reads the text in chunks this large; the deadline is checked between them
_CHUNK = 1 << 14
#: tree-sitter works on after its input ends: about a fifth of the time it spent reading
#: (measured on 0.3 to 2 MB scripts), up to a half on a loaded machine. The input ends
#: early enough for that work to end by the deadline.
_FINISH_SHARE = 0.5


def _tree(text: bytes) -> Node:
    """tree-sitter's tree of ``text``; a long text is read in chunks, the execution's
    deadline checked before each (one C call must not outlast it), and the input ends
    when what tree-sitter does after its end would pass the deadline."""
    if len(text) <= _CHUNK:
        return _PARSER.parse(text).root_node

    stopped: list[BaseException] = []
    began = time.monotonic()

    def read(offset: int, _point: object) -> bytes:
        # an exception must not cross tree-sitter's C frames: end the input, raise after
        if not stopped:
            try:
                check_time()
                left = seconds_left()
                if left is not None and (time.monotonic() - began) * _FINISH_SHARE >= left:
                    expire()
            except BaseException as exc:
                stopped.append(exc)
        return b"" if stopped else text[offset : offset + _CHUNK]

    root = _PARSER.parse(read).root_node
    if stopped:
        raise stopped[0]
    return root


class _Repairs:
    """What the rounds changed in the text tree-sitter reads (see ``parse_repair``)."""

    def __init__(self) -> None:
        self.lost: list[LostSeparator] = []
        self.masked = False
        self.spans: list[tuple[int, int]] = []
        self.bangs: set[int] = set()
        self.fakes: dict[int, int] = {}
        self.herestrings: set[int] = set()
        self.heredoc_redirs: dict[int, list[tuple[int, int]]] = {}
        self.heredoc_tails: dict[int, tuple[str, int, int]] = {}


def _convert(
    script: str,
    data: bytes,
    parsed: bytes,
    root: Node,
    max_depth: int,
    max_ops: int,
    repairs: _Repairs,
) -> A.Program:
    conv = Converter(script, data, root, max_depth, max_ops, parse)
    conv.parsed = parsed
    conv.masked = repairs.spans
    conv.bangs = set(repairs.bangs)  # the converter consumes them
    conv.fakes = repairs.fakes
    conv.herestrings = repairs.herestrings
    conv.heredoc_redirs = repairs.heredoc_redirs
    conv.heredoc_tails = repairs.heredoc_tails
    lines: list[int] = []
    body = conv.sequence(list(root.children), lines)
    return A.Program(body, script, tuple(lines))
