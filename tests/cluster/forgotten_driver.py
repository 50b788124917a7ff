"""A Ray driver that forgets its `RaySupervisor` (run by test_ray_supervisor.py).

``python forgotten_driver.py RAY_ADDRESS``: connects to the test's Ray, starts a
RaySupervisor and a call, prints one JSON line (the actor's pid, the processes under it,
its cgroup prefix), and exits without ``aclose``."""

from __future__ import annotations

import asyncio
import json
import sys

import psutil
import ray

from sandbox.cgroups import host_start_time
from supervisor.cluster import RaySupervisor


async def main() -> None:
    sup = RaySupervisor(
        adapters=["worker_runtime.examples:registry"], ping_interval=None, durable=False,
        name="forgotten",
    )  # fmt: skip
    await sup.__aenter__()
    pid = sup.nodes[0].pid
    await sup.start("sleep", "30")
    await asyncio.sleep(0.5)
    started = [p.pid for p in psutil.Process(pid).children(recursive=True)]
    prefix = f"sv-{pid}-{host_start_time(pid)}-"
    print(json.dumps({"actor": pid, "started": started, "prefix": prefix}), flush=True)


if __name__ == "__main__":
    ray.init(address=sys.argv[1], log_to_driver=False)
    asyncio.run(main())
