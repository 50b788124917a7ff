"""Shell variables: scalars, indexed and associative arrays, attributes, dynamic scope.

All variables live in one dict, so a lookup is a single dict access however deep the
function calls go. ``local`` saves the shadowed entry in the current call frame and the
frame restores it on return (bash's dynamic scoping falls out of this). Subshells work on
a shallow copy of the dict; a ``Var`` created by an outer shell is copied before it is
changed in place (copy-on-write by generation), so nothing leaks back out.

Differential cases: ``cases_variables.txt``, ``cases_arrays.txt``,
``cases_functions.txt``, ``cases_fidelity.txt``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from functools import lru_cache
from itertools import count
from typing import Any

from ..budget import spend
from ..case_map import lower, upper
from ..errors import ShellError, unbound
from ..integers import wrap
from .arithmetic import ArithEnv, ArithError, string_to_int

READONLY = 1
EXPORT = 2
INTEGER = 4
LOWER = 8
UPPER = 16
ARRAY = 32
ASSOC = 64
NAMEREF = 128
_CASE = LOWER | UPPER
_IN_PLACE_BLOCKERS = READONLY | INTEGER | LOWER | UPPER | ARRAY | ASSOC | NAMEREF

_generations = count(1)

Value = str | dict[Any, str] | None  # dict: int keys (indexed) or str keys (assoc)


class Var:
    """One variable. ``value`` is a str (scalar), a dict (array), or None (declared but
    unset, e.g. ``local x``). ``num`` caches the integer of the string ``numsrc``; it is
    valid only while ``numsrc is value`` (any new value invalidates it by identity)."""

    __slots__ = ("attrs", "gen", "num", "numsrc", "value")

    def __init__(self, value: Value, attrs: int, gen: int) -> None:
        self.value = value
        self.attrs = attrs
        self.gen = gen
        self.num = 0
        self.numsrc: str | None = None

    def copy(self, gen: int) -> Var:
        v = self.value
        return Var(dict(v) if type(v) is dict else v, self.attrs, gen)


def sorted_items(d: dict[int, str]) -> list[tuple[int, str]]:
    """Items of an indexed array in index order (O(n) when already ordered)."""
    return sorted(d.items())


@lru_cache(maxsize=8192)
def _bash_hash(key: str) -> int:
    """bash's ``hash_string`` (FNV-1, 32 bits, over the bytes as signed chars)."""
    h = 2166136261
    for b in key.encode("utf-8", "surrogateescape"):
        h = (h * 16777619) & 0xFFFFFFFF
        h ^= b if b < 128 else b | 0xFFFFFF00
    return h


def bash_order(keys: list[str]) -> list[str]:
    """An associative array's keys in the order bash lists them, from the insertion order
    (a dict's): bash's hash table has 1024 buckets, grows 4x when it holds 2 entries per
    bucket, puts a new entry at the head of its bucket and walks the buckets in order."""
    n = len(keys)
    if n < 2:
        return keys
    if n <= 2048:  # no growth yet
        return [keys[i] for i in sorted(range(n), key=lambda i: (_bash_hash(keys[i]) & 1023, -i))]
    size = 1024
    table: dict[int, list[str]] = {}  # bucket -> entries, the head last
    for entries, key in enumerate(keys):
        if entries >= size * 2:
            size *= 4
            old, table = table, {}
            for bucket in sorted(old):
                for item in reversed(old[bucket]):
                    table.setdefault(_bash_hash(item) & (size - 1), []).append(item)
        table.setdefault(_bash_hash(key) & (size - 1), []).append(key)
    return [key for bucket in sorted(table) for key in reversed(table[bucket])]


def assoc_items(d: dict[str, str]) -> list[tuple[str, str]]:
    """An associative array's items in bash's order (``bash_order``)."""
    return [(k, d[k]) for k in bash_order(list(d))]


