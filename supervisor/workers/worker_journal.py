"""The host's side of the workers' journals (spec section 11): a directory per tool group.

A group whose workers serve an effectful tool gets a directory of its own, bound writable
into each of its sandboxes at `JOURNAL_DEST` and nowhere else; its workers journal their
effectful calls there. The host keeps the key that makes those entries checkable: a root
key in the journal root (``key``, 0600, never bound), from which each group's key and
each operation's journal key are derived (HMAC-SHA256). A session gets, in each
``invoke``, the key of that operation alone, so what a sandbox can sign is bounded by the
operations it was given (docs/supervisor.md, "The workers' journal", says what that
does and does not protect against).

Layout of the root (``Supervisor(journal_dir=...)``; by default beside a durable ledger,
or a temporary directory that lives as long as the supervisor)::

    key                the root key (32 bytes, 0600)
    lock               held (flock) while a supervisor uses the root: one at a time
    groups/NAME/       a group's entries (1777 when sandboxes run as other uids, else 0700)

The host reads nothing the sandbox wrote except what a `reconciled` answer relays (and
checks its tags); it only lists a group's directory to count and to remove entries.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping

from sandbox import Bind
from sandbox.policy import is_within
from worker_runtime.journal import JOURNAL_ENV
from worker_runtime.protocol.journal import (
    Begun,
    Ended,
    EntryInvalid,
    entry_name,
    open_entry,
    status_of,
)
from worker_runtime.protocol.limits import KEY_BYTES, MAX_JOURNAL_ATTEMPTS
from worker_runtime.protocol.messages import Running, SignedEntry, Status, UnknownState

#: Where a group's journal directory appears inside its sandboxes.
JOURNAL_DEST = "/run/sandvisor/journal"
#: Operations a group's journal holds at most (``Supervisor(journal_limit=)``).
DEFAULT_LIMIT = 65536

_GROUP_INFO = b"sandvisor/v1/journal-group\0"


class JournalError(Exception):
    """The journal root cannot be used; the message says why and what to do."""


class JournalTampered(Exception):
    """A worker's reconcile answer whose journal entries fail the host's check: refused,
    and the operation stays unresolved."""


class WorkerJournals:
    """The journal root of one supervisor (opened once, closed with it)."""

    def __init__(self, root: str | os.PathLike[str] | None, *, limit: int = DEFAULT_LIMIT) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("journal_limit must be an int >= 1")
        self.limit = limit
        self._given = None if root is None else os.path.abspath(os.fspath(root))
        self.root: str | None = None
        self._lock = -1
        self._key: bytes | None = None
        self._groups: dict[str, GroupJournal] = {}

    def group(self, name: str, effectful: Iterable[str], binds: Iterable[Bind]) -> GroupJournal:
        """The journal of group ``name`` (made on first use), which journals
        ``effectful`` tools; ``binds`` are the group's other binds, which may not overlap
        it."""
        if self._key is None:
            self._open()
        assert self.root is not None and self._key is not None
        journal = self._groups.get(name)
        if journal is None:
            path = os.path.join(self.root, "groups", name)
            _check_apart(path, name, binds)
            key = hmac.digest(self._key, _GROUP_INFO + name.encode(), "sha256")
            journal = self._groups[name] = GroupJournal(name, path, key, effectful, self.limit)
        return journal

    def close(self) -> None:
        """Release the root (and remove it if it was a temporary one)."""
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1
        if self.root is not None and self._given is None:
            shutil.rmtree(self.root, ignore_errors=True)
        self._key = None

    def _open(self) -> None:
        if self._given is None:
            root = tempfile.mkdtemp(prefix="sandvisor-journal-")
        else:
            root = self._given
            try:
                os.makedirs(root, mode=0o700, exist_ok=True)
            except OSError as exc:
                raise JournalError(f"the worker journal {root} cannot be made: {exc}") from None
        _check_private(root, "the worker journal")
        lock = os.open(
            os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise JournalError(
                f"the worker journal {root} is in use by another supervisor; give each its own "
                "(journal_dir=)"
            ) from None
        try:
            self._key = _root_key(os.path.join(root, "key"))
            groups = os.path.join(root, "groups")
            with contextlib.suppress(FileExistsError):
                os.mkdir(groups, 0o700)
            _check_private(groups, "the worker journal's groups directory")
        except BaseException:
            os.close(lock)
            raise
        self.root, self._lock = root, lock


class GroupJournal:
    """One group's journal: the directory its sandboxes write, the keys, the checks."""

    def __init__(
        self, name: str, path: str, key: bytes, effectful: Iterable[str], limit: int
    ) -> None:
        self.name = name
        self.path = path
        self.effectful = frozenset(effectful)
        self.limit = limit
        self._key = key
        shared = os.geteuid() == 0  # sandboxes run as fresh uids of their own
        try:
            os.mkdir(path, 0o700)
            if shared:  # each sandbox may add entries and read all, remove only its own
                os.chmod(path, 0o1777)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise JournalError(f"the journal of group {name!r} at {path} is not our directory")
        self.operations = self._scan(clean=True)

    # -- what a session needs ------------------------------------------------------------

    def bind(self) -> Bind:
        return Bind(self.path, JOURNAL_DEST, writable=True)

    @property
    def env(self) -> Mapping[str, str]:
        return {JOURNAL_ENV: JOURNAL_DEST}

    def key_for(self, tool: str, idempotency_key: str) -> bytes | None:
        """The journal key of one operation (None for a tool that does not journal)."""
        if tool not in self.effectful:
            return None
        return hmac.digest(self._key, f"{tool}\0{idempotency_key}".encode(), "sha256")

    @property
    def full(self) -> bool:
        return self.operations >= self.limit

    def note_new(self) -> None:
        """An operation of an effectful tool is dispatched for the first time."""
        self.operations += 1

    # -- checking a reconcile answer ------------------------------------------------------

    def check(
        self,
        tool: str,
        key: str,
        status: Status,
        journal: list[SignedEntry] | None,
        attempt: int,
    ) -> Status:
        """The status an answer for an effectful tool may be taken as: a terminal one
        only as its verified entries record it (their tags, tool, key, run, and a start
        of at least ``attempt``, the one last dispatched). Raises `JournalTampered`."""
        if tool not in self.effectful or isinstance(status, UnknownState):
            return status
        op_key = self.key_for(tool, key)
        assert op_key is not None
        entries = journal or []
        if isinstance(status, Running) and not entries:
            return status
        opened = []
        for signed, kind in zip(entries, ("start", "end"), strict=False):
            try:
                entry = open_entry(op_key, signed)
            except EntryInvalid as exc:
                why = f"its {kind} entry fails its check: {exc}"
                raise self._tampered(tool, key, why) from None
            opened.append(entry)
        start = opened[0] if opened else None
        if not isinstance(start, Begun) or (start.tool, start.key) != (tool, key):
            raise self._tampered(tool, key, "the answer's first entry is not this key's start")
        if start.attempt < attempt:
            why = f"the entries are of attempt {start.attempt}, the last dispatched is {attempt}"
            raise self._tampered(tool, key, why)
        if isinstance(status, Running):
            return status
        end = opened[1] if len(opened) == 2 else None
        if not isinstance(end, Ended) or (end.tool, end.key, end.n) != (tool, key, start.n):
            raise self._tampered(tool, key, "the answer has no end entry of the same run")
        recorded = status_of(end.outcome)
        if recorded != status:
            raise self._tampered(tool, key, "the answer's status is not what its end entry records")
        return recorded

    def _tampered(self, tool: str, key: str, why: str) -> JournalTampered:
        return JournalTampered(
            f"reconcile of {tool} {key} refused: {why}; the journal of group {self.name!r} "
            f"({self.path}) was altered or the worker lies; the operation stays unresolved"
        )

    # -- size and compaction --------------------------------------------------------------

    def forget(self, keys: Iterable[tuple[str, str]]) -> int:
        """Remove every entry of these operation keys (ended operations the ledger
        compacted away); returns how many keys had entries."""
        removed = 0
        for tool, key in keys:
            if tool not in self.effectful:
                continue
            found = False
            for n in range(1, MAX_JOURNAL_ATTEMPTS + 1):
                gone = [self._unlink(entry_name(tool, key, n, k)) for k in ("start", "end")]
                if not any(gone):
                    break
                found = True
            removed += found
        self.operations = self._scan(clean=False)
        return removed

    def _unlink(self, name: str) -> bool:
        try:
            os.unlink(os.path.join(self.path, name))
        except FileNotFoundError:
            return False
        return True

    def _scan(self, *, clean: bool) -> int:
        """Count the operations journaled (their first starts); ``clean``: also remove
        the temporary files of workers that died while writing (only when no session of
        the group runs: at open, under the root's lock)."""
        count = 0
        with os.scandir(self.path) as entries:
            for item in entries:
                name = item.name
                if name.endswith(".1.start"):
                    count += 1
                elif clean and name.startswith(".tmp."):
                    with contextlib.suppress(OSError):
                        os.unlink(item.path)
        return count


