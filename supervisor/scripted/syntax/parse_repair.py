"""Second chances for tree-sitter-bash: some valid scripts it misparses are parsed again
with the confusing regions masked (same UTF-8 length, so offsets still match the
original text, which is where words are lexed from).

Differential cases: ``cases_errors.txt``, ``cases_expansion.txt``,
``cases_control.txt``.
"""

from __future__ import annotations

import re

_COMPOUND_AFTER_BANG = re.compile(r"[ \t]+(?:if|for|while|until|case|select|\{|\(|\[\[)[ \t\n(]")


_ASSIGN_AT_START = re.compile(
    r"(?:^|(?<=[;&|(){}\n])|(?<=\bthen)|(?<=\bdo)|(?<=\belse))[ \t]*"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]\n]*\])?\+?="
)
REDIRECT_OP = re.compile(r"(\d*)(&>>|&>|>>|>\||>&|<&|>|<(?![<(]))[ \t]*")


def _scan_word(s: str, i: int) -> int:
    """End of the shell word starting at ``i`` (quotes and ``$(...)`` respected)."""
    n = len(s)
    depth = 0
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if c == '"' and s[j] == "\\" else 1
            i = j + 1
            continue
        if c in "({":
            depth += 1
        elif c in ")}":
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0 and c in " \t\n;&|<>":
            return i
        i += 1
    return n


def _mask_assignment_redirects(script: str, out: list[str], fakes: dict[int, int]) -> None:
    """``x=$(cmd) 2>/dev/null``: tree-sitter cannot parse one assignment with a
    redirection; each redirection becomes a dummy assignment ``Z=___`` (same length)
    that the converter turns back into the redirection (``fakes``: start -> end)."""
    for m in _ASSIGN_AT_START.finditer(script):
        j = _scan_word(script, m.end())
        while True:
            k = j
            while k < len(script) and script[k] in " \t":
                k += 1
            op = REDIRECT_OP.match(script, k)
            if op is None or k == j:
                break
            end = _scan_word(script, op.end())
            if end == op.end() or end - k < 2:
                break
            fakes[k] = end
            out[k] = "Z"
            out[k + 1] = "="
            _blank(out, script, k + 2, end, None)
            j = end


def mask_expansions(
    script: str,
    spans: list[tuple[int, int]] | None = None,
    bangs: set[int] | None = None,
    fakes: dict[int, int] | None = None,
) -> str:
    """The script with the inside of every ``${...}`` and ``$((...))`` blanked out
    (same UTF-8 length, newlines kept) and every ``[`` command renamed. tree-sitter-bash
    misparses some valid expansions (``${x:$i}``, ``${x: i*2}``, ``$((a); b)``) and ``[``
    commands (``[ -d / ]``, ``[ 1 -eq ]``); word interiors are lexed by ``word_parser``
    from the original text anyway, so when tree-sitter reports an error the script is
    parsed again in this form. ``spans`` receives the blanked (start, end) offsets: a
    ``$(...)`` found there must be parsed from the original text; ``bangs`` the offsets
    of the ``!`` removed before a compound command, which the converter puts back."""
    out = list(script)
    if fakes is not None:
        _mask_assignment_redirects(script, out, fakes)
    n = len(script)
    i = 0
    quote = ""
    while i < n:
        c = script[i]
        if c == "\\":
            i += 2
            continue
        if quote == "'":
            if c == "'":
                quote = ""
            i += 1
            continue
        if c == "'" and quote != '"':
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif c == "$" and script.startswith("{", i + 1):
            end = _match_close(script, i + 2, "{", "}")
            if end > 0:
                _blank(out, script, i + 2, end, spans)
                i = end + 1
                continue
        elif (
            c == "!"
            and not quote
            and (i == 0 or script[i - 1] in " \t\n;&|({")
            and _COMPOUND_AFTER_BANG.match(script, i + 1)
        ):
            out[i] = " "  # tree-sitter only negates simple commands: `! if ...`, `! {`
            if bangs is not None:
                bangs.add(i)
        elif (
            c == "["
            and not quote
            and script[i + 1 : i + 2] in (" ", "\t")
            and (i == 0 or script[i - 1] in " \t\n;&|(!{")
        ):
            out[i] = "_"  # `[` is a plain command to bash; tree-sitter parses it as a test
        elif c == "$" and script.startswith("((", i + 1):
            end = _match_close(script, i + 3, "(", ")")
            if end > 0 and script.startswith(")", end + 1):
                _blank(out, script, i + 3, end, spans)
                i = end + 2
                continue
            end = _match_close(script, i + 2, "(", ")")  # `$( (...); ...)`: a subshell
            if end > 0:
                _blank(out, script, i + 2, end, spans)
                i = end + 1
                continue
        i += 1
    return "".join(out)


def _match_close(s: str, i: int, open_c: str, close_c: str) -> int:
    depth = 1
    quote = ""
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _blank(
    out: list[str], s: str, start: int, end: int, spans: list[tuple[int, int]] | None
) -> None:
    """Blank ``s[start:end]``, keeping newlines and the UTF-8 length (byte offsets)."""
    if spans is not None:
        spans.append((start - 2, end + 1))
    for k in range(start, end):
        ch = s[k]
        if ch != "\n":
            out[k] = "_" * len(ch.encode("utf-8", "surrogatepass"))


def unterminated_quote(src: str) -> tuple[str, int] | None:
    """The quote char and offset of a quote that is never closed (comments skipped)."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "#" and (i == 0 or src[i - 1] in " \t\n;&|("):
            nl = src.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if c == "'":
            ansi = i > 0 and src[i - 1] == "$"
            j = i + 1
            while j < n and src[j] != "'":
                j += 2 if ansi and src[j] == "\\" else 1
            if j >= n:
                return "'", i
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            if j >= n:
                return '"', i
            i = j + 1
            continue
        i += 1
    return None
