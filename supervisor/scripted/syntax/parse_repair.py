"""Second chances for tree-sitter-bash: some valid scripts it misparses are parsed again
with the confusing regions masked (same UTF-8 length, so offsets still match the
original text, which is where words are lexed from).

Differential cases: ``cases_errors.txt``, ``cases_expansion.txt``,
``cases_control.txt``, ``cases_fidelity.txt``.
"""

from __future__ import annotations

import re

_COMPOUND_AFTER_BANG = re.compile(r"[ \t]+(?:if|for|while|until|case|select|\{|\(|\[\[)[ \t\n(]")


_ASSIGN_AT_START = re.compile(
    r"(?:^|(?<=[;&|(){}\n])|(?<=\bthen)|(?<=\bdo)|(?<=\belse))[ \t]*"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]\n]*\])?\+?="
)
REDIRECT_OP = re.compile(r"(\d*)(&>>|&>|>>|>\||>&|<&|>|<(?![<(]))[ \t]*")


class LostSeparator(Exception):
    """tree-sitter-bash dropped the line break at byte ``offset`` between two commands
    (tree-sitter-bash issue 347: after a pipeline of two or more stages, or after an
    assignment with a redirection, the next line's words join the command before it).
    The parser writes a ``;`` there and parses again; a comment that ends at that line
    break (``blank``: its byte range) is blanked first, so the ``;`` stays outside it."""

    def __init__(self, offset: int, blank: tuple[int, int] | None) -> None:
        super().__init__(offset)
        self.offset = offset
        self.blank = blank

    def apply(self, text: bytearray) -> None:
        if self.blank is not None:
            text[self.blank[0] : self.blank[1]] = b" " * (self.blank[1] - self.blank[0])
        text[self.offset] = ord(";")


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
    that the converter turns back into the redirection (``fakes``: start -> end).
    The subscript of an array assignment is blanked too (``m[$a,$b]=1``: tree-sitter
    cannot read some keys; the converter reads the original text)."""
    for m in _ASSIGN_AT_START.finditer(script):
        open_b = script.find("[", m.start(), m.end())
        if open_b >= 0:
            _blank(out, script, open_b + 1, m.end() - (3 if m.group().endswith("+=") else 2), None)
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
    herestrings: set[int] | None = None,
    heredoc_redirs: dict[int, list[tuple[int, int]]] | None = None,
    heredoc_tails: dict[int, tuple[str, int, int]] | None = None,
) -> str:
    """The script with the inside of every ``${...}`` and ``$((...))`` blanked out
    (same UTF-8 length, newlines kept) and every ``[`` command renamed. tree-sitter-bash
    misparses some valid expansions (``${x:$i}``, ``${x: i*2}``, ``$((a); b)``) and ``[``
    commands (``[ -d / ]``, ``[ 1 -eq ]``); word interiors are lexed by ``word_parser``
    from the original text anyway, so when tree-sitter reports an error the script is
    parsed again in this form. ``spans`` receives the blanked (start, end) offsets: a
    ``$(...)`` found there must be parsed from the original text; ``bangs`` the offsets
    of the ``!`` removed before a compound command, which the converter puts back.

    Also masked: a bracket expression whose first member is ``]`` (``[]]``, ``[^]]``,
    ``[!]]``: a case pattern or a regex), an extglob group (``*.@(js|css)``, ``!(x)``),
    the inside of an arithmetic command or ``for ((...))`` but its ``;`` (``(( 10#$x >
    8 ))``: the converter reads it from the original text), the ``#`` of a base after a
    digit (``[[ 10#$x -gt 8 ]]``), the ``<<<`` of a here-string on a brace group,
    subshell, ``for``, ``case`` or ``[[ ]]`` (written ``<`` and recorded in
    ``herestrings``), and the
    redirections between a here-document's delimiter and a pipe (``cat <<EOF 2>&1 |
    wc``: tree-sitter takes the pipe for a word; they are blanked and recorded in
    ``heredoc_redirs`` under the byte offset of the ``<<``), and the commands after a
    here-document's delimiter and ``;``, or an operator written against it (``cat
    <<EOF; echo done``, ``cat <<EOF|jq .``: tree-sitter takes ``EOF;`` or ``EOF|jq`` for
    the delimiter; blanked and recorded with the operator in ``heredoc_tails``, the
    converter parses them on their own). Comments and here-document bodies are
    skipped, so an apostrophe in them changes nothing."""
    out = list(script)
    if fakes is not None:
        _mask_assignment_redirects(script, out, fakes)
    n = len(script)
    i = 0
    quote = ""
    heredocs: list[tuple[str, bool]] = []  # delimiters whose bodies start at the next line
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
            if i > 0 and script[i - 1] == "$":
                i = _ansi_end(script, i + 1)  # $'...': backslash escapes the quote
                continue
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif quote:
            if c == "$" and script.startswith("{", i + 1):
                end = _match_close(script, i + 2, "{", "}")
                if end > 0:
                    _blank(out, script, i + 2, end, spans)
                    i = end + 1
                    continue
            elif c == "$" and script.startswith("((", i + 1):
                i = _mask_arith(script, out, i, spans)
                continue
        elif c == "#" and (i == 0 or script[i - 1] in _WORD_START):
            nl = script.find("\n", i)
            i = n if nl < 0 else nl  # a comment
            continue
        elif c == "#" and script[i - 1].isdigit():
            out[i] = "_"  # `[[ 10#$x -gt 8 ]]`: a base, which tree-sitter cannot read there
        elif c == "\n" and heredocs:
            i = _skip_heredoc_bodies(script, i + 1, heredocs, out)
            continue
        elif c == "<" and script.startswith("<<", i) and not script.startswith("<<<", i):
            start = i
            i = _heredoc_start(script, i + 2, heredocs)
            tail = _command_after_delimiter(script, i)
            if tail is not None and heredoc_tails is not None:
                heredoc_tails[len(script[:start].encode("utf-8", "surrogatepass"))] = tail
                op, tail_start, tail_end = tail
                for k in range(tail_start - len(op), tail_end):  # spaces: no word goes on
                    out[k] = " " * len(script[k].encode("utf-8", "surrogatepass"))
            else:
                _space_after_delimiter(script, out, i)
            piped = _redirects_before_pipe(script, i)
            if piped and heredoc_redirs is not None:
                heredoc_redirs[len(script[:start].encode("utf-8", "surrogatepass"))] = piped
                for s, e in piped:
                    for k in range(s, e):
                        out[k] = " " * len(script[k].encode("utf-8", "surrogatepass"))
            continue
        elif c == "<" and script.startswith("<<<", i):
            if _after_group(script, i):
                out[i + 1] = out[i + 2] = " "  # tree-sitter refuses `{ ...; } <<< w`
                if herestrings is not None:
                    herestrings.add(len(script[:i].encode("utf-8", "surrogatepass")))
            i += 3
            continue
        elif c in "@*?+!" and script.startswith("(", i + 1) and (i == 0 or script[i - 1] != "$"):
            end = _match_close(script, i + 2, "(", ")")  # an extglob group: @(a|b) !(x)
            if end > 0:
                _blank(out, script, i, end + 1, None)
                i = end + 1
                continue
        elif c == "[" and _BRACKET_WITH_CLOSE.match(script, i):
            end = _bracket_end(script, i)
            if end > 0:
                _blank(out, script, i, end + 1, None)
                i = end + 1
                continue
        elif c == "$" and script.startswith("{", i + 1):
            end = _match_close(script, i + 2, "{", "}")
            if end > 0:
                _blank(out, script, i + 2, end, spans)
                i = end + 1
                continue
        elif (
            c == "!"
            and (i == 0 or script[i - 1] in " \t\n;&|({")
            and _COMPOUND_AFTER_BANG.match(script, i + 1)
        ):
            out[i] = " "  # tree-sitter only negates simple commands: `! if ...`, `! {`
            if bangs is not None:
                bangs.add(i)
        elif (
            c == "["
            and script[i + 1 : i + 2] in (" ", "\t")
            and (i == 0 or script[i - 1] in " \t\n;&|(!{")
        ):
            out[i] = "_"  # `[` is a plain command to bash; tree-sitter parses it as a test
        elif c == "$" and script.startswith("((", i + 1):
            i = _mask_arith(script, out, i, spans)
            continue
        elif c == "(" and script.startswith("((", i) and (i == 0 or script[i - 1] in _WORD_START):
            end = _match_close(script, i + 2, "(", ")")
            if end > 0 and script.startswith(")", end + 1):  # `(( 10#$x > y ))`, `for ((`
                if spans is not None:
                    spans.append((i, end + 2))
                for k in range(i + 2, end):
                    if script[k] not in ";\n":
                        out[k] = "_" * len(script[k].encode("utf-8", "surrogatepass"))
                i = end + 2
                continue
        i += 1
    return "".join(out)


_WORD_START = frozenset(" \t\n;&|()<>")
#: ``[]...]``, ``[!]...]``, ``[^]...]``: the first ``]`` is a member, not the end
_BRACKET_WITH_CLOSE = re.compile(r"\[[!^]?\]")
_HEREDOC_DELIM = re.compile(r"[ \t]*((?:[^\s;&|<>()'\"\\]|'[^']*'|\"[^\"]*\"|\\.)+)")


def _mask_arith(script: str, out: list[str], i: int, spans: list[tuple[int, int]] | None) -> int:
    """``$((...))`` (or ``$( (...) )``, a subshell) at ``i``: blank its inside."""
    end = _match_close(script, i + 3, "(", ")")
    if end > 0 and script.startswith(")", end + 1):
        _blank(out, script, i + 3, end, spans)
        return end + 2
    end = _match_close(script, i + 2, "(", ")")  # `$( (...); ...)`: a subshell
    if end > 0:
        _blank(out, script, i + 2, end, spans)
        return end + 1
    return i + 1


#: the last word of a compound command that tree-sitter refuses a here-string on
_GROUP_ENDS = ("done", "esac", "]]")


def _ansi_end(script: str, i: int) -> int:
    """The offset after the ``'`` that closes a ``$'...'`` string whose body starts at i."""
    n = len(script)
    while i < n and script[i] != "'":
        i += 2 if script[i] == "\\" else 1
    return i + 1


def _bracket_end(script: str, i: int) -> int:
    """The ``]`` that closes the bracket expression at ``i`` (-1 if none in this word)."""
    j = i + 1
    if script[j] in "!^":
        j += 1
    j += 1  # the leading `]` is a member
    while j < len(script) and script[j] not in _WORD_START:
        if script.startswith("[:", j) or script.startswith("[=", j) or script.startswith("[.", j):
            close = script.find(script[j + 1] + "]", j + 2)
            if close < 0:
                return -1
            j = close + 2
            continue
        if script[j] == "]":
            return j
        j += 1
    return -1


def _after_group(script: str, i: int) -> bool:
    """Is the ``<<<`` at ``i`` on a brace group, a subshell, a ``for``/``select`` loop, a
    ``case`` or a ``[[ ]]`` (after ``}``, ``)``, ``done``, ``esac`` or ``]]``)?"""
    j = i - 1
    while j >= 0 and script[j] in " \t":
        j -= 1
    if j >= 0 and script[j] in "})" and (j == 0 or script[j - 1] != "$"):
        return True
    for word in _GROUP_ENDS:
        start = j + 1 - len(word)
        if script.startswith(word, start) and (start == 0 or script[start - 1] in _WORD_START):
            return True
    return False


def _heredoc_start(script: str, i: int, pending: list[tuple[str, bool]]) -> int:
    """After ``<<``: note the delimiter (quotes removed) whose body starts at the next
    line; returns the offset after it."""
    strip = script.startswith("-", i)
    if strip:
        i += 1
    m = _HEREDOC_DELIM.match(script, i)
    if m is None:
        return i
    word = re.sub(r"\\(.)|['\"]", lambda x: x.group(1) or "", m.group(1))
    pending.append((word, strip))
    return m.end()


def _space_after_delimiter(script: str, out: list[str], i: int) -> None:
    """``cat <<EOF&& echo``: tree-sitter reads the delimiter as ``EOF&&``. The operator
    after it moves one place right, over the blank that follows it (``<<EOF &&echo``);
    a ``;`` that ends the line is blanked."""
    j = i
    while j < len(script) and script[j] in ";&|":
        j += 1
    if j == i or j >= len(script):
        return
    if script[j] in " \t" and script[i] != ";":
        out[i] = " "
        out[i + 1 : j + 1] = script[i:j]
    elif script[j] == "\n" and script[i:j] == ";":
        out[i] = " "


def _command_after_delimiter(script: str, i: int) -> tuple[str, int, int] | None:
    """The operator and the (start, end) of the commands after it on a here-document's
    line, for ``;`` (``<<EOF; echo done``) or an operator against the delimiter
    (``<<EOF|jq .``, ``<<EOF&&echo ok``): if any, whole on the line, and starting no
    here-document of their own."""
    k = i
    while k < len(script) and script[k] in " \t":
        k += 1
    op = next((o for o in _TAIL_OPERATORS if script.startswith(o, k)), None)
    if op is None or script.startswith((";;", "|&"), k) or (op != ";" and k != i):
        return None
    nl = script.find("\n", k)
    end = len(script) if nl < 0 else nl
    tail = script[k + len(op) : end]
    body = tail.rstrip(" \t")
    if not body.strip() or "<<" in tail or body.endswith(("|", "&&", "\\")):
        return None
    return op, k + len(op), end


#: the operators after a here-document's delimiter whose tail the converter parses
_TAIL_OPERATORS = ("&&", "||", ";", "|")


def _redirects_before_pipe(script: str, i: int) -> list[tuple[int, int]]:
    """The (start, end) of each redirection from ``i`` on when a pipe follows them on
    the same line (``<<EOF 2>&1 >/dev/null | wc``), else none."""
    found: list[tuple[int, int]] = []
    n = len(script)
    while True:
        k = i
        while k < n and script[k] in " \t":
            k += 1
        op = REDIRECT_OP.match(script, k)
        if op is None:
            break
        end = _scan_word(script, op.end())
        if end == op.end():
            return []
        found.append((k, end))
        i = end
    if found and script.startswith("|", k) and not script.startswith("||", k):
        return found
    return []


def _skip_heredoc_bodies(
    script: str, i: int, pending: list[tuple[str, bool]], out: list[str] | None = None
) -> int:
    """From the start of the line after a here-document operator: past every pending
    body and its delimiter line. With ``out``, a body line that only starts with the
    delimiter (``END_NOT`` in the body of ``<<END``), which tree-sitter takes for the
    end, has its first character masked."""
    n = len(script)
    for word, strip in pending:
        while i < n:
            nl = script.find("\n", i)
            end = n if nl < 0 else nl
            line = script[i:end]
            text = line.lstrip("\t") if strip else line
            if out is not None and word and text != word and text.startswith(word):
                first = i + len(line) - len(text)
                size = len(script[first].encode("utf-8", "surrogatepass"))
                out[first] = ("x" if script[first] == "_" else "_") * size
            i = end + 1
            if text == word:
                break
    pending.clear()
    return min(i, n)


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
    """The quote char and offset of a quote that is never closed (comments and
    here-document bodies skipped)."""
    i, n = 0, len(src)
    heredocs: list[tuple[str, bool]] = []
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "#" and (i == 0 or src[i - 1] in _WORD_START):
            nl = src.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if c == "\n" and heredocs:
            i = _skip_heredoc_bodies(src, i + 1, heredocs)
            continue
        if src.startswith("<<<", i):
            i += 3
            continue
        if src.startswith("<<", i):
            i = _heredoc_start(src, i + 2, heredocs)
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
