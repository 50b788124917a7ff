"""A host that stops its asyncio loop without closing its `AsyncioSupervisor` (run by
test_asyncio_host.py): it must still exit, and its sandboxes must die with it.

``python asyncio_exit_child.py stopped|thread``: the loop runs ``run_forever`` in the main
thread and is stopped, or runs in a non-daemon thread (as a Ray actor's loop does) that is
stopped and joined. Either way a call is still running and an earlier call's sandbox was
cleaned up from a thread of this loop. It prints one JSON line: its pid, the prefix of
its cgroups and the processes it started, then returns without ``aclose``."""

from __future__ import annotations

import asyncio
import json
import sys
import threading

import psutil

from sandbox.lifeline import host_prefix
from supervisor.hosting import AsyncioSupervisor

EXAMPLES = "worker_runtime.examples:registry"


async def start_and_leave(done: asyncio.Future[None]) -> None:
    sup = AsyncioSupervisor(adapters=[EXAMPLES], ping_interval=None, cancel_grace=0.05)
    await sup.__aenter__()
    out = await sup.invoke("stubborn.sleep", "30", deadline=0.3)  # killed: a cleanup ran
    assert out.status == "indeterminate", out
    asyncio.get_running_loop().create_task(sup.invoke("sleep", "30"))
    await asyncio.sleep(0.3)
    started = [p.pid for p in psutil.Process().children(recursive=True)]
    print(json.dumps({"pid": psutil.Process().pid, "prefix": host_prefix(), "started": started}))
    sys.stdout.flush()
    done.set_result(None)


def main(mode: str) -> None:
    loop = asyncio.new_event_loop()
    done = loop.create_future()
    task = loop.create_task(start_and_leave(done))
    done.add_done_callback(lambda _: loop.stop())
    if mode == "stopped":
        loop.run_forever()
    else:
        thread = threading.Thread(target=loop.run_forever, name="AsyncIO Thread")  # no daemon
        thread.start()
        thread.join()
    assert task.done()


if __name__ == "__main__":
    main(sys.argv[1])
