"""Sandboxed workers: the `Supervisor` and what it is made of (its config, calls with
their lifecycle table and clock, the pool of sessions, each session's protocol
connection, the watchdog's rules, grants, outcomes, the per-call audit events, the launch
seam and its bubblewrap launcher), and the tool groups it serves (each with its own
sandbox policy, pool and secrets).

The public names are re-exported by `supervisor` (``from supervisor import Supervisor``).
"""
