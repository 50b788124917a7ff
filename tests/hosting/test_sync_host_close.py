"""`SyncSupervisor` closed: final, and nothing of it left in this process (threads, fds,
processes).

A module of its own: these tests count what the whole process holds, so no other
supervisor may live beside them. `test_sync_host`'s module-wide supervisor did: after a
call killed at its deadline it closed the dead worker's fds and started a replacement
while a count here was taken (21 fds fewer after than before).
"""

from __future__ import annotations

import pytest
from hosting_helpers import EXAMPLES, host_threads, survivors
from proc_helpers import fd_table, fds_opened

from supervisor import SupervisorError
from supervisor.hosting import SyncSupervisor


def test_close_is_final_and_leaves_nothing() -> None:
    fds, threads = fd_table(), host_threads()
    sup = SyncSupervisor(adapters=[EXAMPLES], ping_interval=None).open()
    handle = sup.start("sleep", "30")
    sup.close()
    assert handle.outcome(timeout=5).status == "cancelled"
    sup.close()  # idempotent
    with pytest.raises(SupervisorError):
        sup.invoke("text.upper", "x")
    assert not sup.running and host_threads() == threads and not survivors(sup.supervisor)
    assert not fds_opened(fds)


def test_a_supervisor_that_cannot_start_raises_and_leaves_no_thread() -> None:
    threads = host_threads()
    with (
        pytest.raises(Exception, match="not installed"),
        SyncSupervisor(adapters=["no_such_module_xyz:registry"]),
    ):
        pass
    assert host_threads() == threads