def _check_private(path: str, what: str) -> None:
    """A directory of ours that no one else may write to (nor put a link in)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise JournalError(f"{what} {path} is not a directory (a symlink is refused)")
    if st.st_uid != os.geteuid():
        raise JournalError(f"{what} {path} belongs to uid {st.st_uid}, not this host's")
    if st.st_mode & 0o022:
        raise JournalError(f"{what} {path} is writable by others: chmod go-w {path}")


def _root_key(path: str) -> bytes:
    """Read the root key, or make it (32 bytes of OS entropy, 0600, written once)."""
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        pass
    else:
        try:
            os.write(fd, os.urandom(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise JournalError(f"the journal key {path} must be a file of ours, mode 0600")
    if len(key) != KEY_BYTES or not any(key):
        raise JournalError(f"the journal key {path} is not {KEY_BYTES} bytes: remove it")
    return key


def _check_apart(path: str, group: str, binds: Iterable[Bind]) -> None:
    """The journal is outside every other bind of the group, on both sides."""
    for bind in binds:
        if is_within(path, bind.source) or is_within(bind.source, path):
            raise JournalError(
                f"group {group!r}: bind {bind.source} overlaps its worker journal {path}; "
                "choose another journal_dir"
            )
        if is_within(bind.dest, JOURNAL_DEST) or is_within(JOURNAL_DEST, bind.dest):
            raise JournalError(
                f"group {group!r}: bind destination {bind.dest} overlaps the journal's "
                f"{JOURNAL_DEST}"
            )
