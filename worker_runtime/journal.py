"""The worker's journal of effectful calls: a directory the host binds into the sandbox.

Before an adapter declared ``effectful`` runs, the worker records its start (tool, key,
run number, input digest) and makes it durable; after, it records what it answers,
durably, and only then sends the answer (spec section 11). So a session killed at any
point leaves either no trace (the effect never began), a start without an end (it may
have happened: never run again under that key) or the answer itself. A later invoke
with the same key replays a recorded answer instead of running the effect twice; a fresh
session answers `reconcile` from these files.

One file per entry, named by the key's digest and run number, written to a temporary
name, fsync'd and hard-linked into place: a link never replaces an existing entry (two
sessions cannot both start a run) and a crash never leaves half an entry. Files are read
without following links, and only if they are regular files of bounded size: anything
else in the directory is a tampered entry. The journal cannot check tags of entries
made under other keys: it reads them for the host, which can.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import time
from typing import Any

from .protocol.journal import (
    Begun,
    Ended,
    EntryInvalid,
    JournalCancelled,
    JournalFailed,
    JournalOutcome,
    JournalSucceeded,
    Kind,
    entry_name,
    open_entry,
    seal_entry,
    split_line,
)
from .protocol.limits import MAX_JOURNAL_ATTEMPTS, MAX_LINE_BYTES, is_id
from .protocol.messages import Payload, SignedEntry
from .protocol.payloads import clip_message

#: The variable that names the journal directory inside the sandbox.
JOURNAL_ENV = "SANDVISOR_JOURNAL"
#: An entry file larger than this is not one (an entry holds at most one frame's payload).
MAX_ENTRY_BYTES = MAX_LINE_BYTES + 8192

#: What the driver does with a call: ("result", value) or ("error", (code, message,
#: retryable)), the same shapes the adapter's own outcome has.
Outcome = tuple[str, Any]


class JournalError(Exception):
    """The journal directory cannot be used at all."""


class Refusal(Exception):
    """An effectful call the journal does not let run; ``code`` is the error frame's."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def outcome(self) -> Outcome:
        return ("error", (self.code, self.message, False))


