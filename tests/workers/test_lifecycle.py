"""The call lifecycle's table (sans-IO): every legal happening leads where the table says,
every other one is refused, every state is reachable and every state can end."""

from __future__ import annotations

from typing import get_args

import pytest

from supervisor.workers.lifecycle import (
    CANCEL,
    CANCELLING,
    DISPATCHED,
    QUEUED,
    RESOLVED,
    RETRY_WAIT,
    TRANSITIONS,
    CallLifecycle,
    CallState,
    CallStateError,
    Happening,
)

NEEDS_SANDBOX = False

STATES: tuple[CallState, ...] = get_args(CallState)
HAPPENINGS: tuple[Happening, ...] = get_args(Happening)


def at(state: CallState, deadline: float | None = None) -> CallLifecycle:
    call = CallLifecycle(deadline)
    call.state = state
    return call


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("happening", HAPPENINGS)
def test_each_happening_is_legal_exactly_where_the_table_says(
    state: CallState, happening: Happening
) -> None:
    call = at(state)
    allowed = TRANSITIONS[state]
    if happening in allowed:
        assert call.happen(happening) == allowed[happening] == call.state
    else:
        with pytest.raises(CallStateError, match=f"{happening} cannot happen to a {state} call"):
            call.happen(happening)
        assert call.state == state  # a refused happening changes nothing


def test_the_table_names_only_known_states_and_happenings() -> None:
    assert set(TRANSITIONS) == set(STATES)
    for moves in TRANSITIONS.values():
        assert set(moves) <= set(HAPPENINGS)
        assert set(moves.values()) <= set(STATES)
    used = {h for moves in TRANSITIONS.values() for h in moves}
    assert used == set(HAPPENINGS)  # no happening the owner could never use


def test_every_state_is_reachable_and_every_state_can_resolve() -> None:
    reached: set[CallState] = {QUEUED}
    frontier: list[CallState] = [QUEUED]
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()].values():
            if nxt not in reached:
                reached.add(nxt)
                frontier.append(nxt)
    assert reached == set(STATES)
    for state in STATES:  # a cancel always leads to an end (directly or via the grace)
        assert TRANSITIONS[state][CANCEL] in (RESOLVED, CANCELLING)
    assert all(v == RESOLVED for v in TRANSITIONS[CANCELLING].values() if v != CANCELLING)


def test_resolved_is_final() -> None:
    assert TRANSITIONS[RESOLVED] == {CANCEL: RESOLVED}
    call = at(RESOLVED)
    assert call.resolved and not call.in_flight
    assert call.happen(CANCEL) == RESOLVED


def test_a_retry_queues_again_and_only_a_dispatched_call_is_in_flight() -> None:
    call = at(DISPATCHED)
    assert call.in_flight
    assert call.happen("retryable") == RETRY_WAIT and not call.in_flight
    assert call.happen("retry") == QUEUED and not call.in_flight
    assert call.happen("slot") == DISPATCHED
    assert call.happen("deadline") == CANCELLING and call.in_flight


def test_the_lifecycle_carries_the_watchdog_rules() -> None:
    call = CallLifecycle(10.0)
    assert call.judge("result", 9.0) == "accept" and call.judge("result", 10.0) == "late"
    call.begin_cancel("host_cancel", 9.0, 0.02)
    assert call.judge("acknowledged", 9.01) == "cancelled"
    with pytest.raises(ValueError):
        CallLifecycle(float("nan"))
