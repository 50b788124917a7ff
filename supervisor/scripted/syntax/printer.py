"""Print functions back as bash does for ``declare -f`` and ``type`` (4-space indents,
``;`` after every command but the last of a group, ``elif`` as nested ``if``).

Differential cases: ``cases_functions.txt``, ``cases_builtins.txt``.
"""

from __future__ import annotations

from . import ast as A

_IND = "    "


def format_function(fn: A.FunctionDef) -> str:
    body = fn.body
    redirs = ""
    if type(body) is A.Redirected:
        redirs = " " + _redirs(body.redirs)
        body = body.body
    if type(body) is A.Group:
        inner = _block(body.body, 1)
        return f"{fn.name} () \n{{ \n{inner}\n}}{redirs}"
    return f"{fn.name} () \n{{ \n{_IND}{_cmd(body, 1)}\n}}{redirs}"


def _block(seq: A.Sequence, depth: int) -> str:
    lines = [_IND * depth + _cmd(n, depth) for n in seq.body]
    out: list[str] = []
    for i, line in enumerate(lines):
        node = seq.body[i]
        last = i == len(lines) - 1
        if last or type(node) is A.Background:
            out.append(line)
        else:
            out.append(line + ";")
    return "\n".join(out)


def _word(w: A.ArgWord) -> str:
    return w.text


def _redirs(redirs: tuple[A.Redir, ...]) -> str:
    parts: list[str] = []
    for r in redirs:
        fd = "" if r.fd is None else str(r.fd)
        if r.op in ("<<", "<<-"):
            parts.append(f"{fd}{r.op} EOF")
        elif r.op in (">&", "<&"):
            parts.append(f"{fd}{r.op}{r.target.text}")
        else:
            parts.append(f"{fd}{r.op} {r.target.text}")
    return " ".join(parts)


def _simple(c: A.SimpleCommand) -> str:
    parts = [a.text for a in c.assigns] + [_word(w) for w in c.words]
    text = " ".join(parts)
    if c.redirs:
        text += " " + _redirs(c.redirs)
    return text


def _cmd(n: A.Node, depth: int) -> str:
    ind = _IND * depth
    if isinstance(n, A.SimpleCommand):
        return _simple(n)
    if isinstance(n, A.DeclCommand):
        return " ".join([n.builtin, *(a.text for a in n.args)])
    if isinstance(n, A.Pipeline):
        text = " | ".join(_cmd(c, depth) for c in n.cmds)
        return ("! " + text) if n.negate else text
    if isinstance(n, A.AndOr):
        text = _cmd(n.first, depth)
        for op, c in n.rest:
            text += f" {op} {_cmd(c, depth)}"
        return text
    if isinstance(n, A.Background):
        return _cmd(n.body, depth) + " &"
    if isinstance(n, A.Group):
        return "{ \n" + _block(n.body, depth + 1) + "\n" + ind + "}"
    if isinstance(n, A.Subshell):
        inner = "; ".join(_cmd(c, depth) for c in n.body.body)
        return f"( {inner} )"
    if isinstance(n, A.If):
        return _if(n, depth)
    if isinstance(n, A.While):
        kw = "until" if n.until else "while"
        cond = "; ".join(_cmd(c, depth) for c in n.cond.body)
        return f"{kw} {cond}; do\n{_block_semi(n.body, depth + 1)}\n{ind}done"
    if isinstance(n, A.For):
        words = "" if n.words is None else " in " + " ".join(_word(w) for w in n.words)
        body = _block_semi(n.body, depth + 1)
        return f"for {n.var}{words};\n{ind}do\n{body}\n{ind}done"
    if isinstance(n, A.ArithFor):
        pieces = [w.text.strip() if w is not None else "" for w in (n.init, n.cond, n.update)]
        body = _block_semi(n.body, depth + 1)
        return f"for (({'; '.join(pieces)}))\n{ind}do\n{body}\n{ind}done"
    if isinstance(n, A.Case):
        lines = [f"case {_word(n.word)} in "]
        for item in n.items:
            pats = " | ".join(_word(p) for p in item.patterns)
            lines.append(f"{ind}{_IND}{pats})")
            if item.body.body:
                lines.append(_block(item.body, depth + 2))
            lines.append(f"{ind}{_IND}{item.terminator}")
        lines.append(f"{ind}esac")
        return "\n".join(lines)
    if isinstance(n, A.ArithCmd):
        return f"(( {n.expr.text.strip()} ))"
    if isinstance(n, A.CondCmd):
        return f"[[ {_cond(n.expr)} ]]"
    if isinstance(n, A.FunctionDef):
        return format_function(n).replace("\n", "\n" + ind)
    if isinstance(n, A.Redirected):
        return _cmd(n.body, depth) + " " + _redirs(n.redirs)
    return ""


def _block_semi(seq: A.Sequence, depth: int) -> str:
    """Loop/if bodies: every command ends with ``;``."""
    return "\n".join(
        _IND * depth + _cmd(c, depth) + ("" if type(c) is A.Background else ";") for c in seq.body
    )


def _if(n: A.If, depth: int) -> str:
    ind = _IND * depth
    cond_seq, body = n.clauses[0]
    cond = "; ".join(_cmd(c, depth) for c in cond_seq.body)
    text = f"if {cond}; then\n{_block_semi(body, depth + 1)}\n"
    if len(n.clauses) > 1:
        rest = A.If(n.clauses[1:], n.orelse, n.line)
        text += f"{ind}else\n{_IND * (depth + 1)}{_if(rest, depth + 1)};\n"
    elif n.orelse is not None:
        text += f"{ind}else\n{_block_semi(n.orelse, depth + 1)}\n"
    return text + f"{ind}fi"


def _cond(e: A.CondExpr) -> str:
    if isinstance(e, A.CondWord):
        return _word(e.word)
    if isinstance(e, A.CondNot):
        return "! " + _cond(e.expr)
    if isinstance(e, A.CondAnd):
        return f"{_cond(e.left)} && {_cond(e.right)}"
    if isinstance(e, A.CondOr):
        return f"{_cond(e.left)} || {_cond(e.right)}"
    if isinstance(e, A.CondUnary):
        return f"{e.op} {_word(e.operand)}"
    return f"{_word(e.left)} {e.op} {_word(e.right)}"
