"""The rootless runs' user: made once per test process (each xdist worker has its own),
removed with everything of it when the session ends, whatever happened meanwhile.

Tests ask ``rootless_user(setup)`` for the user with the cgroups of ``setup`` (``v1``,
``v2`` or ``none``); the set-up a machine cannot give skips, saying why. Users of earlier
sessions that died without cleaning up are swept first. Everything else is
`tests.rootless_env`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from rootless_env import (
    RootlessSetupError,
    RootlessUser,
    Setup,
    hybrid_unavailable,
    sweep_stale,
    v1_unavailable,
    v2_unavailable,
)


@pytest.fixture(scope="session")
def _rootless_session() -> Iterator[list[RootlessUser]]:
    made: list[RootlessUser] = []
    if os.geteuid() == 0:
        sweep_stale()
    yield made
    for user in made:  # the finaliser: runs whatever the tests did
        user.destroy()


@pytest.fixture
def rootless_user(
    _rootless_session: list[RootlessUser],
) -> Iterator[Callable[[Setup], RootlessUser]]:
    """``rootless_user(setup)``: this session's user, given the cgroups of ``setup``."""
    used: list[RootlessUser] = []

    def get(setup: Setup) -> RootlessUser:
        why = {"v1": v1_unavailable, "v2": v2_unavailable, "hybrid": hybrid_unavailable}.get(
            setup, lambda: ""
        )()
        if why:
            pytest.skip(f"no {setup} set-up on this machine: {why}")
        if not _rootless_session:
            try:
                _rootless_session.append(RootlessUser.create())
            except RootlessSetupError as exc:
                pytest.fail(f"cannot make the rootless user: {exc}")
        user = _rootless_session[0]
        if user.setup != setup:
            user.undelegate()
            user.delegate(setup)
        used.append(user)
        return user

    yield get
    for user in used:  # nothing of a run outlives it (the next run starts clean)
        user.kill_all()
