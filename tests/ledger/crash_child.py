"""A host process for the crash tests: it drives a durable ledger and is SIGKILLed.

``python crash_child.py JOURNAL SCENARIO``. Every line it prints is a JSON object, flushed
only after the transitions it reports have returned (so, by the ledger's contract, are
durable). Then it blocks until it is killed.

- ``in_flight``: operations in every state, then ``{"ready": ...}`` and sleep.
- ``batch``: a committed operation, then a batch that never commits: ``{"in_batch": ...}``.
- ``churn``: transitions as fast as it can, reporting each claim as it returns.
"""

from __future__ import annotations

import json
import sys
import time

from supervisor.ledger import Ledger, ReconcileStatus, RetryClass, StreamPolicy, ToolPolicy

TOOL = ToolPolicy(
    "text.remote", max_calls=1_000_000, max_attempts=3, deadline=60.0, stream=StreamPolicy()
)


def say(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def in_flight(ledger: Ledger) -> None:
    ops = {
        name: ledger.start("text.remote", f"input of {name}")
        for name in ("queued", "claimed", "retried", "cancel_requested", "completed")
    }
    for name, op in ops.items():
        if name != "queued":
            ledger.claim(op)
    ledger.push_chunk(ops["retried"], "progress")
    ledger.retry(ops["retried"], RetryClass.TRANSIENT)
    ledger.request_cancellation(ops["cancel_requested"])
    ledger.complete(ops["completed"], "finished before the crash")
    keys = {
        name: ledger.status(op).idempotency_key for name, op in ops.items() if name != "completed"
    }
    say(ready=ops, keys=keys)


def batch(ledger: Ledger) -> None:
    committed = ledger.start("text.remote", "committed")
    with ledger.batch():
        lost = [ledger.start("text.remote", "never committed") for _ in range(5)]
        ledger.claim(committed)
        say(in_batch={"committed": committed, "lost": lost})
        time.sleep(3600)


def churn(ledger: Ledger) -> None:
    n = 0
    while True:
        n += 1
        ledger.start("text.remote", f"op {n}")
        inv = ledger.claim_next()  # after a restart: perhaps one an earlier host queued
        assert inv is not None
        op = inv.id
        say(claimed=op)
        if n % 4 == 0:
            ledger.retry(op, RetryClass.RATE_LIMITED)
        if n % 3 == 0:
            ledger.request_cancellation(op)
            ledger.confirm_cancellation(op)
        elif n % 5 == 0:
            ledger.mark_indeterminate(op, "worker died")
        elif n % 7 == 0:
            ledger.reconcile(op, ReconcileStatus.running())
        else:
            ledger.complete(op, f"result {n}")
        if n == 20:
            say(running=True)


def main() -> None:
    path, scenario = sys.argv[1], sys.argv[2]
    ledger = Ledger(path=path, max_pending=1_000_000)
    ledger.register_external_tool(TOOL)
    {"in_flight": in_flight, "batch": batch, "churn": churn}[scenario](ledger)
    time.sleep(3600)


if __name__ == "__main__":
    main()
