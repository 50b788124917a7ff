"""``sandvisor doctor``: what works on this machine, what is missing, and how to fix it.

Exit status 0 when everything a default sandbox needs is present, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys

from .probe import ProbeReport, probe

_MARK = {"ok": "ok", "missing": "MISSING", "warning": "warning", "info": "info"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--no-smoke", action="store_true", help="skip starting a real sandbox (the smoke test)"
    )


def render(report: ProbeReport) -> str:
    width = max(len(c.name) for c in report.checks)
    lines = ["sandvisor doctor: what this machine can sandbox", ""]
    for check in report.checks:
        lines.append(f"  {_MARK[check.status]:<8} {check.name:<{width}}  {check.detail}")
        if check.status in ("missing", "warning") and check.fix:
            lines.append(f"  {'':<8} {'':<{width}}  needed for: {check.needed_for}")
            lines.append(f"  {'':<8} {'':<{width}}  fix: {check.fix}")
    lines.append("")
    missing = [c for c in report.checks if c.status == "missing"]
    if missing:
        names = ", ".join(c.name for c in missing)
        lines.append(f"{len(missing)} missing ({names}): apply the fixes and run it again.")
    else:
        lines.append("Everything a default sandbox needs is here.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    return report(probe(smoke=not args.no_smoke), as_json=args.json)


def report(found: ProbeReport, *, as_json: bool) -> int:
    """Print the findings (text or JSON); the exit status: 0 when nothing is missing."""
    if as_json:
        json.dump(found.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(found))
    return 0 if found.ok else 1
