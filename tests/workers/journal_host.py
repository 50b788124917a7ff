"""A real host for the restart test: a durable ledger and a journaled worker, three calls
in flight, then it waits for the test to SIGSTOP and SIGKILL it.

``python journal_host.py LEDGER JOURNAL EFFECTS``: it starts ``ship.gated`` (key
``order-a``: its effect, then its answer once ``EFFECTS/go`` exists), ``ship.hang``
(``order-b``: its effect, then never an end) and ``wait`` (``order-c``: not effectful,
never ends), prints one JSON line ``{"a": op_id, "b": ..., "c": ...}`` once all three
effects happened, and sleeps.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "adapters"))

from journal_rig import CALLS, journaled  # noqa: E402


async def main(ledger: str, journal: str, effects: str) -> None:
    calls = [tool for tool, _, _ in CALLS.values()]
    async with journaled(
        Path(effects), ledger_path=ledger, journal_dir=journal, max_in_flight=len(calls)
    ) as sup:
        ops = {}
        for name, (tool, value, key) in CALLS.items():
            handle = await sup.start(tool, value, idempotency_key=key)
            ops[name] = handle.op_id
        with trio.fail_after(30):
            while not all(
                os.path.exists(os.path.join(effects, f"{t}.log")) for t, _, _ in CALLS.values()
            ):
                await trio.sleep(0.01)
        print(json.dumps(ops), flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:4])
