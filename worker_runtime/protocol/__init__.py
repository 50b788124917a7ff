"""The wire protocol of spec/protocol.md, shared by the host and the worker. No I/O anywhere.

- limits and the id grammar: `limits`
- the exception family (`ProtocolError`, `Refused`): `errors`
- message structs: `messages`; payload rules: `payloads`
- keys (stdlib HKDF): `keys`; bootstrap: `bootstrap`
- frames and lines: `framing`; what both connections share: `endpoint`
- per-session rules both sides enforce: `rules`
- state machines: `host.HostConnection` (the supervisor's), `worker.WorkerConnection`
  (the worker's)

Each side imports the submodules it needs, so the worker never loads the host's state
machine (nor the host the worker's), and this package's import costs nothing.
"""
