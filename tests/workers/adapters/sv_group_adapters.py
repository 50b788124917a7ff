"""Adapters for the tool-group tests: what a group's sandbox lets its tools see and do.

Two registries, ``a`` and ``b`` (tools ``a.*`` and ``b.*``: a tool has one group), the
same code: ``probe`` reports variables, files, a write and URLs (after a ``sleep``, if
asked); ``leak`` prints a variable's value everywhere it can (a chunk, its result, and
an error message when its idempotency key ends in ``error`` or its input in `` fail``).
``mask_digits`` is a stream redactor for the config file (``MODULE:ATTR``).
"""

from __future__ import annotations

import errno
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any

from worker_runtime import AdapterError, AdapterRegistry, Context


def _probe(request: dict[str, Any], ctx: Context) -> dict[str, Any]:
    report: dict[str, Any] = {"env": {}, "files": {}, "urls": {}}
    time.sleep(request.get("sleep", 0))
    for name in request.get("env", []):
        report["env"][name] = os.environ.get(name)
    for path in request.get("files", []):
        try:
            with open(path) as f:
                report["files"][path] = f.read()
        except OSError as exc:
            report["files"][path] = errno.errorcode.get(exc.errno or 0, str(exc))
    if "write" in request:
        try:
            with open(request["write"], "w") as f:
                f.write("persisted")
            report["write"] = "ok"
        except OSError as exc:
            report["write"] = errno.errorcode.get(exc.errno or 0, str(exc))
    urls = request.get("urls", [])
    for url in [urls] if isinstance(urls, str) else urls:  # a script's flag: one string
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                report["urls"][url] = len(response.read())
        except urllib.error.HTTPError as exc:
            report["urls"][url] = [exc.code, exc.headers.get("X-Sandvisor-Refused")]
        except OSError as exc:
            report["urls"][url] = str(exc)
    return report


def _leak(text: str, ctx: Context) -> str:
    name, _, mode = text.strip().partition(" ")
    value = os.environ.get(name, "")
    ctx.emit(f"chunk holds {value}!")
    if ctx.idempotency_key.endswith("error") or mode == "fail":
        raise AdapterError(f"failed, and the message holds {value}")
    return f"result holds {value} and {{'{value}': 1}}"


def mask_digits(text: str) -> str:
    """A stream redactor: every digit becomes ``#``."""
    return re.sub(r"[0-9]", "#", text)


def _registry(prefix: str) -> AdapterRegistry:
    registry = AdapterRegistry()
    registry.adapter(f"{prefix}.probe", format="json")(_probe)
    registry.adapter(f"{prefix}.leak")(_leak)
    return registry


a = _registry("a")
b = _registry("b")