class Replay(Exception):
    """The key already has a recorded answer for this input: send it, run nothing."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__("replayed")
        self.outcome = outcome


class WorkerJournal:
    """The journal directory (an fd held for the worker's life)."""

    def __init__(self, path: str) -> None:
        try:
            self._dir = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise JournalError(f"the journal directory {path} cannot be opened: {exc}") from None
        self.path = path
        self._temps = itertools.count(1)

    @classmethod
    def from_env(cls) -> WorkerJournal | None:
        """The journal the host bound (``$SANDVISOR_JOURNAL``), or None without one."""
        path = os.environ.get(JOURNAL_ENV)
        return None if not path else cls(path)

    # -- an effectful call ----------------------------------------------------------------

    def begin(
        self, tool: str, key: str, journal_key: bytes, attempt: int, digest: str, session: str
    ) -> Begun:
        """Record the start of a run of ``(tool, key)``, durably, and return it.

        Raises `Replay` with the recorded answer when an earlier run under this key ended
        in a result or a final error for the same input, and `Refusal` when it must not
        run: the key was used with another input, an earlier run never ended, an entry
        fails its check, or the start cannot be recorded.
        """
        n, latest = self._latest_start(tool, key)
        if latest is not None:
            begun = self._check(journal_key, latest, tool, key, n, "start")
            assert isinstance(begun, Begun)
            if begun.digest != digest:
                raise Refusal(
                    "key_reused",
                    f"{tool}: idempotency key {key} was used with another input; refused, "
                    "not replayed (use a new key for a new input)",
                )
            end = self._read(entry_name(tool, key, n, "end"))
            if end is None:
                raise Refusal(
                    "in_doubt",
                    f"{tool}: idempotency key {key} started in session {begun.session} "
                    f"(run {n}) and never ended: it may have taken effect, so it is not run "
                    "again; reconcile it, or use a new key",
                )
            ended = self._check(journal_key, end, tool, key, n, "end")
            assert isinstance(ended, Ended)
            replay = _replay(ended.outcome)
            if replay is not None:
                raise Replay(replay)
            n += 1  # a retryable failure or an acknowledged cancel: another run may start
        if n > MAX_JOURNAL_ATTEMPTS:
            raise Refusal(
                "journal_full",
                f"{tool}: {MAX_JOURNAL_ATTEMPTS} runs are journaled under idempotency key "
                f"{key}; use a new key",
            )
        begun = Begun(tool, key, n, attempt, digest, session, time.time())
        try:
            line = seal_entry(journal_key, begun)
            created = self._create(entry_name(tool, key, n, "start"), line)
        except OSError as exc:
            raise Refusal(
                "journal_failed",
                f"{tool}: cannot record the start of idempotency key {key} in the journal "
                f"({exc.strerror}); the effect was not run",
            ) from None
        if not created:
            raise Refusal(
                "in_doubt",
                f"{tool}: another session started idempotency key {key} (run {n}) at the same "
                "time; it is not run twice",
            )
        return begun

    def end(self, begun: Begun, journal_key: bytes, outcome: JournalOutcome) -> None:
        """Record what run ``begun`` answers, durably (before the answer is sent). Raises
        `OSError` if it cannot: the start then stands alone (reconcile says running)."""
        ended = Ended(begun.tool, begun.key, begun.n, begun.session, time.time(), outcome)
        name = entry_name(begun.tool, begun.key, begun.n, "end")
        if not self._create(name, seal_entry(journal_key, ended)):
            raise OSError(errno.EEXIST, f"an entry {name} exists already")

    # -- reconcile ------------------------------------------------------------------------

    def lookup(self, tool: str, key: str) -> list[SignedEntry]:
        """The latest run's start and end (if any), as found, for a `reconciled` answer;
        empty if the key was never journaled. A file that cannot be read is relayed as
        what it is not: an entry (the host then refuses it as altered)."""
        try:
            n, start = self._latest_start(tool, key)
            if start is None:
                return []
            found = [split_line(start)]
            end = self._read(entry_name(tool, key, n, "end"))
        except Refusal as exc:
            return [split_line(exc.message.encode())]
        if end is not None:
            found.append(split_line(end))
        return found

    # -- files ----------------------------------------------------------------------------

    def _latest_start(self, tool: str, key: str) -> tuple[int, bytes | None]:
        """The highest run number with a start entry, and that entry (1, None: none)."""
        latest: bytes | None = None
        n = 0
        while n < MAX_JOURNAL_ATTEMPTS:
            line = self._read(entry_name(tool, key, n + 1, "start"))
            if line is None:
                break
            n += 1
            latest = line
        return (n, latest) if latest is not None else (1, None)

    def _check(
        self, journal_key: bytes, line: bytes, tool: str, key: str, n: int, kind: Kind
    ) -> Begun | Ended:
        name = entry_name(tool, key, n, kind)
        try:
            entry = open_entry(journal_key, split_line(line))
        except EntryInvalid as exc:
            raise Refusal(
                "journal_tampered", f"journal entry {name} fails its check: {exc}; refused"
            ) from None
        wanted = Begun if kind == "start" else Ended
        if type(entry) is not wanted or (entry.tool, entry.key, entry.n) != (tool, key, n):
            raise Refusal(
                "journal_tampered",
                f"journal entry {name} is not the {kind} of run {n} of {tool} {key}; refused",
            )
        return entry

    def _read(self, name: str) -> bytes | None:
        """An entry's bytes, or None if there is none. Raises `Refusal` for anything in its
        place that is not a regular file of an entry's size."""
        try:
            fd = os.open(
                name,
                os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                dir_fd=self._dir,
            )
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Refusal(
                "journal_tampered", f"journal entry {name} cannot be read ({exc.strerror}); refused"
            ) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
                raise Refusal(
                    "journal_tampered",
                    f"journal entry {name} is not a regular file of at most {MAX_ENTRY_BYTES} "
                    "bytes; refused",
                )
            chunks = []
            left = MAX_ENTRY_BYTES + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _create(self, name: str, data: bytes) -> bool:
        """Write ``data`` as entry ``name`` durably; False if the name is taken."""
        temp = f".tmp.{os.getpid()}.{next(self._temps)}.{os.urandom(4).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o644, dir_fd=self._dir)
        try:
            try:
                os.fchmod(fd, 0o644)  # readable by later sessions, whatever the umask
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temp, name, src_dir_fd=self._dir, dst_dir_fd=self._dir)
            except FileExistsError:
                return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=self._dir)
        os.fsync(self._dir)
        return True


def _replay(outcome: JournalOutcome) -> Outcome | None:
    """The answer a recorded outcome stands for, or None if a new run may start."""
    if isinstance(outcome, JournalSucceeded):
        return ("result", outcome.payload.value)
    if isinstance(outcome, JournalFailed) and not outcome.retryable:
        return ("error", (outcome.code, outcome.message, False))
    return None


def journal_outcome(outcome: Outcome, payload: Payload | None) -> JournalOutcome:
    """What to record for the driver's final outcome of a call (``payload``: the checked
    payload of a result)."""
    kind, detail = outcome
    if kind == "result":
        assert payload is not None
        return JournalSucceeded(payload)
    if kind == "cancelled":
        return JournalCancelled()
    code, message, retryable = detail
    return JournalFailed(
        code if is_id(code) else "adapter_error", clip_message(message), bool(retryable)
    )
