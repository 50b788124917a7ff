"""Which function parameters are arrays: a call passes the caller's array by reference
(creating it if need be), so the compiler must know before it runs anything."""

from __future__ import annotations

from typing import Any

from .parser import Program


def array_params(program: Program) -> dict[str, set[int]]:
    """For each function, the parameters it uses as arrays (a fixed point over calls),
    so that a call can hand the caller's array, created if need be, by reference."""
    result: dict[str, set[int]] = {name: set() for name in program.functions}
    changed = True
    while changed:
        changed = False
        for name, fn in program.functions.items():
            found = set(result[name])
            _scan_arrays(fn.body, fn.params, found, result, program)
            if found != result[name]:
                result[name] = found
                changed = True
    return result


def _scan_arrays(
    node: Any, params: list[str], found: set[int], known: dict[str, set[int]], program: Program
) -> None:
    if not isinstance(node, tuple) or not node:
        if isinstance(node, list):
            for item in node:
                _scan_arrays(item, params, found, known, program)
        return
    tag = node[0]
    names: list[str] = []
    if tag == "index" or tag == "delete":
        names.append(node[1])
    elif tag == "forin" or tag == "in":
        names.append(node[2])
    elif tag == "builtin":
        args = node[2]
        arg_index = {"split": 1, "match": 2, "asort": 0, "asorti": 0, "patsplit": 1}.get(node[1])
        if arg_index is not None and len(args) > arg_index and args[arg_index][0] == "var":
            names.append(args[arg_index][1])
        if node[1] in ("asort", "asorti") and len(args) > 1 and args[1][0] == "var":
            names.append(args[1][1])
    elif tag == "call" and node[1] in known:
        for i, arg in enumerate(node[2]):
            if arg[0] == "var" and i in known[node[1]]:
                names.append(arg[1])
    for name in names:
        if name in params:
            found.add(params.index(name))
    for item in node[1:]:
        if isinstance(item, tuple | list):
            _scan_arrays(item, params, found, known, program)
