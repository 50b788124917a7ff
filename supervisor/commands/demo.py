"""``sandvisor demo``: the whole product in a few seconds, with no configuration.

1. A bash script loops over two local tools (host callbacks) with ``jq`` and pipes the
   result into ``report.render``, a sandboxed tool that streams its progress.
2. ``feed.fetch`` hangs past its 1 s deadline and ignores its cancellation token: the
   watchdog kills its worker, the outcome is ``indeterminate`` (the effect may or may not
   have happened), the poisoned worker is replaced, and the next call runs on a fresh one.
3. ``archive.export`` streams progress and is cancelled cooperatively: it acknowledges,
   and the outcome is ``cancelled``.

It ends with a table of outcomes and timings. Exit status 0 when everything behaved as
designed (``indeterminate`` is the designed outcome of step 2), 1 if something did not,
125 if this machine cannot sandbox (`sandvisor doctor` says what is missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

import trio

from supervisor.workers.tool_callbacks import failure_of

if TYPE_CHECKING:
    from sandbox.policy import SandboxPolicy

EXAMPLE_ADAPTERS = ["worker_runtime.demo_adapters:registry"]

SCRIPT = """\
# price every product with the local tools, then render the report in a sandbox
for id in $(list_products | jq -r '.[].id'); do
  get_product --id "$id" | jq -c '{name, stock, price}'
done | report.render
"""

_PRODUCTS = {
    1: {"name": "anvil", "stock": 12, "price": 89.5},
    2: {"name": "rope", "stock": 140, "price": 4.25},
    3: {"name": "lantern", "stock": 31, "price": 17.0},
    4: {"name": "compass", "stock": 8, "price": 42.9},
}


def example_scripted(name: str = "shop") -> Any:
    """The example `ScriptedTool`: two local tools over a small product catalogue."""
    from supervisor.scripted import ScriptedTool

    def list_products(params: dict[str, Any], stdin: str | None) -> str:
        return json.dumps([{"id": i, "name": p["name"]} for i, p in _PRODUCTS.items()]) + "\n"

    def get_product(params: dict[str, Any], stdin: str | None) -> str:
        product = _PRODUCTS.get(params["id"])
        if product is None:
            from supervisor.scripted import ToolFailure

            raise ToolFailure(f"get_product: no product {params['id']}\n", 1)
        return json.dumps({"id": params["id"], **product}) + "\n"

    shop = ScriptedTool(name, short_description="A small shop: products and prices")
    shop.add_tool(
        "list_products",
        "List the products (id and name)",
        list_products,
        schema={"type": "object", "properties": {}},
        category="catalogue",
    )
    shop.add_tool("get_product", "One product: name, stock and price", get_product,
                  schema={"type": "object", "properties": {"id": {"type": "integer"}},
                          "required": ["id"]}, category="catalogue")  # fmt: skip
    return shop


# -- display -----------------------------------------------------------------------------------


class Display:
    """Live progress: one redrawn line on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO, *, live: bool, quiet: bool = False) -> None:
        self.stream = stream
        self.live = live
        self.quiet = quiet
        self._open = False

    def say(self, text: str = "") -> None:
        if self.quiet:
            return
        self._end_line()
        self.stream.write(text + "\n")
        self.stream.flush()

    def progress(self, tool: str, text: str) -> None:
        if self.quiet:
            return
        line = f"    {tool}: {text}"
        if self.live:
            self.stream.write("\r\x1b[2K" + line[:200])
            self._open = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _end_line(self) -> None:
        if self._open:
            self.stream.write("\n")
            self._open = False


@dataclasses.dataclass
class Row:
    step: str
    tool: str
    status: str
    seconds: float
    note: str
    expected: str

    @property
    def as_designed(self) -> bool:
        return self.status == self.expected


def table(rows: list[Row]) -> str:
    header = ("step", "tool", "status", "time", "note")
    cells = [(r.step, r.tool, r.status, f"{r.seconds:.2f} s", r.note) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]  # fmt: skip
    return "\n".join(lines)


# -- the demo ----------------------------------------------------------------------------------


