"""The shell's options: ``set -o`` names and letters, ``shopt`` names, and reading and
changing them (``set``, ``shopt``, ``shopt -o``, ``[[ -o name ]]`` and ``$-`` share these
tables). ``set`` options are attributes of the interpreter; ``shopt`` options live in its
``shopts`` set (a name, or ``-name`` for a default-on option turned off).

Differential cases: ``cases_builtins.txt``, ``cases_fidelity.txt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .patterns import EXTGLOB, NOCASE

if TYPE_CHECKING:
    from .interpreter import Interpreter

SET_LETTERS = {
    "e": "opt_errexit",
    "E": "opt_errtrace",
    "u": "opt_nounset",
    "x": "opt_xtrace",
    "f": "opt_noglob",
    "C": "opt_noclobber",
    "a": "opt_allexport",
}
SET_NAMES = {
    "errexit": "opt_errexit",
    "errtrace": "opt_errtrace",
    "nounset": "opt_nounset",
    "xtrace": "opt_xtrace",
    "noglob": "opt_noglob",
    "noclobber": "opt_noclobber",
    "allexport": "opt_allexport",
    "pipefail": "opt_pipefail",
}
SET_LISTED = [
    "allexport",
    "braceexpand",
    "emacs",
    "errexit",
    "errtrace",
    "functrace",
    "hashall",
    "histexpand",
    "history",
    "ignoreeof",
    "interactive-comments",
    "keyword",
    "monitor",
    "noclobber",
    "noexec",
    "noglob",
    "nolog",
    "notify",
    "nounset",
    "onecmd",
    "physical",
    "pipefail",
    "posix",
    "privileged",
    "verbose",
    "vi",
    "xtrace",
]
SET_ON_BY_DEFAULT = frozenset({"braceexpand", "hashall", "interactive-comments"})


SHOPT_NAMES = [
    "autocd",
    "assoc_expand_once",
    "cdable_vars",
    "cdspell",
    "checkhash",
    "checkjobs",
    "checkwinsize",
    "cmdhist",
    "compat31",
    "compat32",
    "compat40",
    "compat41",
    "compat42",
    "compat43",
    "compat44",
    "complete_fullquote",
    "direxpand",
    "dirspell",
    "dotglob",
    "execfail",
    "expand_aliases",
    "extdebug",
    "extglob",
    "extquote",
    "failglob",
    "force_fignore",
    "globasciiranges",
    "globskipdots",
    "globstar",
    "gnu_errfmt",
    "histappend",
    "histreedit",
    "histverify",
    "hostcomplete",
    "huponexit",
    "inherit_errexit",
    "interactive_comments",
    "lastpipe",
    "lithist",
    "localvar_inherit",
    "localvar_unset",
    "login_shell",
    "mailwarn",
    "no_empty_cmd_completion",
    "nocaseglob",
    "nocasematch",
    "noexpand_translation",
    "nullglob",
    "patsub_replacement",
    "progcomp",
    "progcomp_alias",
    "promptvars",
    "restricted_shell",
    "shift_verbose",
    "sourcepath",
    "varredir_close",
    "xpg_echo",
]
SHOPT_DEFAULT_ON = frozenset(
    [
        "checkwinsize",
        "cmdhist",
        "complete_fullquote",
        "extquote",
        "force_fignore",
        "globasciiranges",
        "globskipdots",
        "hostcomplete",
        "interactive_comments",
        "patsub_replacement",
        "progcomp",
        "promptvars",
        "sourcepath",
    ]
)


def option_state(sh: object, name: str) -> bool:
    """Is ``set -o name`` on? (Options that are only listed keep their default.)"""
    attr = SET_NAMES.get(name)
    return bool(getattr(sh, attr)) if attr else name in SET_ON_BY_DEFAULT


def set_option(sh: Interpreter, name: str, on: bool) -> None:
    attr = SET_NAMES.get(name)
    if attr is not None:
        setattr(sh, attr, on)


def shopt_state(sh: Interpreter, name: str) -> bool:
    if name in SHOPT_DEFAULT_ON:
        return f"-{name}" not in sh.shopts
    return name in sh.shopts


def set_shopt(sh: Interpreter, name: str, on: bool) -> None:
    if on:
        sh.shopts.add(name)
        sh.shopts.discard(f"-{name}")
    else:
        sh.shopts.discard(name)
        sh.shopts.add(f"-{name}")
    sh.pattern_flags = (EXTGLOB if "extglob" in sh.shopts else 0) | (
        NOCASE if "nocasematch" in sh.shopts else 0
    )
