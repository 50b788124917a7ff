"""An LRU cache bounded by bytes as well as entries, for the interpreter's compile caches.

``functools.lru_cache(maxsize=512)`` counts entries: 512 parsed 2 MB scripts, or 512
compiled 1 MB patterns, stay in the host after the scripts that made them ended (hundreds
of MB). `sized_cache` charges each entry the length of the text it was made from (the
first argument: a script, a pattern, an expression), which bounds what a compiled entry
holds within a small factor, and evicts the least recently used past ``max_bytes``; a
text larger than ``max_bytes // 8`` is not cached at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class SizedCache:
    """The store behind one decorated function (``cache_info``-like numbers for tests)."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.entries: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def put(self, key: Any, value: Any, size: int) -> None:
        with self.lock:
            if key in self.entries:
                return
            self.entries[key] = (value, size)
            self.bytes += size
            while self.entries and (
                self.bytes > self.max_bytes or len(self.entries) > self.max_entries
            ):
                _, (_, old) = self.entries.popitem(last=False)
                self.bytes -= old

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.bytes = 0


def sized_cache(max_entries: int, max_bytes: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Cache a function whose first argument is a ``str`` (see the module docstring)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        store = SizedCache(max_entries, max_bytes)
        largest = max_bytes // 8
        # A hit takes no lock: the OrderedDict's get and move_to_end are single C calls
        # (atomic under the GIL); an entry evicted between them is simply not moved. A
        # hit costs about 1 us instead of 2.4 with the lock (the compile caches are hit by
        # every command that has a pattern).
        find, renew = store.entries.get, store.entries.move_to_end

        @wraps(fn)
        def cached(*args: P.args, **kwargs: P.kwargs) -> R:
            size = len(args[0])  # type: ignore[arg-type]
            if size > largest:
                return fn(*args, **kwargs)
            key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
            found = find(key)
            if found is not None:
                try:  # noqa: SIM105 (cheaper than suppress on this hot path)
                    renew(key)
                except KeyError:
                    pass
                return found[0]  # type: ignore[no-any-return]
            result = fn(*args, **kwargs)
            store.put(key, result, size + 64)
            return result

        cached.cache = store  # type: ignore[attr-defined]
        cached.cache_clear = store.clear  # type: ignore[attr-defined]
        return cached

    return decorate
