#!/usr/bin/env python3
"""The text tools on their own: each command called in-process (as the interpreter does)
against the same command run by the real GNU tool, gawk or the jq 1.6 binary (process
start included, as a shell pays it), in one run; only the ratios mean something.

Three groups of rows:

* one small call of each tool (the cost a script pays per command in a loop);
* the same tools over 5,000 and 100,000 lines (throughput; a spawned tool wins here);
* jq's per-call path: a repeated filter (compiled once) and ``--arg`` values that change
  every call (still compiled once: the arguments travel with the input).

Run: ``.venv/bin/python scripts/bench_text_tools.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from supervisor.scripted.text_tools import TEXT_COMMANDS

ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
JSON_LINE = '{"id": 7, "name": "widget", "tags": ["a", "b"], "price": 9.5}\n'


def lines(n: int) -> str:
    return "".join(f"{i} item{i} {i * 1.5}\n" for i in range(1, n + 1))


SMALL = lines(20)
MEDIUM = lines(5_000)
LARGE = lines(100_000)

CALLS: list[tuple[str, list[str], str]] = [
    ("jq -r .name", ["jq", "-r", ".name"], JSON_LINE),
    ("jq -c select", ["jq", "-c", "select(.price > 5) | {id, tags}"], JSON_LINE),
    ("grep", ["grep", "item1"], SMALL),
    ("grep -E -o", ["grep", "-oE", "[0-9]+\\.5"], SMALL),
    ("sed s///g", ["sed", "s/item/x/g"], SMALL),
    ("awk sum", ["awk", "{ s += $3 } END { print s }"], SMALL),
    ("sort -k2", ["sort", "-k2"], SMALL),
    ("sort -n | uniq", ["sort", "-n"], SMALL),
    ("uniq -c", ["uniq", "-c"], SMALL),
    ("cut -d' ' -f2", ["cut", "-d", " ", "-f2"], SMALL),
    ("tr a-z A-Z", ["tr", "a-z", "A-Z"], SMALL),
    ("wc -l", ["wc", "-l"], SMALL),
    ("head -n 3", ["head", "-n", "3"], SMALL),
    ("seq 100", ["seq", "100"], ""),
    ("expr 1 + 2", ["expr", "1", "+", "2"], ""),
]

BULK: list[tuple[str, list[str]]] = [
    ("grep", ["grep", "7"]),
    ("sed", ["sed", "s/item/x/"]),
    ("awk sum", ["awk", "{ s += $1 } END { print s }"]),
    ("awk print $2", ["awk", "{ print $2 }"]),
    ("sort -n -r", ["sort", "-n", "-r"]),
    ("cut -f2", ["cut", "-d", " ", "-f2"]),
    ("tr", ["tr", "0-9", "a-j"]),
    ("jq -R -s length", ["jq", "-R", "-s", "length"]),
]


def median(run: Callable[[], object], rounds: int) -> float:
    run()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def ours(argv: list[str], stdin: str) -> Callable[[], object]:
    command = TEXT_COMMANDS[argv[0]]
    return lambda: command(argv[1:], stdin)


def theirs(argv: list[str], stdin: str) -> Callable[[], object] | None:
    if shutil.which(argv[0], path=ENV["PATH"]) is None:
        return None
    data = stdin.encode()
    return lambda: subprocess.run(argv, input=data, capture_output=True, env=ENV, check=False)


def row(label: str, a: float, b: float | None) -> None:
    if b is None:
        print(f"{label:<28}{a:10.3f}{'-':>10}{'-':>9}")
    else:
        print(f"{label:<28}{a:10.3f}{b:10.3f}{a / b:9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    rounds = args.rounds

    print(f"{'one call (ms, median)':<28}{'sandvisor':>10}{'GNU/jq':>10}{'ratio':>9}")
    for label, argv, stdin in CALLS:
        real = theirs(argv, stdin)
        row(label, median(ours(argv, stdin), rounds), median(real, rounds) if real else None)

    for size, text in (("5k lines", MEDIUM), ("100k lines", LARGE)):
        print(f"\n{size + ' (ms, median)':<28}{'sandvisor':>10}{'GNU/jq':>10}{'ratio':>9}")
        few = max(3, rounds // 3)
        for label, argv in BULK:
            real = theirs(argv, text)
            row(label, median(ours(argv, text), few), median(real, few) if real else None)

    print(f"\n{'jq per call (us, median)':<28}{'sandvisor':>10}")
    jq = TEXT_COMMANDS["jq"]
    repeated = median(lambda: jq(["-r", ".id"], JSON_LINE), rounds * 50) * 1000
    counter = iter(range(10**9))
    varying = median(
        lambda: jq(["--arg", "id", str(next(counter)), "-r", ".id == ($id | tonumber)"], JSON_LINE),
        rounds * 50,
    ) * 1000  # fmt: skip
    print(f"{'same filter':<28}{repeated:10.1f}")
    print(f"{'--arg changing each call':<28}{varying:10.1f}")


if __name__ == "__main__":
    main()
