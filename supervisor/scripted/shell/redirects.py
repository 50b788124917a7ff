"""Redirections in a logic-only shell: ``/dev/null``, descriptor duplication (``2>&1``,
``>&2``), here-documents, here-strings and ``< <(cmd)``. Any other file is refused with
``<target>: filesystem redirection disabled`` (status 1; the command does not run).

Differential cases: ``cases_heredoc.txt``, ``cases_basics.txt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..syntax import ast as A
from .io import NULL, InputStream

if TYPE_CHECKING:
    from .interpreter import Interpreter

_DEV_NULL = "/dev/null"


async def apply_redirects(sh: Interpreter, redirs: tuple[A.Redir, ...]) -> bool:
    """Point out/err/stdin as the redirections say; False (reported) on refusal."""
    for r in redirs:
        op = r.op
        if op in ("<<", "<<-"):
            sh.stdin = InputStream(await sh.expand_string(r.target))
            continue
        if op == "<<<":
            sh.stdin = InputStream(await sh.expand_string(r.target) + "\n")
            continue
        if op == "<" and r.fd in (None, 0):
            program = _input_procsub(r.target)
            if program is not None:  # `< <(cmd)`: cmd's output is the input
                sh.stdin = InputStream(await sh.capture_output(program))
                continue
        target = await sh.expand_string(r.target)
        fd = r.fd
        if op in (">&", "<&"):
            if target == "-":
                _set_fd(sh, fd if fd is not None else (1 if op == ">&" else 0))
                continue
            if target.isdigit():
                src = int(target)
                dest = fd if fd is not None else (1 if op == ">&" else 0)
                if src not in (0, 1, 2) or dest not in (0, 1, 2):
                    sh.error(f"{target if src not in (0, 1, 2) else dest}: Bad file descriptor")
                    return False
                if dest == 1:
                    sh.out = sh.out if src == 1 else sh.err
                elif dest == 2:
                    sh.err = sh.out if src == 1 else sh.err
                continue
            if op == ">&" and fd is None:
                op = "&>"
            else:
                sh.error(f"{target}: ambiguous redirect")
                return False
        if target != _DEV_NULL:
            sh.error(f"{target}: filesystem redirection disabled")
            return False
        if fd is not None and fd not in (0, 1, 2):
            continue  # e.g. 3>/dev/null: harmless
        if op in ("&>", "&>>"):
            sh.out = NULL
            sh.err = NULL
        elif op in ("<", "<>"):
            if fd in (None, 0):
                sh.stdin = InputStream("")
            else:
                _set_fd(sh, fd)
        else:
            _set_fd(sh, 1 if fd is None else fd)
    return True


def _input_procsub(target: A.Word) -> A.Program | None:
    """The program of a target that is exactly ``<(...)``."""
    if len(target.parts) == 1:
        part = target.parts[0]
        if type(part) is A.ProcSub and part.text.startswith("<(") and part.program:
            return part.program
    return None


def _set_fd(sh: Interpreter, fd: int) -> None:
    if fd == 1:
        sh.out = NULL
    elif fd == 2:
        sh.err = NULL
    elif fd == 0:
        sh.stdin = InputStream("")
