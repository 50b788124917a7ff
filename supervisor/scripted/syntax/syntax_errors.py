"""Syntax errors as bash words them (``syntax error near unexpected token `then'``,
``unexpected end of file``), from the first ERROR/MISSING node of a tree-sitter tree.

Differential cases: ``cases_errors.txt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tree_sitter import Node

from ..errors import ShellSyntaxError
from .parse_repair import unterminated_quote

if TYPE_CHECKING:
    from .convert import Converter

UNEXPECTED_IN_COMMAND = frozenset({"then", "fi", "do", "done", "esac", "elif", "else", "}"})
_OPENERS = frozenset({"if", "while", "until", "for", "select", "case", "{", "(", "$(", "function"})


def syntax_error(conv: Converter, node: Node) -> ShellSyntaxError:
    """A bash-like message for the first ERROR/MISSING node."""
    quote = unterminated_quote(conv.src)
    if quote is not None:
        char, offset = quote
        return conv.error_at(f"unexpected EOF while looking for matching `{char}'", offset)
    misplaced = _reserved_command(node)
    if misplaced is not None:
        return conv.error_at(
            f"syntax error near unexpected token `{conv.text(misplaced)}'",
            conv.c(misplaced.start_byte),
        )
    if node.is_missing:
        if conv.c(node.start_byte) >= len(conv.src.rstrip()):
            return eof_error(conv)
        return conv.error_at(
            f"syntax error near unexpected token `{node.type}'", conv.c(node.start_byte)
        )
    leaves = list(_leaves(node))
    ends_at_eof = conv.c(node.end_byte) >= len(conv.src.rstrip())
    tokens = [conv.text(x) for x in leaves]
    if ends_at_eof and any(t in _OPENERS for t in tokens):
        return eof_error(conv)
    for leaf, tok in zip(leaves, tokens, strict=True):
        if tok in UNEXPECTED_IN_COMMAND or tok in (")", ";;", ";&", ";;&", "|", "||", "&&"):
            if tok in ("&&", "||", "|") and leaf is leaves[-1]:
                nxt = leaf.next_sibling or node.next_sibling
                if nxt is not None:
                    return conv.error_at(
                        f"syntax error near unexpected token `{conv.text(nxt)}'",
                        conv.c(nxt.start_byte),
                    )
            return conv.error_at(
                f"syntax error near unexpected token `{tok}'", conv.c(leaf.start_byte)
            )
    first = leaves[0] if leaves else node
    if ends_at_eof:
        return eof_error(conv)
    return conv.error_at(
        f"syntax error near unexpected token `{conv.text(first)}'",
        conv.c(first.start_byte),
    )


def eof_error(conv: Converter) -> ShellSyntaxError:
    lines = conv.src.count("\n") + (0 if conv.src.endswith("\n") else 1)
    return ShellSyntaxError("syntax error: unexpected end of file", lines + 1, 1)


def _reserved_command(node: Node) -> Node | None:
    """A reserved word that tree-sitter took for a command name (``if then fi``)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if (
            n.type == "command_name"
            and n.text is not None
            and n.text.decode("utf-8", "replace") in UNEXPECTED_IN_COMMAND
        ):
            return n
        stack.extend(reversed(n.children))
    return None


def _leaves(node: Node) -> Any:
    if node.child_count == 0:
        yield node
        return
    for ch in node.children:
        if ch.type in ("word", "string", "raw_string", "number") and ch.child_count:
            yield ch
        else:
            yield from _leaves(ch)


def empty_for_list(n: Node) -> bool:
    """``for x in; do`` (an empty list): tree-sitter marks the ``in`` as an error."""
    parent = n.parent
    return (
        n.type == "ERROR"
        and parent is not None
        and parent.type == "for_statement"
        and [c.type for c in n.children] == ["in"]
    )


def first_error(root: Node) -> Node | None:
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        n = stack.pop()
        if (n.type == "ERROR" or n.is_missing) and not empty_for_list(n):
            return n
        stack.extend(reversed([ch for ch in n.children if ch.has_error or ch.is_missing]))
    return None
