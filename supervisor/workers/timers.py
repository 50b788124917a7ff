"""Every timed step of every call on one clock, sans-IO: the wait for a slot, the deadline,
the cancel grace, the retry back-off.

One task per supervisor sleeps until `Timers.next_at` and hands what is due to each call
(`Timed.on_timer`), instead of a cancel scope per call. An entry is a promise to look at
the call then, not a command: the call decides from its own state and the time whether
anything is due (an entry made stale by the call moving on costs one look, or nothing
once it is dropped). Calls that end before their deadline leave their entries behind;
they are skipped when they come up and dropped in bulk when they outnumber the live ones.
"""

from __future__ import annotations

import heapq
import math
from typing import Protocol


class Timed(Protocol):
    """What a timer entry wakes: it checks for itself whether something is due."""

    #: The instant of its live entry (None: none); entries for other instants are stale.
    timer_at: float | None

    def on_timer(self, now: float) -> None: ...


class Timers:
    """A heap of ``(instant, order, call)``; `due` pops what has come."""

    __slots__ = ("_count", "_heap", "live")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timed]] = []
        self._count = 0
        #: Entries that are still some call's ``timer_at`` (an estimate: for compaction).
        self.live = 0

    def at(self, when: float, call: Timed) -> bool:
        """Look at ``call`` at ``when`` (replacing its earlier entry). True if ``when`` is
        now the earliest entry: the clock's task must wake sooner than it planned."""
        if call.timer_at == when:
            return False
        if call.timer_at is None:
            self.live += 1
        call.timer_at = when
        heap = self._heap
        self._count += 1
        heapq.heappush(heap, (when, self._count, call))
        if len(heap) > 2 * self.live + 64:
            self._compact()
        return heap[0][2] is call

    def cancel(self, call: Timed) -> None:
        """Forget ``call``'s entry (it ended)."""
        if call.timer_at is not None:
            call.timer_at = None
            self.live -= 1

    def next_at(self) -> float:
        """The earliest live entry's instant (stale ones at the top are dropped)."""
        heap = self._heap
        while heap:
            when, _, call = heap[0]
            if call.timer_at == when:
                return when
            heapq.heappop(heap)
        return math.inf

    def due(self, now: float) -> list[Timed]:
        """Pop every live entry at or before ``now``: the calls to look at, in order."""
        heap = self._heap
        calls: list[Timed] = []
        while heap and heap[0][0] <= now:
            when, _, call = heapq.heappop(heap)
            if call.timer_at == when:
                call.timer_at = None
                self.live -= 1
                calls.append(call)
        return calls

    def __len__(self) -> int:
        return len(self._heap)

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if entry[2].timer_at == entry[0]]
        heapq.heapify(self._heap)
        self.live = len(self._heap)
