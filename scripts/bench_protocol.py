#!/usr/bin/env python3
"""Benchmark the wire protocol against baselines measured in the same run.

1. Seal + open of one frame carrying a 100-byte text payload, against the floor of
   ``hmac.new(key, body, sha256).digest()`` + ``msgspec.json.decode(body)`` of the same
   bytes. Targets: <= 6 us per frame and <= 4x the floor.
2. Worker start to ``ready`` over real pipes (bootstrap, open, ready), against
   ``python -c "import msgspec"`` started the same way. Target: <= 1.5x.

Run from a fresh checkout: ``.venv/bin/python scripts/bench_protocol.py [--quick]``.
Prints numbers and ratios; exits 1 if a target is missed (the machine may be noisy: the
ratios are what to read).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import select
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worker_runtime.protocol.bootstrap import encode_bootstrap
from worker_runtime.protocol.framing import LineReader, Opener, Sealer
from worker_runtime.protocol.host import HostConnection, WorkerReady
from worker_runtime.protocol.keys import derive_keys
from worker_runtime.protocol.messages import Result, TextPayload, WorkerMessage, grant

FRAME_TARGET_US = 6.0
FRAME_TARGET_RATIO = 4.0
START_TARGET_RATIO = 1.5


def bench_frames(repeat: int, number: int) -> tuple[float, float]:
    """Best per-frame microseconds of (seal + open, the hmac + decode floor)."""
    keys = derive_keys(os.urandom(32))
    sid = "sv-" + "0" * 32
    payload = TextPayload("x" * 100)
    sealer = Sealer(keys.worker, sid)
    opener: Opener[WorkerMessage] = Opener(keys.worker, sid, WorkerMessage)

    def seal_open() -> None:
        opener.open(sealer.seal(Result, rid="r1", payload=payload)[:-1])

    line = Sealer(keys.worker, sid).seal(Result, rid="r1", payload=payload)
    body = line[65:-1]
    key = keys.worker
    decode = msgspec.json.decode

    def floor() -> None:
        hmac.new(key, body, hashlib.sha256).digest()
        decode(body)

    ours, base = [], []
    for _ in range(repeat):  # interleaved, so both see the same machine
        ours.append(timeit.timeit(seal_open, number=number) / number)
        base.append(timeit.timeit(floor, number=number) / number)
    return min(ours) * 1e6, min(base) * 1e6


def _spawn(argv: list[str]) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start ``argv`` with a host->child pipe on fd 3 and a child->host pipe on fd 4."""
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()

    def map_fds() -> None:
        import fcntl

        a = fcntl.fcntl(child_in, fcntl.F_DUPFD_CLOEXEC, 10)
        b = fcntl.fcntl(child_out, fcntl.F_DUPFD_CLOEXEC, 10)
        os.dup2(a, 3)
        os.dup2(b, 4)

    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=False,
        preexec_fn=map_fds,
    )
    os.close(child_in)
    os.close(child_out)
    return proc, to_child, from_child


def start_worker_to_ready() -> float:
    """Seconds from spawn to an authenticated `ready`, as a host sees it."""
    key = os.urandom(32)
    sid = "sv-" + os.urandom(16).hex()
    host = HostConnection(sid, derive_keys(key), [grant("text.upper")])
    started = time.perf_counter()
    proc, to_child, from_child = _spawn(
        [sys.executable, "-m", "worker_runtime", "--adapters", "worker_runtime.examples:registry"]
    )
    os.write(to_child, encode_bootstrap(sid, key) + host.open())
    reader = LineReader()
    event = None
    while event is None:
        select.select([from_child], [], [], 10)
        data = os.read(from_child, 65536)
        if not data:
            raise RuntimeError("the worker exited before ready")
        reader.feed(data)
        while (line := reader.next_line()) is not None:
            event = host.receive(line)
    elapsed = time.perf_counter() - started
    assert isinstance(event, WorkerReady)
    os.write(to_child, host.close())
    proc.wait()
    os.close(to_child)
    os.close(from_child)
    return elapsed


def start_baseline() -> float:
    """Seconds for ``python -c "import msgspec"`` spawned the same way, to its exit."""
    started = time.perf_counter()
    proc, to_child, from_child = _spawn([sys.executable, "-c", "import msgspec"])
    proc.wait()
    elapsed = time.perf_counter() - started
    os.close(to_child)
    os.close(from_child)
    return elapsed


def bench_start(rounds: int) -> tuple[float, float]:
    """Median seconds of (worker to ready, baseline), interleaved to share the noise.

    The worker is byte-compiled first, as an installed package is (msgspec, the
    baseline, is): with PYTHONDONTWRITEBYTECODE set, nothing else would cache it.
    """
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "worker_runtime"), quiet=1)
    start_worker_to_ready()  # warm the page cache
    start_baseline()
    ours, base = [], []
    for _ in range(rounds):
        ours.append(start_worker_to_ready())
        base.append(start_baseline())
    return statistics.median(ours), statistics.median(base)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    ok = True
    ours, base = bench_frames(repeat=5 if quick else 15, number=5_000 if quick else 20_000)
    ratio = ours / base
    print("frame seal+open, 100-byte text payload")
    print(f"  sandvisor      {ours:7.2f} us/frame   (target <= {FRAME_TARGET_US} us)")
    print(f"  hmac+decode    {base:7.2f} us/frame   (the floor, same bytes)")
    print(f"  ratio          {ratio:7.2f}x           (target <= {FRAME_TARGET_RATIO}x)")
    ok &= ours <= FRAME_TARGET_US and ratio <= FRAME_TARGET_RATIO

    worker, baseline = bench_start(rounds=5 if quick else 21)
    ratio = worker / baseline
    print("worker start to ready over real pipes (median)")
    print(f"  worker ready   {worker * 1e3:7.1f} ms")
    print(f'  import msgspec {baseline * 1e3:7.1f} ms   (python -c "import msgspec")')
    print(f"  ratio          {ratio:7.2f}x           (target <= {START_TARGET_RATIO}x)")
    ok &= ratio <= START_TARGET_RATIO
    print("all targets met" if ok else "a target was missed (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
