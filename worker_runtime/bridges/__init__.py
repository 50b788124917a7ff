"""Bridges: adapters that serve something else as sandvisor tools, inside the sandbox
(``command``: a program with a fixed argv)."""
