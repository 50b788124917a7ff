"""The parser entry point: script text -> ``ast.Program``, cached by text (bounded LRU).

tree-sitter-bash builds the tree (``convert`` turns it into ``ast`` nodes); when it
reports an error, the script is parsed once more with the regions that are known to
confuse it masked (``parse_repair``), and only if that fails too is the first error
reported, with line and column, before anything runs.

Differential cases: ``cases_basics.txt``, ``cases_control.txt``, ``cases_errors.txt``.
"""

from __future__ import annotations

from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from ..errors import ShellSyntaxError
from . import ast as A
from .convert import Converter
from .parse_repair import mask_expansions
from .syntax_errors import first_error

_LANGUAGE = Language(tree_sitter_bash.language())
_PARSER = Parser(_LANGUAGE)


def parse(script: str, max_depth: int = 100, max_ops: int = 100_000) -> A.Program:
    """Parse a script (cached by text). Raises ShellSyntaxError / ParseLimitError."""
    return _parse_cached(script, max_depth, max_ops)


@lru_cache(maxsize=512)
def _parse_cached(script: str, max_depth: int, max_ops: int) -> A.Program:
    data = script.encode("utf-8", "surrogatepass")
    tree = _PARSER.parse(data)
    err = first_error(tree.root_node)
    if err is None:
        try:
            return _convert(script, data, tree.root_node, max_depth, max_ops, [], set())
        except ShellSyntaxError as first:
            error: ShellSyntaxError = first
    else:
        error = Converter(script, data, tree.root_node, max_depth, max_ops, parse).syntax_error(err)
    # tree-sitter-bash misparses some valid scripts: parse again with the regions that
    # confuse it masked (see mask_expansions); if that fails too, report the first error
    spans: list[tuple[int, int]] = []
    bangs: set[int] = set()
    fakes: dict[int, int] = {}
    masked = mask_expansions(script, spans, bangs, fakes)
    if masked != script:
        retry = _PARSER.parse(masked.encode("utf-8", "surrogatepass"))
        if first_error(retry.root_node) is None:
            try:
                return _convert(
                    script, data, retry.root_node, max_depth, max_ops, spans, bangs, fakes
                )
            except ShellSyntaxError:
                pass
    raise error


def _convert(
    script: str,
    data: bytes,
    root: Node,
    max_depth: int,
    max_ops: int,
    spans: list[tuple[int, int]],
    bangs: set[int],
    fakes: dict[int, int] | None = None,
) -> A.Program:
    conv = Converter(script, data, root, max_depth, max_ops, parse)
    conv.masked = spans
    conv.bangs = bangs
    conv.fakes = fakes or {}
    return A.Program(conv.sequence(list(root.children)), script)
