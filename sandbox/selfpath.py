"""How to run this very sandvisor from a shell, by absolute path, for the fix lines that
tell a user to run it with ``sudo``: root's PATH has no user's virtual environment (and
``sudo`` resets PATH), so a bare ``sudo sandvisor ...`` would not be found when pasted.
"""

from __future__ import annotations

import os
import shlex
import sys

#: The console script's name (``[project.scripts]``).
SCRIPT = "sandvisor"


def sandvisor_command() -> str:
    """The running ``sandvisor`` script's absolute path; else the one installed beside this
    interpreter (a library host's venv); else ``PYTHON -m supervisor`` by this interpreter's
    absolute path. Quoted for a shell."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    for candidate in (argv0, os.path.join(os.path.dirname(sys.executable), SCRIPT)):
        if os.path.basename(candidate) == SCRIPT and _runnable(candidate):
            return shlex.quote(os.path.abspath(candidate))
    return f"{shlex.quote(os.path.abspath(sys.executable))} -m supervisor"


def sudo_sandvisor(args: str) -> str:
    """``sudo /abs/path/sandvisor ARGS``: a line that works when pasted."""
    return f"sudo {sandvisor_command()} {args}"


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
