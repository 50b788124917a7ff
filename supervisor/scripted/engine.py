"""Moved to `supervisor.scripted.shell.execution`; this path stays for one release
(removed in 0.2)."""

from supervisor.scripted.shell.execution import run_script

__all__ = ["run_script"]
