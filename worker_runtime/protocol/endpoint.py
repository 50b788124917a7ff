"""What both connections share: a sealer, an opener, and a one-way "dead" flag.

A connection dies on the first received defect and never accepts anything again; that
rule lives here once so the host and the worker cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from .errors import ConnectionDead, ProtocolError
from .framing import Opener, Sealer
from .messages import Body

In = TypeVar("In", bound=Body)
Out = TypeVar("Out")


class Endpoint(Generic[In, Out]):
    """One side of a session; subclasses implement `_apply` (receiver check 10)."""

    def __init__(self, session_id: str, send_key: bytes, recv_key: bytes, peer_kinds: Any) -> None:
        self.session_id = session_id
        self._sealer = Sealer(send_key, session_id)
        self._opener: Opener[In] = Opener(recv_key, session_id, peer_kinds)
        self._dead: ProtocolError | None = None

    @property
    def dead(self) -> bool:
        return self._dead is not None

    @property
    def failure(self) -> ProtocolError | None:
        """The error that killed the connection, if it is dead."""
        return self._dead

    def fail(self, reason: ProtocolError) -> None:
        """Mark the connection dead from outside (e.g. the peer process was killed)."""
        if self._dead is None:
            self._dead = reason

    def receive(self, line: bytes) -> Out:
        """Consume one line from the peer (without its LF); a defect kills the connection."""
        if self._dead is not None:
            self._check_usable()
        try:
            return self._apply(self._opener.open(line))
        except ProtocolError as exc:
            self._dead = exc
            raise

    def _apply(self, msg: In) -> Out:
        raise NotImplementedError

    def _die(self, error: ProtocolError) -> ProtocolError:
        """Record ``error`` as the cause of death and return it for raising."""
        self._dead = error
        return error

    def _check_usable(self) -> None:
        if self._dead is not None:
            raise ConnectionDead("the connection already failed") from self._dead