class Variables(ArithEnv):
    """The variable half of the shell state (mixed into the interpreter)."""

    vars: dict[str, Var]
    frames: list[dict[str, Var | None]]
    gen: int
    positional: list[str]
    arith_depth: int
    funcnames: list[str]
    call_lines: list[int]
    start_time: float
    start_epoch: float
    random_state: int
    random_last: int

    def init_variables(self) -> None:
        self.vars = {}
        self.frames = []
        self.gen = next(_generations)
        self.positional = []
        self.funcnames = []
        self.call_lines = []  # the line each function on ``funcnames`` was called from
        self.arith_depth = 0
        self.start_time = time.monotonic()
        self.start_epoch = time.time()
        self.random_state = 12345
        self.random_last = 0

    # ----------------------------------------------------------------- reading

    def get(self, name: str) -> str | None:
        """The scalar value of ``$name`` (element 0 of an array), None when unset."""
        v = self.vars.get(name)
        if v is None:
            dyn = _DYNAMIC.get(name)
            return dyn(self) if dyn is not None else None
        val = v.value
        if type(val) is str:
            if v.attrs & NAMEREF and val != name:
                return self.get(val)
            return val
        if val is None:
            return None
        assert isinstance(val, dict)
        return val.get("0" if v.attrs & ASSOC else 0)

    def lookup(self, name: str) -> Var | None:
        v = self.vars.get(name)
        if v is None:
            stack = _CALL_STACK.get(name)
            return None if stack is None else Var(stack(self), ARRAY, self.gen)
        if v.attrs & NAMEREF and type(v.value) is str:
            return self.vars.get(v.value)
        return v

    def is_assoc(self, name: str) -> bool:
        v = self.lookup(name)
        return v is not None and bool(v.attrs & ASSOC)

    def is_array(self, name: str) -> bool:
        v = self.lookup(name)
        return v is not None and type(v.value) is dict

    def get_item(self, name: str, key: int | str) -> str | None:
        v = self.lookup(name)
        if v is None:
            return None
        val = v.value
        if type(val) is dict:
            if type(key) is int and key < 0 and not v.attrs & ASSOC:
                if not val:
                    return None
                key = max(val) + 1 + key
            return val.get(key)
        if key == 0 or key == "0":
            return val  # type: ignore[return-value]
        return None

    def values(self, name: str) -> list[str]:
        """``${name[@]}``: every element in order; a scalar is a one-element list."""
        v = self.lookup(name)
        if v is None:
            return []
        val = v.value
        if type(val) is dict:
            if v.attrs & ASSOC:
                return [x for _, x in assoc_items(val)]
            return [x for _, x in sorted_items(val)]
        return [] if val is None else [val]  # type: ignore[list-item]

    def keys(self, name: str) -> list[str]:
        v = self.lookup(name)
        if v is None:
            return []
        val = v.value
        if type(val) is dict:
            if v.attrs & ASSOC:
                return bash_order(list(val))
            return [str(k) for k in sorted(val)]
        return [] if val is None else ["0"]

    # ----------------------------------------------------------------- writing

    def target(self, name: str) -> str:
        """The variable a name stands for: itself, or what a nameref chain points to."""
        for _ in range(8):
            v = self.vars.get(name)
            if v is None or not v.attrs & NAMEREF or type(v.value) is not str:
                return name
            if v.value == name or not v.value:
                return name
            name = v.value
        return name

    def _writable(self, name: str) -> Var | None:
        """The Var to change in place (copied first if an outer shell owns it)."""
        v = self.vars.get(name)
        if v is None:
            return None
        if v.attrs & READONLY:
            raise ShellError(f"{name}: readonly variable")
        if v.gen != self.gen:
            v = v.copy(self.gen)
            self.vars[name] = v
        return v

    def _convert(self, v: Var, value: str) -> str:
        attrs = v.attrs
        if attrs & INTEGER:
            value = str(self.arith_text(value))
        if attrs & _CASE:
            value = lower(value) if attrs & LOWER else upper(value)
        return value

    def assign(self, name: str, value: str, append: bool = False) -> None:
        """``name=value`` / ``name+=value`` (element 0 of an array)."""
        if len(value) > 65_536:
            spend(len(value) >> 12)  # a big value: the memory check comes in time
        v = self.vars.get(name)
        if v is not None and v.gen == self.gen and not v.attrs & _IN_PLACE_BLOCKERS:
            if append and type(v.value) is str:
                v.value += value
            else:
                v.value = value
            return
        name = self.target(name)
        v = self._writable(name)
        if v is None:
            if name in _SPECIAL_ASSIGN:
                _SPECIAL_ASSIGN[name](self, value)
                return
            self.vars[name] = Var(value, 0, self.gen)
            return
        if v.attrs & INTEGER and append:
            old = self.get(name) or "0"
            value = str(wrap(self.arith_text(old) + self.arith_text(value)))
            append = False
        value = self._convert(v, value)
        val = v.value
        if type(val) is dict:
            key: int | str = "0" if v.attrs & ASSOC else 0
            if append:
                value = val.get(key, "") + value
            val[key] = value
        elif append and val is not None:
            v.value = val + value  # type: ignore[operator]
        else:
            v.value = value

    def assign_item(self, name: str, key: int | str, value: str, append: bool = False) -> None:
        if len(value) > 65_536:
            spend(len(value) >> 12)
        name = self.target(name)
        v = self._writable(name)
        if v is None:
            v = Var({}, ARRAY if type(key) is int else ASSOC, self.gen)
            self.vars[name] = v
        val = v.value
        if not isinstance(val, dict):
            if v.attrs & ASSOC:
                val = {}
            else:
                val = {} if val is None else {0: val}
                v.attrs |= ARRAY
            v.value = val
        if v.attrs & ASSOC:
            key = str(key)
        elif not isinstance(key, int):
            key = self.arith_text(key)
        if type(key) is int and key < 0:
            if not val:
                raise ShellError(f"{name}[{key}]: bad array subscript")
            key = max(val) + 1 + key
            if key < 0:  # type: ignore[operator]
                raise ShellError(f"{name}[{key}]: bad array subscript")
        if v.attrs & INTEGER and append:
            value = str(wrap(self.arith_text(val.get(key, "0")) + self.arith_text(value)))
            append = False
        value = self._convert(v, value)
        if append:
            value = val.get(key, "") + value
        val[key] = value

    def assign_array(
        self, name: str, items: list[tuple[str | None, str, bool]], append: bool = False
    ) -> None:
        """``name=(...)``: items are (key or None, value, item-append)."""
        name = self.target(name)
        v = self._writable(name)
        if v is None:
            v = Var({}, ARRAY, self.gen)
            self.vars[name] = v
        assoc = bool(v.attrs & ASSOC)
        old = v.value
        if append and type(old) is dict:
            new: dict = old  # type: ignore[type-arg]
        elif append and type(old) is str:
            new = {0: old}
        else:
            new = {}
        if not assoc:
            v.attrs |= ARRAY
        v.value = new
        nxt = (max(new) + 1 if new else 0) if not assoc else 0
        for key, value, item_append in items:
            if len(value) > 65_536:
                spend(len(value) >> 12)
            if assoc:
                if key is None:
                    raise ShellError(
                        f"{name}: {value}: must use subscript when assigning associative array"
                    )
                if not key:
                    self.error(f"[{key}]={value}: bad array subscript")  # bash skips it
                    continue
                value = self._convert(v, value)
                new[key] = new.get(key, "") + value if item_append else value
                continue
            if key is not None:
                idx = self.arith_text(key)
                if idx < 0:
                    idx = (max(new) + 1 if new else 0) + idx
                nxt = idx
            value = self._convert(v, value)
            new[nxt] = new.get(nxt, "") + value if item_append else value
            nxt += 1

    def unset(self, name: str) -> None:
        """``unset name``, with bash's dynamic scope: a local of the running function
        becomes unset (still local); a local of a calling function is removed, which
        uncovers the value it shadowed (the global, or an outer caller's local)."""
        v = self.vars.get(name)
        if v is None:
            return
        if v.attrs & READONLY:
            raise ShellError(f"{name}: cannot unset: readonly variable")
        frames = self.frames
        if frames and name not in frames[-1]:
            for frame in reversed(frames):
                if name in frame:
                    shadowed = frame.pop(name)
                    if shadowed is None:
                        del self.vars[name]
                    else:
                        self.vars[name] = shadowed
                    return
        del self.vars[name]

    def unset_item(self, name: str, key: int | str) -> None:
        name = self.target(name)
        v = self._writable(name)
        if v is None:
            return
        val = v.value
        if type(val) is dict:
            if type(key) is int and key < 0 and val:
                key = max(val) + 1 + key
            val.pop(key, None)
        elif key in (0, "0"):
            del self.vars[name]

    def declare_var(self, name: str, add: int, remove: int = 0, local: bool = False) -> Var:
        """Create or change attributes (declare/local/typeset/export/readonly)."""
        if local and self.frames:
            frame = self.frames[-1]
            if name not in frame:
                frame[name] = self.vars.get(name)
                self.vars[name] = Var(None, 0, self.gen)
        v = self.vars.get(name)
        if v is None:
            v = Var({} if add & (ARRAY | ASSOC) else None, 0, self.gen)
            self.vars[name] = v
        elif v.gen != self.gen:
            v = v.copy(self.gen)
            self.vars[name] = v
        old = v.value
        if add & (ASSOC | ARRAY) and not isinstance(old, dict):
            v.value = {} if old is None else {"0" if add & ASSOC else 0: old}
        v.numsrc = None
        if add & LOWER:
            remove |= UPPER
        if add & UPPER:
            remove |= LOWER
        v.attrs = (v.attrs | add) & ~remove
        return v

    def set_global(self, name: str, value: str) -> None:
        """``declare -g name=value`` from inside a function."""
        for frame in self.frames:
            if name in frame:
                old = frame[name]
                frame[name] = Var(value, old.attrs if old else 0, self.gen)
                return
        self.assign(name, value)

    def exported(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, v in self.vars.items():
            if v.attrs & EXPORT and type(v.value) is str:
                out[name] = v.value
        return out

    # ------------------------------------------------------------------ frames

    def push_frame(self) -> None:
        self.frames.append({})

    def pop_frame(self) -> None:
        frame = self.frames.pop()
        vars_ = self.vars
        for name, old in frame.items():
            if old is None:
                vars_.pop(name, None)
            else:
                vars_[name] = old

    # ------------------------------------------------------------- arithmetic

    def arith_text(self, text: str) -> int:
        """Evaluate text as an arithmetic expression (used for ``declare -i`` etc.)."""
        self.arith_depth += 1
        try:
            if self.arith_depth > 64:
                raise ArithError("expression recursion level exceeded", text)
            return string_to_int(text, self)
        finally:
            self.arith_depth -= 1

    def arith_get(self, name: str) -> int:
        v = self.vars.get(name)
        if v is not None:
            val = v.value
            if type(val) is str:
                if (
                    val.isdigit()
                    and val.isascii()
                    and (val[0] != "0" or len(val) == 1)
                    and len(val) < 19
                    and not v.attrs & NAMEREF
                ):
                    n = int(val)
                    v.num = n
                    v.numsrc = val
                    return n
            elif val is None:
                return 0
        s = self.get(name)
        if s is None:
            if self.nounset_check(name):
                raise unbound(name)
            return 0
        return self.arith_text(s)

    def arith_set(self, name: str, value: int) -> int:
        v = self.vars.get(name)
        text = str(value)
        if v is not None and v.gen == self.gen and not v.attrs & _IN_PLACE_BLOCKERS:
            v.value = text
            v.num = value
            v.numsrc = text
        else:
            self.assign(name, text)
        return value

    def arith_get_item(self, name: str, key: str, index: Callable[[ArithEnv], int]) -> int:
        s = self.get_item(name, key if self.is_assoc(name) else index(self))
        return 0 if s is None else self.arith_text(s)

    def arith_set_item(
        self, name: str, key: str, index: Callable[[ArithEnv], int], value: int
    ) -> int:
        if self.is_assoc(name):
            self.assign_item(name, key, str(value))
        else:
            self.assign_item(name, index(self), str(value))
        return value

    def nounset_check(self, name: str) -> bool:
        """Overridden by the interpreter: True when ``set -u`` is on."""
        return False

    def error(self, message: str) -> None:
        """Overridden by the interpreter: report on stderr."""


def _random(sh: Variables) -> str:
    """bash 5.2's ``$RANDOM``: the Park-Miller minimal standard generator, its two halves
    folded to 15 bits, never the same value twice in a row, so ``RANDOM=n`` gives bash's
    sequence (unseeded, bash starts from the time and its pid; we from a fixed seed)."""
    while True:
        seed = sh.random_state or 123459876
        hi, lo = divmod(seed, 127773)
        t = 16807 * lo - 2836 * hi
        sh.random_state = t + 0x7FFFFFFF if t < 0 else t
        value = ((sh.random_state >> 16) ^ (sh.random_state & 0xFFFF)) & 0x7FFF
        if value != sh.random_last:
            sh.random_last = value
            return str(value)


def _seed_random(sh: Variables, value: str) -> None:
    """``RANDOM=n``: bash's ``strtoul(n) & 0xffffffff`` (junk reads as 0)."""
    m = re.match(r"\s*([-+]?)(\d+)", value)
    number = 0 if m is None else int(m.group(2)) * (-1 if m.group(1) == "-" else 1)
    sh.random_state = number & 0xFFFFFFFF
    sh.random_last = 0


def _seconds(sh: Variables) -> str:
    return str(int(time.monotonic() - sh.start_time))


def _epoch(sh: Variables) -> str:
    return str(int(time.time()))


def _epoch_real(sh: Variables) -> str:
    return f"{time.time():.6f}"


def _funcname(sh: Variables) -> str | None:
    return sh.funcnames[-1] if sh.funcnames else None


# The call stack as a script file sees it (the script is the file ``bash``, the top
# level is ``main``): innermost call first.
_CALL_STACK: dict[str, Callable[[Variables], dict[Any, str]]] = {
    "FUNCNAME": lambda sh: (
        dict(enumerate([*reversed(sh.funcnames), "main"])) if sh.funcnames else {}
    ),
    "BASH_SOURCE": lambda sh: dict.fromkeys(range(len(sh.funcnames) + 1), "bash"),
    "BASH_LINENO": lambda sh: dict(enumerate([*map(str, reversed(sh.call_lines)), "0"])),
}


_DYNAMIC: dict[str, Callable[[Variables], str | None]] = {
    "FUNCNAME": _funcname,
    "BASH_SOURCE": lambda sh: "bash",
    "BASH_LINENO": lambda sh: str(sh.call_lines[-1]) if sh.call_lines else "0",
    "RANDOM": _random,
    "SECONDS": _seconds,
    "EPOCHSECONDS": _epoch,
    "EPOCHREALTIME": _epoch_real,
    "SRANDOM": lambda sh: _random(sh) + _random(sh),
}
_SPECIAL_ASSIGN: dict[str, Callable[[Variables, str], None]] = {"RANDOM": _seed_random}
