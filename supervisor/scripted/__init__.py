"""Scripted tool orchestration: a logic-only bash interpreter with tools as builtins."""
