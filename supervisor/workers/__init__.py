"""Sandboxed workers: the `Supervisor` and what it is made of (calls, the pool of
sessions, each session's protocol connection, the watchdog's rules, grants, outcomes, the
per-call audit events, the launch seam and its bubblewrap launcher).

The public names are re-exported by `supervisor` (``from supervisor import Supervisor``).
"""
