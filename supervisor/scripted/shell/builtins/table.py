"""The shell builtins of the logic-only shell, gathered in one table.

The table is built here, from the modules that define the builtins, and handed to each
execution (``execution.run_script`` -> ``ExecContext``): the interpreter itself knows no
builtin by name, so nothing is filled in as a side effect of importing it.

Differential cases: ``cases_builtins.txt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from .core import CORE_BUILTINS
from .printf import printf
from .test import builtin_bracket, builtin_test
from .variables import VARS_BUILTINS
from .xargs import xargs

if TYPE_CHECKING:
    from ..interpreter import Builtin

#: every shell builtin by name (read-only)
BUILTINS: Mapping[str, Builtin] = MappingProxyType(
    {
        **CORE_BUILTINS,
        **VARS_BUILTINS,
        "printf": printf,
        "test": builtin_test,
        "[": builtin_bracket,
        "xargs": xargs,
    }
)
