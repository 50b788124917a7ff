"""The adapters `sandvisor demo` runs in sandboxed workers:
``--adapters worker_runtime.demo_adapters:registry``.

Each shows one behaviour of the supervisor: ``report.render`` streams progress and
finishes; ``feed.fetch`` hangs and ignores its cancellation token (a deadline kills it:
outcome ``indeterminate``); ``archive.export`` streams progress and stops when cancelled
(outcome ``cancelled``); ``stock.check`` answers at once (the call after a kill lands
on a fresh worker).
"""

from __future__ import annotations

import json
import time
from typing import Any

from .adapters import AdapterRegistry, Cancelled, Context, InvalidInput

registry = AdapterRegistry()

#: Pause between the progress steps of ``report.render`` and ``archive.export``.
STEP_SECONDS = 0.15


@registry.adapter("report.render", cancellable=True)
def render(value: str, ctx: Context) -> str:
    """Render a stock report from JSON lines of ``{"name", "stock", "price"}``."""
    rows = []
    for number, line in enumerate(value.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            rows.append((str(item["name"]), int(item["stock"]), float(item["price"])))
        except (ValueError, KeyError, TypeError):
            raise InvalidInput(f"line {number} is not a product record") from None
    if not rows:
        raise InvalidInput("no products to report on")
    lines = []
    for index, (name, stock, price) in enumerate(rows, 1):
        if ctx.wait_cancelled(STEP_SECONDS):
            raise Cancelled()
        ctx.emit(f"rendering {index}/{len(rows)}: {name}")
        lines.append(f"{name:<12} {stock:>5} x {price:>7.2f} = {stock * price:>9.2f}")
    total = sum(stock * price for _, stock, price in rows)
    lines.append(f"{'total':<12} {'':>17} {total:>9.2f}")
    return "\n".join(lines) + "\n"


@registry.adapter("feed.fetch", cancellable=True)
def fetch(value: str, ctx: Context) -> str:
    """A supplier feed that hangs: it ignores its token, so only a kill stops it."""
    time.sleep(float(value or "60"))
    return "feed fetched"


@registry.adapter("archive.export", cancellable=True)
def export(value: str, ctx: Context) -> str:
    """Export ``value`` batches, one progress chunk each; stops when cancelled."""
    batches = int(value or "20")
    for batch in range(1, batches + 1):
        if ctx.wait_cancelled(STEP_SECONDS):
            raise Cancelled()
        ctx.emit(f"exported batch {batch}/{batches}")
    return f"exported {batches} batches"


@registry.adapter("stock.check", format="json")
def check(value: Any, ctx: Context) -> Any:
    """Echo a stock check (the first call a fresh worker takes after a kill)."""
    return {"checked": value, "ok": True}
