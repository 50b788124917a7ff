"""Run a Python program in a sandbox that sees only the modules it was given.

The sandbox gets the interpreter's own prefix (read-only, at its own path: under
``/root/.pyenv`` here, and nothing else of ``/root``) with that prefix's site-packages
masked, and a synthetic ``/opt/sandvisor/lib`` on ``PYTHONPATH`` holding exactly the
top-level packages (or module files) asked for: for a worker ``worker_runtime``,
``msgspec`` and each adapter module's top-level package. Not the project checkout, not the
venv's other packages, not the supervisor. Modules are located with
``importlib.util.find_spec`` on their top-level name, which imports nothing; the
submodule path is then checked on disk.

The interpreter runs with ``-S`` (no site: no site-packages, no .pth files, faster start)
and ``-P`` (no script or working directory on ``sys.path``), and never writes bytecode.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import replace

from .command import Command
from .errors import PolicyError
from .policy import Bind

#: Where the selected packages appear inside the sandbox (the only PYTHONPATH entry).
SITE = "/opt/sandvisor/lib"

#: Modules every worker needs besides its adapters.
WORKER_MODULES = ("worker_runtime", "msgspec")


def interpreter() -> tuple[str, str]:
    """(executable, prefix) of the base interpreter running us (a venv's is resolved)."""
    executable = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if not executable.startswith(prefix + "/"):
        raise PolicyError(f"interpreter {executable} is not inside its prefix {prefix}")
    return executable, prefix


def _stdlib_dirs(prefix: str) -> tuple[str, ...]:
    paths = sysconfig.get_paths("posix_prefix", vars={"base": prefix, "platbase": prefix})
    return tuple(os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib"))


def _site_packages(prefix: str) -> list[str]:
    paths = sysconfig.get_paths("posix_prefix", vars={"base": prefix, "platbase": prefix})
    found = {os.path.realpath(paths[k]) for k in ("purelib", "platlib")}
    return sorted(p for p in found if os.path.isdir(p) and p.startswith(prefix + "/"))


def _within(path: str, parents: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in parents)


def module_bind(name: str, prefix: str) -> Bind | None:
    """The bind that makes module ``name`` importable in the sandbox; None if the
    interpreter's prefix already provides it (stdlib, built-in)."""
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise PolicyError(f"{name!r} is not a module name")
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise PolicyError(f"module {top} is not installed (looked for {name})")
    locations = list(spec.submodule_search_locations or [])
    if len(locations) > 1:
        raise PolicyError(f"namespace package {top} spans several directories: {locations}")
    if spec.origin in ("built-in", "frozen") and not locations:
        return None
    source = os.path.realpath(locations[0] if locations else str(spec.origin))
    if _within(source, _stdlib_dirs(prefix)):
        return None
    if rest:
        if not locations:
            raise PolicyError(f"{top} is a module, not a package, so {name} cannot exist")
        base = os.path.join(source, *rest)
        if not (
            os.path.isfile(base + ".py")
            or os.path.isfile(os.path.join(base, "__init__.py"))
            or os.path.isdir(base)
        ):
            raise PolicyError(f"module {name} not found under {source}")
    dest = os.path.join(SITE, top if locations else os.path.basename(source))
    return Bind(source, dest)


def python_command(
    module: str,
    args: Sequence[str] = (),
    *,
    modules: Sequence[str] = (),
) -> Command:
    """``python -m module args`` in a sandbox that sees only ``modules`` (and ``module``)."""
    executable, prefix = interpreter()
    binds: dict[str, Bind] = {}
    for name in (module, *modules):
        bind = module_bind(name, prefix)
        if bind is not None:
            binds[bind.dest] = bind
    prefix_binds = [] if _within(prefix, ("/usr",)) else [Bind(prefix)]
    masks = tuple(_site_packages(prefix)) if prefix_binds else ()
    return Command(
        argv=(executable, "-S", "-P", "-m", module, *args),
        binds=(*prefix_binds, *binds.values()),
        env={"PYTHONPATH": SITE, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"},
        masks=masks,
    )


def worker_command(adapters: Sequence[str], *, modules: Sequence[str] = ()) -> Command:
    """``python -m worker_runtime --adapters MOD:ATTR ...``: protocol on fds 3 and 4.

    Binds ``worker_runtime``, ``msgspec``, each adapter's top-level package and
    ``modules``. Map the host's pipe ends with ``prepare_launch(..., fds={3: r, 4: w})``.
    """
    if not adapters:
        raise PolicyError("a worker needs at least one --adapters MODULE:ATTR")
    args: list[str] = []
    adapter_modules = []
    for spec in adapters:
        module, colon, attr = spec.partition(":")
        if not colon or not module or not attr.isidentifier():
            raise PolicyError(f"adapter {spec!r} is not MODULE:ATTR")
        adapter_modules.append(module)
        args += ["--adapters", spec]
    command = python_command(
        "worker_runtime", args, modules=(*WORKER_MODULES, *adapter_modules, *modules)
    )
    return replace(command, forwards_network=True)  # it starts its network forwarder
