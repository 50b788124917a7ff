"""``sandvisor doctor``: what works on this machine, what is missing, and how to fix it.

Exit status 0 when everything a default sandbox needs is present, 1 otherwise.
``--delegate USER`` (root) prints, and with ``--apply`` performs, the cgroup set-up that
gives an ordinary user's sandboxes their limits (``--remove`` undoes it): 0 done, 1 not.
``--sweep`` removes what dead hosts left behind: 0 when nothing is left, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import textwrap

from . import leftovers
from .delegate import plan as plan_delegation
from .delegate import removal
from .errors import SandboxError
from .probe import ProbeReport, probe
from .selfpath import sandvisor_command, sudo_sandvisor

_MARK = {"ok": "ok", "missing": "MISSING", "warning": "warning", "info": "info"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = (
        "sandvisor doctor [--json] [--no-smoke] [-- COMMAND ARGS] | --delegate USER "
        "[--apply | --remove] | --sweep"
    )
    add = parser.add_argument
    add("--json", action="store_true", help="print the findings as JSON")
    add("--no-smoke", action="store_true", help="skip starting a real sandbox (the smoke test)")
    add(
        "--delegate",
        metavar="USER",
        help="as root: print the cgroup set-up that gives USER's sandboxes their memory and "
        "pids limits (cgroup v1: sandvisor-USER subtrees; v2: a delegated cgroup)",
    )
    add("--apply", action="store_true", help="with --delegate: perform it")
    add("--remove", action="store_true", help="with --delegate: undo it")
    add(
        "--sweep",
        action="store_true",
        help="remove the cgroups and orphaned sandboxes of dead hosts (as root: every user's)",
    )


def render(report: ProbeReport) -> str:
    width = max(len(c.name) for c in report.checks)
    indent = " " * (2 + 8 + 1 + width + 2)
    lines = ["sandvisor doctor: what this machine can sandbox", ""]

    def wrapped(first: str, text: str) -> list[str]:
        return textwrap.wrap(text, 100, initial_indent=first, subsequent_indent=indent) or [first]

    for check in report.checks:
        lines += wrapped(f"  {_MARK[check.status]:<8} {check.name:<{width}}  ", check.detail)
        if check.status in ("missing", "warning") and check.fix:
            lines += wrapped(indent, f"needed for: {check.needed_for}")
            lines += wrapped(indent, f"fix: {check.fix}")
    lines.append("")
    missing = [c for c in report.checks if c.status == "missing"]
    if missing:
        names = ", ".join(c.name for c in missing)
        lines.append(f"{len(missing)} missing ({names}): apply the fixes and run it again.")
    else:
        lines.append("Everything a default sandbox needs is here.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    return (
        admin(args)
        if asks_admin(args)
        else report(probe(smoke=not args.no_smoke), as_json=args.json)
    )


def asks_admin(args: argparse.Namespace) -> bool:
    """Whether the options ask for `admin` (``--delegate``, ``--sweep``) instead of checks."""
    return bool(args.delegate is not None or args.apply or args.remove or args.sweep)


def admin(args: argparse.Namespace) -> int:
    """``--delegate USER [--apply | --remove]`` or ``--sweep``."""
    if args.delegate is not None:
        return _delegate(args)
    if args.apply or args.remove:
        return _fail("--apply and --remove go with --delegate USER", 2)
    return _sweep()


def report(found: ProbeReport, *, as_json: bool) -> int:
    """Print the findings (text or JSON); the exit status: 0 when nothing is missing."""
    if as_json:
        json.dump(found.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(found))
    return 0 if found.ok else 1


def _fail(message: str, code: int = 1) -> int:
    print(f"sandvisor doctor: {message}", file=sys.stderr)
    return code


def _delegate(args: argparse.Namespace) -> int:
    if args.apply and args.remove:
        return _fail("--apply or --remove, not both", 2)
    if os.geteuid() != 0:
        return _fail(
            f"--delegate makes cgroups for {args.delegate}: run it as root "
            f"({sudo_sandvisor(f'doctor --delegate {shlex.quote(args.delegate)} --apply')})"
        )
    try:
        plan = (removal if args.remove else plan_delegation)(args.delegate)
        for step in plan.steps:
            print(step.command)
        if args.apply or args.remove:
            plan.apply()
    except SandboxError as exc:
        return _fail(str(exc))
    for note in plan.notes:
        print(f"# {note}")
    if plan.steps and not (args.apply or args.remove):
        again = f"{sandvisor_command()} doctor --delegate {shlex.quote(args.delegate)} --apply"
        print(f"# not done yet: {again} does it")
    return 0


def _sweep() -> int:
    left = leftovers.sweep()
    if left:
        return _fail(f"could not remove {left.describe()}")
    print("sandvisor doctor: nothing left behind by dead hosts")
    return 0
