"""A real host process for the host-death test: it starts sandboxes, says which, and waits.

Two sandboxes come from a `Spawner` thread and one from the main thread; the test
SIGKILLs this process and checks that every sandbox dies with it.
"""

from __future__ import annotations

import json
import sys
import time

from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import Spawner, spawn


def main() -> None:
    policy = SandboxPolicy()
    command = Command(("/bin/sh", "-c", "sleep 1000 & sleep 1000 & sleep 1000"))
    spawner = Spawner().start()
    sandboxes = [spawner.spawn(prepare_launch(policy, command)) for _ in range(2)]
    sandboxes.append(spawn(prepare_launch(policy, command)))
    report = [{"uid": s.uid, "cgroups": s.cgroup.paths if s.cgroup else []} for s in sandboxes]
    print(json.dumps(report), flush=True)
    time.sleep(1000)


if __name__ == "__main__":
    sys.exit(main())
