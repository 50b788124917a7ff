"""Tokens of an awk program (gawk's dialect).

awk's lexing depends on context in one place: ``/`` starts a regex literal unless the
previous token ends an operand (then it divides). Newlines are tokens: they end
statements, and the parser skips them where the grammar allows a line break.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...budget import spend

KEYWORDS = frozenset({
    "BEGIN", "END", "BEGINFILE", "ENDFILE", "function", "func", "if", "else", "while",
    "for", "do", "break", "continue", "next", "nextfile", "exit", "return", "delete", "in",
    "getline", "print", "printf",
})  # fmt: skip

BUILTINS = frozenset({
    "length", "substr", "index", "split", "sub", "gsub", "match", "sprintf", "sin", "cos",
    "atan2", "exp", "log", "sqrt", "int", "rand", "srand", "tolower", "toupper", "system",
    "close", "fflush", "gensub", "strftime", "systime", "mktime", "asort", "asorti", "and",
    "or", "xor", "lshift", "rshift", "compl", "strtonum", "typeof", "isarray", "patsplit",
})  # fmt: skip

# Longest first, so "**=" wins over "**" and "*".
_OPERATORS = sorted(
    (
        "+=", "-=", "*=", "/=", "%=", "^=", "**=", "**", "++", "--", "&&", "||", "==",
        "!=", "<=", ">=", "!~", ">>", "+", "-", "*", "/", "%", "^", "!", ">", "<", "|",
        "?", ":", "~", "$", "=", "(", ")", "[", "]", "{", "}", ",", ";",
    ),
    key=len,
    reverse=True,
)  # fmt: skip

# Tokens after which "/" divides (they end an operand).
_OPERAND_END = frozenset({"NUMBER", "STRING", "ERE", "NAME", "BUILTIN", ")", "]", "$", "++", "--"})

_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_STRING_ESCAPES = {
    '"': '"', "\\": "\\", "/": "/", "a": "\a", "b": "\b", "f": "\f", "n": "\n",
    "r": "\r", "t": "\t", "v": "\v",
}  # fmt: skip


class AwkSyntaxError(Exception):
    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(slots=True)
class Token:
    kind: str  # NUMBER STRING ERE NAME FUNC_NAME BUILTIN NEWLINE EOF, a keyword or operator
    value: str | float
    line: int
    column: int


def unescape_string(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1 : j], 8)))
            i = j
            continue
        if nxt == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            if m:
                out.append(chr(int(m.group(0), 16)))
                i += 2 + m.end()
                continue
        out.append(_STRING_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def tokenize(src: str) -> list[Token]:
    tokens: list[Token] = []
    i = 0
    n = len(src)
    line = 1
    line_start = 0
    prev = ""

    def add(kind: str, value: str | float, start: int) -> None:
        nonlocal prev
        spend()  # a program of megabytes lexes under the deadline
        tokens.append(Token(kind, value, line, start - line_start))
        prev = kind

    while i < n:
        c = src[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and src[i + 1] == "\n":
            i += 2
            line += 1
            line_start = i
            continue
        if c == "\\" and src.startswith("\\\r\n", i):
            i += 3
            line += 1
            line_start = i
            continue
        if c == "#":
            while i < n and src[i] != "\n":
                i += 1
            continue
        if c == "\n":
            add("NEWLINE", "\n", i)
            i += 1
            line += 1
            line_start = i
            continue
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                if src[j] == "\\" and j + 1 < n:
                    j += 2
                    continue
                if src[j] == "\n":
                    raise AwkSyntaxError("unterminated string", line, i - line_start)
                j += 1
            if j >= n:
                raise AwkSyntaxError("unterminated string", line, i - line_start)
            add("STRING", unescape_string(src[i + 1 : j]), i)
            i = j + 1
            continue
        if c == "/" and prev not in _OPERAND_END:
            j = i + 1
            in_bracket = False
            while j < n:
                d = src[j]
                if d == "\n":
                    raise AwkSyntaxError("unterminated regexp", line, i - line_start)
                if d == "\\":
                    j += 2
                    continue
                if in_bracket:
                    if d == "[" and j + 1 < n and src[j + 1] in ":.=":
                        close = src.find(src[j + 1] + "]", j + 2)
                        j = close + 2 if close >= 0 else j + 1
                        continue
                    if d == "]":
                        in_bracket = False
                    j += 1
                    continue
                if d == "[":
                    in_bracket = True
                    j += 1
                    # "[]...]" and "[^]...]": the first "]" is a member.
                    if j < n and src[j] == "^":
                        j += 1
                    if j < n and src[j] == "]":
                        j += 1
                    continue
                if d == "/":
                    break
                j += 1
            if j >= n:
                raise AwkSyntaxError("unterminated regexp", line, i - line_start)
            add("ERE", src[i + 1 : j], i)
            i = j + 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = _NUMBER.match(src, i)
            assert m is not None
            text = m.group(0)
            if text[:2] in ("0x", "0X"):
                value = float(int(text, 16))
            elif (
                len(text) > 1 and text[0] == "0" and text.isdigit() and set(text) <= set("01234567")
            ):
                value = float(int(text, 8))
            else:
                value = float(text)
            add("NUMBER", value, i)
            i = m.end()
            continue
        if c.isalpha() or c == "_":
            m = _NAME.match(src, i)
            assert m is not None
            word = m.group(0)
            j = m.end()
            if word in KEYWORDS:
                add(word, word, i)
            elif word in BUILTINS:
                add("BUILTIN", word, i)
            elif j < n and src[j] == "(":
                add("FUNC_NAME", word, i)
            else:
                add("NAME", word, i)
            i = j
            continue
        for op in _OPERATORS:
            if src.startswith(op, i):
                add(op, op, i)
                i += len(op)
                break
        else:
            raise AwkSyntaxError(f"invalid char '{c}' in expression", line, i - line_start)
    add("NEWLINE", "\n", i)
    add("EOF", "", i)
    return tokens
