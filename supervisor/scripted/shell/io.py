"""Where command output goes and where input comes from: in-memory, always bounded.

A ``Sink`` collects the text of a pipe or command substitution and aborts the execution
when it outgrows ``max_value_bytes``; the final stdout/stderr are ``CappedSink``s that keep
the first N characters and remember that they cut; ``/dev/null`` is a ``NullSink``.

Differential cases: ``cases_basics.txt``, ``cases_heredoc.txt``.
"""

from __future__ import annotations

from ..errors import LimitExceeded


class Sink:
    __slots__ = ("limit", "parts", "size")

    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit

    def write(self, text: str) -> None:
        if text:
            self.parts.append(text)
            self.size += len(text)
            if self.size > self.limit:
                self.overflow()

    def overflow(self) -> None:
        raise LimitExceeded(f"maximum value size exceeded ({self.limit})")

    def getvalue(self) -> str:
        parts = self.parts
        if len(parts) > 1:
            joined = "".join(parts)
            self.parts = [joined]
            return joined
        return parts[0] if parts else ""


class CappedSink(Sink):
    """The final stdout/stderr: keeps at most ``limit`` characters, flags the cut."""

    __slots__ = ("truncated",)

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.truncated = False

    def write(self, text: str) -> None:
        if not text:
            return
        room = self.limit - self.size
        if room <= 0:
            self.truncated = True
            return
        if len(text) > room:
            text = text[:room]
            self.truncated = True
        self.parts.append(text)
        self.size += len(text)


class NullSink(Sink):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def write(self, text: str) -> None:
        return None


NULL = NullSink()


class InputStream:
    """A command's stdin: one string consumed front to back (``read`` takes a line,
    a table command takes the rest), shared by every command of a loop body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: str) -> None:
        self.data = data
        self.pos = 0

    def read_all(self) -> str:
        pos = self.pos
        self.pos = len(self.data)
        return self.data[pos:] if pos else self.data

    def at_eof(self) -> bool:
        return self.pos >= len(self.data)

    def read_until(self, delim: str) -> tuple[str, bool]:
        """Up to and excluding ``delim`` ('' means NUL); (text, delimiter found)."""
        d = delim or "\0"
        data, pos = self.data, self.pos
        i = data.find(d, pos)
        if i < 0:
            self.pos = len(data)
            return data[pos:], False
        self.pos = i + 1
        return data[pos:i], True

    def read_chars(self, n: int) -> str:
        pos = self.pos
        self.pos = min(len(self.data), pos + n)
        return self.data[pos : self.pos]
