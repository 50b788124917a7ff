"""Print functions back as bash does for ``declare -f`` and ``type`` (4-space indents,
``;`` after every command but the last of a group, ``elif`` as nested ``if``)."""

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
    t = type(n)
    ind = _IND * depth
    if t is A.SimpleCommand:
        return _simple(n)  # type: ignore[arg-type]
    if t is A.DeclCommand:
        args = [a.text for a in n.args]  # type: ignore[union-attr]
        return " ".join([n.builtin, *args])  # type: ignore[union-attr]
    if t is A.Pipeline:
        text = " | ".join(_cmd(c, depth) for c in n.cmds)  # type: ignore[union-attr]
        return ("! " + text) if n.negate else text  # type: ignore[union-attr]
    if t is A.AndOr:
        text = _cmd(n.first, depth)  # type: ignore[union-attr]
        for op, c in n.rest:  # type: ignore[union-attr]
            text += f" {op} {_cmd(c, depth)}"
        return text
    if t is A.Background:
        return _cmd(n.body, depth) + " &"  # type: ignore[union-attr]
    if t is A.Group:
        return "{ \n" + _block(n.body, depth + 1) + "\n" + ind + "}"  # type: ignore[union-attr]
    if t is A.Subshell:
        inner = "; ".join(_cmd(c, depth) for c in n.body.body)  # type: ignore[union-attr]
        return f"( {inner} )"
    if t is A.If:
        return _if(n, depth)  # type: ignore[arg-type]
    if t is A.While:
        kw = "until" if n.until else "while"  # type: ignore[union-attr]
        cond = "; ".join(_cmd(c, depth) for c in n.cond.body)  # type: ignore[union-attr]
        body = _block_semi(n.body, depth + 1)  # type: ignore[union-attr]
        return f"{kw} {cond}; do\n{body}\n{ind}done"
    if t is A.For:
        words = "" if n.words is None else " in " + " ".join(_word(w) for w in n.words)  # type: ignore[union-attr]
        body = _block_semi(n.body, depth + 1)  # type: ignore[union-attr]
        return f"for {n.var}{words};\n{ind}do\n{body}\n{ind}done"  # type: ignore[union-attr]
    if t is A.ArithFor:
        pieces = [w.text if w is not None else "" for w in (n.init, n.cond, n.update)]  # type: ignore[union-attr]
        body = _block_semi(n.body, depth + 1)  # type: ignore[union-attr]
        return f"for (({'; '.join(p.strip() for p in pieces)}))\n{ind}do\n{body}\n{ind}done"
    if t is A.Case:
        lines = [f"case {_word(n.word)} in "]  # type: ignore[union-attr]
        for item in n.items:  # type: ignore[union-attr]
            pats = " | ".join(_word(p) for p in item.patterns)
            lines.append(f"{ind}{_IND}{pats})")
            if item.body.body:
                lines.append(_block(item.body, depth + 2))
            lines.append(f"{ind}{_IND}{item.terminator}")
        lines.append(f"{ind}esac")
        return "\n".join(lines)
    if t is A.ArithCmd:
        return f"(( {n.expr.text.strip()} ))"  # type: ignore[union-attr]
    if t is A.CondCmd:
        return f"[[ {_cond(n.expr)} ]]"  # type: ignore[union-attr]
    if t is A.FunctionDef:
        return format_function(n).replace("\n", "\n" + ind)  # type: ignore[arg-type]
    if t is A.Redirected:
        return _cmd(n.body, depth) + " " + _redirs(n.redirs)  # type: ignore[union-attr]
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
    t = type(e)
    if t is A.CondWord:
        return _word(e.word)  # type: ignore[union-attr]
    if t is A.CondNot:
        return "! " + _cond(e.expr)  # type: ignore[union-attr]
    if t is A.CondAnd:
        return f"{_cond(e.left)} && {_cond(e.right)}"  # type: ignore[union-attr]
    if t is A.CondOr:
        return f"{_cond(e.left)} || {_cond(e.right)}"  # type: ignore[union-attr]
    if t is A.CondUnary:
        return f"{e.op} {_word(e.operand)}"  # type: ignore[union-attr]
    return f"{_word(e.left)} {e.op} {_word(e.right)}"  # type: ignore[union-attr]