async def run_demo(
    display: Display, *, deadline: float = 1.0, policy: SandboxPolicy | None = None
) -> list[Row]:
    """Run the three steps with a fresh supervisor; the rows of the summary."""
    from sandbox.policy import SandboxPolicy
    from supervisor.commands.scripted_bridge import add_sandboxed_tools
    from supervisor.workers.supervisor import Supervisor

    rows: list[Row] = []
    started = time.monotonic()
    async with Supervisor(adapters=EXAMPLE_ADAPTERS, policy=policy or SandboxPolicy(), pool_size=2,
                          cancel_grace=0.5, ping_interval=None) as sup:  # fmt: skip
        up = time.monotonic() - started
        display.say(f"sandvisor demo: 2 sandboxed workers up in {up:.2f} s "
                    "(bubblewrap, seccomp, cgroups)")  # fmt: skip

        # 1. a script over local and sandboxed tools -------------------------------------------
        shop = example_scripted()

        def streaming(tool: str) -> Any:
            async def callback(params: dict[str, Any], stdin: str | None) -> str:
                out = await sup.invoke(
                    tool, stdin or "", on_chunk=lambda text: display.progress(tool, text)
                )
                if out.status != "completed":
                    raise failure_of(tool, out, None)
                rows.append(
                    Row(
                        "1",
                        tool,
                        out.status,
                        out.total_s,
                        f"{out.chunks} progress chunks streamed",
                        "completed",
                    )
                )
                return str(out.value)  # fmt: skip

            return callback

        add_sandboxed_tools(shop, sup.tools, streaming, specs=sup.specs)
        display.say("\n1. a script over local tools, jq, and a sandboxed tool that streams")
        for line in SCRIPT.rstrip().splitlines():
            display.say(f"   | {line}")
        began, first_row = time.monotonic(), len(rows)
        result = await shop.execute(SCRIPT)
        took = time.monotonic() - began
        display.say()
        for line in result.stdout.rstrip().splitlines():
            display.say(f"   {line}")
        if result.stderr:
            display.say(f"   stderr: {result.stderr.strip()}")
        rows.insert(first_row, Row(
            "1", "script (shop)", "completed" if result.exit_code == 0 else
            f"exit {result.exit_code}", took, "4 products priced with jq, then rendered",
            "completed"))  # fmt: skip

        # 2. a deadline missed: killed, indeterminate, replaced --------------------------------
        display.say(f"\n2. feed.fetch hangs and ignores cancellation; deadline {deadline:g} s")
        out = await sup.invoke("feed.fetch", "60", deadline=deadline)
        display.say(f"   outcome {out.status} after {out.total_s:.2f} s: the cancel was ignored "
                    f"for the grace, so the worker was killed ({out.termination})")  # fmt: skip
        rows.append(Row("2", "feed.fetch", out.status, out.total_s,
                        f"deadline {deadline:g} s missed, cancel ignored: worker killed, "
                        "session poisoned", "indeterminate"))  # fmt: skip
        after = await sup.invoke("stock.check", {"sku": "anvil"}, deadline=5.0)
        fresh = after.session_id != out.session_id
        display.say(f"   next call on {'a fresh' if fresh else 'the SAME'} worker: "
                    f"{after.status} {json.dumps(after.value)}")  # fmt: skip
        rows.append(Row("2", "stock.check", after.status if fresh else "reused poisoned worker",
                        after.total_s, "ran on the replacement worker", "completed"))  # fmt: skip

        # 3. a cooperative cancel ---------------------------------------------------------------
        display.say("\n3. archive.export streams progress; cancelled after 3 batches")
        seen = trio.Event()
        count = 0

        def on_chunk(text: str) -> None:
            nonlocal count
            count += 1
            display.progress("archive.export", text)
            if count >= 3:
                seen.set()

        handle = await sup.start("archive.export", "40", on_chunk=on_chunk, deadline=30.0)
        with trio.move_on_after(10):
            await seen.wait()
        out = await handle.cancel()
        display.say(f"   outcome {out.status}: {out.error}")
        note = f"acknowledged the cancel after {out.chunks} chunks"
        rows.append(Row("3", "archive.export", out.status, out.total_s, note, "cancelled"))
    return rows


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run the built-in example: a script over local and sandboxed tools, a call killed "
        "at its deadline, a call cancelled cooperatively; then a summary table."
    )
    parser.add_argument("--json", action="store_true",
                        help="print the summary as JSON (and no live progress)")  # fmt: skip
    parser.add_argument("--per-process-limits", action="store_true",
                        help="where no cgroup can be had, accept per-process limits "
                        "(weaker: see docs/sandbox.md) instead of refusing")  # fmt: skip
    parser.epilog = (
        "Exit status: 0 everything behaved as designed, 1 something did not (the line "
        "says what), 125 this machine cannot sandbox (see `sandvisor doctor`)."
    )


def run(args: argparse.Namespace) -> int:
    from sandbox.errors import SandboxUnavailable
    from sandbox.gate import require
    from sandbox.policy import SandboxPolicy
    from supervisor.commands.common import (
        EXIT_FAILED,
        EXIT_INTERRUPTED,
        EXIT_NO_SANDBOX,
        EXIT_OK,
        fail,
    )

    policy = SandboxPolicy(limits="per-process" if args.per_process_limits else "cgroup")
    try:
        require(policy)
    except SandboxUnavailable as exc:
        return fail("demo", f"this machine cannot sandbox: {exc} (run `sandvisor doctor`)",
                    EXIT_NO_SANDBOX)  # fmt: skip
    display = Display(sys.stdout, live=sys.stdout.isatty(), quiet=args.json)
    began = time.monotonic()
    try:
        rows = trio.run(functools.partial(run_demo, display, policy=policy))
    except KeyboardInterrupt:
        display.say()
        return fail("demo", "interrupted", EXIT_INTERRUPTED)
    except SandboxUnavailable as exc:
        return fail("demo", f"this machine cannot sandbox: {exc} (run `sandvisor doctor`)",
                    EXIT_NO_SANDBOX)  # fmt: skip
    except Exception as exc:
        return fail("demo", f"{type(exc).__name__}: {exc}")
    total = time.monotonic() - began
    wrong = [r for r in rows if not r.as_designed]
    if args.json:
        json.dump({"ok": not wrong, "seconds": round(total, 3),
                   "rows": [dataclasses.asdict(r) | {"as_designed": r.as_designed}
                            for r in rows]}, sys.stdout, indent=2)  # fmt: skip
        sys.stdout.write("\n")
    else:
        display.say(f"\nsummary ({total:.1f} s)\n")
        display.say(table(rows))
    if wrong:
        first = wrong[0]
        return fail("demo", f"{first.tool} ended {first.status}, expected {first.expected}")
    if not args.json:
        display.say("\nEverything behaved as designed: indeterminate is what a killed call is.")
    return EXIT_OK if not wrong else EXIT_FAILED
