"""Set-up for the cluster's tests: a real local Ray (``ray.init`` once per module, 2 CPUs,
no dashboard, usage stats off) and real sandboxed workers on its node.

Where Ray is not installed they skip, saying so (CI installs the ``ray`` extra, so there
they run). A module that starts a Ray says ``pytestmark = RAY_GROUP``: its tests all run on
one xdist worker (``--dist loadgroup``), one local Ray at a time on the machine. The mark
must be the module's own: xdist reads the groups before a conftest's
``pytest_collection_modifyitems`` could add them (pytest-xdist#1241), and pytest 9.2
loses them (pytest-xdist#1386: pyproject keeps pytest below it). Modules that need
neither Ray nor a sandbox say ``NEEDS_RAY = False`` and ``NEEDS_SANDBOX = False``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from sandbox_gate import mark_sandboxed, skip_without_sandbox  # noqa: E402

RAY_MISSING = importlib.util.find_spec("ray") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_sandboxed(items, HERE)


def _needs_ray(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "module", None), "NEEDS_RAY", True))


@pytest.fixture(autouse=True)
def _needs_ray_and_sandbox(request: pytest.FixtureRequest) -> None:
    if RAY_MISSING and _needs_ray(request.node):
        pytest.skip("needs Ray, which is not installed: pip install 'sandvisor[ray]'")
    skip_without_sandbox(request)
