"""What the "nothing left" checks count as a live process (a module of its own name: test
directories share one import namespace)."""

from __future__ import annotations

from collections.abc import Iterable

#: the kernel's flag of a task in do_exit (include/linux/sched.h)
PF_EXITING = 0x4


def dying(pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, or exiting: past the point where it runs any code
    of its own. A pid namespace's init that was SIGKILLed with the rest leaves its cgroup
    and then stays listed, sleeping, while the kernel reaps the namespace's other
    processes: a loaded host showed a fork bomb's one 0.16 s after its supervisor closed
    (the cgroup already empty and removed)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return True
    fields = text[text.rindex(")") + 2 :].split()  # after the command's name
    state, flags = fields[0], int(fields[6])
    return state in "ZXx" or bool(flags & PF_EXITING)


def alive(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` that still run code of their own."""
    return [pid for pid in pids if not dying(pid)]
