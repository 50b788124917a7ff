"""The durable journal: SQLite in WAL mode, one fsync'd transaction per transition.

Three append-only tables: ``events`` (the audit chain, the source of truth for every
state), ``operations`` (each operation's immutable record, vouched for by its ``started``
event's digest) and ``results`` (one row per terminal event; the body of a completion or
failure, vouched for by that event's digest). Triggers refuse updates and deletes, which
stops accidents; the hash chain is what reveals deliberate edits.

Compaction (`SqliteJournal.prune`) is the one exception: in one transaction it removes
the oldest operations, which had all ended, with their events and results, and records a
`Checkpoint` in ``meta``: the last event removed (its seq and hash, which the first event
kept links to) and the counters that recovery would have read from what was removed.

The connection uses ``locking_mode=EXCLUSIVE``: the first ledger to open a journal holds
it until it closes or dies, so two hosts can never both recover and dispatch the same
operations. The kernel drops the lock when the process dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

import msgspec

from supervisor.ledger.audit import LOCAL_CALLS, AuditEvent
from supervisor.ledger.errors import JournalCorrupt, JournalError, JournalFailed, JournalLocked
from supervisor.ledger.records import OpRecord

_FORMAT = "sandvisor-ledger-journal"
_VERSION = "1"

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE operations(
    op_id INTEGER PRIMARY KEY, tool TEXT NOT NULL, call_index INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL, format TEXT NOT NULL, input BLOB NOT NULL,
    max_attempts INTEGER NOT NULL, max_output_bytes INTEGER NOT NULL, deadline_wall REAL,
    stream TEXT) STRICT;
CREATE TABLE events(
    seq INTEGER PRIMARY KEY, time REAL NOT NULL, op_id INTEGER NOT NULL, tool TEXT NOT NULL,
    call_index INTEGER NOT NULL, attempt INTEGER NOT NULL, kind TEXT NOT NULL,
    bytes_in INTEGER NOT NULL, bytes_out INTEGER NOT NULL, detail TEXT NOT NULL, digest TEXT,
    prev_hash TEXT NOT NULL, hash TEXT NOT NULL) STRICT;
CREATE TABLE results(
    seq INTEGER PRIMARY KEY, op_id INTEGER NOT NULL UNIQUE, kind TEXT NOT NULL,
    body BLOB) STRICT;
"""
_TABLES = ("events", "operations", "results")


def _append_only(table: str, verb: str) -> str:
    """The trigger that refuses ``verb`` (update, delete) on ``table``."""
    return (
        f"CREATE TRIGGER {table}_no_{verb} BEFORE {verb.upper()} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
    )


_APPEND_ONLY = "".join(
    _append_only(table, verb) + ";\n" for table in _TABLES for verb in ("update", "delete")
)

_INSERT_EVENT = "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
_INSERT_OP = "INSERT INTO operations VALUES (?,?,?,?,?,?,?,?,?,?)"
_INSERT_RESULT = "INSERT INTO results VALUES (?,?,?,?)"
_encode = msgspec.json.Encoder().encode
_decode_stream = msgspec.json.Decoder(tuple[int, int, int, int]).decode

#: ``(kind, body)`` of a terminal event: ``body`` holds a completion or failure.
TerminalRow = tuple[str, bytes | None]


class Checkpoint(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where a compacted journal starts: everything up to event ``seq`` was removed."""

    seq: int  # the last event removed
    hash: str  # its hash: the ``prev_hash`` of the first event kept
    last_op_id: int  # the newest operation removed (op ids continue after it)
    calls: dict[str, int]  # each tool's call count up to there (budgets continue)


_encode_checkpoint = msgspec.json.Encoder().encode
_decode_checkpoint = msgspec.json.Decoder(Checkpoint).decode


def _event(row: Any) -> AuditEvent:
    return AuditEvent(*row)  # the table's columns are the event's fields, in order


def _record(row: Any) -> OpRecord:
    (
        op_id,
        tool,
        call_index,
        key,
        fmt,
        data,
        max_attempts,
        max_output_bytes,
        deadline_wall,
        stream,
    ) = row
    try:
        return OpRecord(
            op_id=op_id,
            tool=tool,
            call_index=call_index,
            idempotency_key=key,
            format=fmt,
            input=data,
            max_attempts=max_attempts,
            max_output_bytes=max_output_bytes,
            deadline_wall=deadline_wall,
            stream=None if stream is None else _decode_stream(stream),
        )
    except msgspec.DecodeError as exc:
        raise JournalCorrupt(f"operation {op_id}: malformed stream policy") from exc


class SqliteJournal:
    """One ledger's journal file. Not thread-safe: the ledger is single-task."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._depth = 0
        try:
            # A journal holds inputs and results: create it private to this user.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            raise JournalError(f"cannot open journal {self.path!r}: {exc}") from exc
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open journal {self.path!r}: {exc}") from exc
        try:
            self._setup()
        except BaseException:
            self._conn.close()
            raise

    def _setup(self) -> None:
        conn = self._conn
        try:
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise JournalError(f"journal {self.path!r} cannot use WAL mode (got {mode!r})")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA trusted_schema=OFF")
            conn.execute("BEGIN IMMEDIATE")  # takes the exclusive lock, held until close
            tables = {
                row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if not tables:
                # Not executescript: it would commit, and the lock must stay held.
                for statement in (_SCHEMA + _APPEND_ONLY).split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO meta VALUES ('format', ?), ('version', ?)", (_FORMAT, _VERSION)
                )
            else:
                self._check_meta(tables)
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise JournalLocked(
                    f"journal {self.path!r} is held open by another ledger"
                ) from exc
            raise JournalError(f"journal {self.path!r}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise JournalCorrupt(f"{self.path!r} is not a ledger journal: {exc}") from exc

    def _check_meta(self, tables: set[str]) -> None:
        if not {"meta", *_TABLES} <= tables:
            raise JournalCorrupt(f"{self.path!r} is not a ledger journal (missing tables)")
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != _FORMAT:
            raise JournalCorrupt(f"{self.path!r} is not a ledger journal")
        if meta.get("version") != _VERSION:
            raise JournalCorrupt(
                f"journal {self.path!r} has version {meta.get('version')!r}; this ledger "
                f"reads version {_VERSION}"
            )

    # -- writing ----------------------------------------------------------------------

    def write(
        self, event: AuditEvent, record: OpRecord | None, terminal: TerminalRow | None
    ) -> None:
        """Append one transition; outside a batch it is committed (fsync'd) on return."""
        conn = self._conn
        try:
            if self._depth == 0:
                conn.execute("BEGIN")
            if record is not None:
                conn.execute(
                    _INSERT_OP,
                    (
                        record.op_id,
                        record.tool,
                        record.call_index,
                        record.idempotency_key,
                        record.format,
                        record.input,
                        record.max_attempts,
                        record.max_output_bytes,
                        record.deadline_wall,
                        None if record.stream is None else _encode(record.stream).decode(),
                    ),
                )
            conn.execute(_INSERT_EVENT, (*event.fields(), event.hash))
            if terminal is not None:
                conn.execute(_INSERT_RESULT, (event.seq, event.op_id, *terminal))
            if self._depth == 0:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._abandon()
            raise JournalFailed(f"journal write failed: {exc}") from exc

    def begin(self) -> None:
        if self._depth == 0:
            try:
                self._conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise JournalFailed(f"journal write failed: {exc}") from exc
        self._depth += 1

    def commit(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._abandon()
                raise JournalFailed(f"journal commit failed: {exc}") from exc

    def _abandon(self) -> None:
        self._depth = 0
        # The ledger is poisoned either way; reopening the journal recovers.
        with contextlib.suppress(sqlite3.Error):
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")

    # -- reading ----------------------------------------------------------------------

    def events(self) -> Iterator[AuditEvent]:
        # Plain loops, not ``yield from``: closing an abandoned generator must not touch a
        # cursor whose connection may already be closed.
        for row in self._conn.execute("SELECT * FROM events ORDER BY seq"):
            yield _event(row)

    def records(self) -> Iterator[OpRecord]:
        for row in self._conn.execute("SELECT * FROM operations ORDER BY op_id"):
            yield _record(row)

    def terminals(self) -> Iterator[tuple[int, int, str, bytes | None]]:
        """``(seq, op_id, kind, body)`` for every terminal event, in chain order."""
        cursor = self._conn.execute("SELECT seq, op_id, kind, body FROM results ORDER BY seq")
        for row in cursor:  # noqa: UP028 (see events(): no yield from a cursor)
            yield row

    def record(self, op_id: int) -> OpRecord | None:
        row = self._conn.execute("SELECT * FROM operations WHERE op_id=?", (op_id,)).fetchone()
        return None if row is None else _record(row)

    def terminal(self, op_id: int) -> tuple[AuditEvent, bytes | None] | None:
        """The terminal event of ``op_id`` and its result body, if it has ended."""
        row = self._conn.execute("SELECT seq, body FROM results WHERE op_id=?", (op_id,)).fetchone()
        if row is None:
            return None
        event = self._conn.execute("SELECT * FROM events WHERE seq=?", (row[0],)).fetchone()
        if event is None:
            raise JournalCorrupt(f"operation {op_id}: terminal event {row[0]} is missing")
        return _event(event), row[1]

    def checkpoint(self) -> Checkpoint | None:
        """Where the journal starts, if it was compacted."""
        row = self._conn.execute("SELECT value FROM meta WHERE key='checkpoint'").fetchone()
        if row is None:
            return None
        try:
            return _decode_checkpoint(row[0])
        except msgspec.DecodeError as exc:
            raise JournalCorrupt(f"journal {self.path!r}: malformed checkpoint") from exc

    def spans(self) -> list[tuple[int, int, int]]:
        """``(op_id, first seq, last seq)`` of every operation in the journal (local
        calls of scripts, op id 0, are no operation)."""
        return self._conn.execute(
            "SELECT op_id, MIN(seq), MAX(seq) FROM events WHERE op_id>0 GROUP BY op_id "
            "ORDER BY op_id"
        ).fetchall()

    def call_counts(self, up_to_op: int) -> dict[str, int]:
        """Each tool's highest call index among the operations up to ``up_to_op``."""
        rows = self._conn.execute(
            "SELECT tool, MAX(call_index) FROM operations WHERE op_id<=? GROUP BY tool",
            (up_to_op,),
        )
        return dict(rows.fetchall())

    def local_counts(self, up_to_seq: int) -> dict[str, int]:
        """Each local tool's highest call index among the events up to ``up_to_seq``,
        keyed as the ledger keeps them (``local:NAME``)."""
        rows = self._conn.execute(
            "SELECT tool, MAX(call_index) FROM events WHERE op_id=0 AND kind='local_call' "
            "AND seq<=? GROUP BY tool",
            (up_to_seq,),
        )
        return {LOCAL_CALLS + str(tool): int(count) for tool, count in rows.fetchall()}

    def hash_of(self, seq: int) -> str | None:
        row = self._conn.execute("SELECT hash FROM events WHERE seq=?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def prune(self, checkpoint: Checkpoint) -> tuple[int, list[tuple[str, str]]]:
        """Remove events and results up to ``checkpoint.seq`` and operations up to
        ``checkpoint.last_op_id``, and record the checkpoint, in one transaction.
        Returns the events removed and the ``(tool, idempotency_key)`` of each operation
        removed. The caller has checked that no operation has events on both sides of
        the checkpoint, and that no batch is open."""
        conn = self._conn
        try:
            conn.execute("BEGIN")
            for table in _TABLES:
                conn.execute(f"DROP TRIGGER {table}_no_delete")
            events = conn.execute("DELETE FROM events WHERE seq<=?", (checkpoint.seq,)).rowcount
            conn.execute("DELETE FROM results WHERE seq<=?", (checkpoint.seq,))
            removed = conn.execute(
                "SELECT tool, idempotency_key FROM operations WHERE op_id<=? ORDER BY op_id",
                (checkpoint.last_op_id,),
            ).fetchall()
            conn.execute("DELETE FROM operations WHERE op_id<=?", (checkpoint.last_op_id,))
            for table in _TABLES:
                conn.execute(_append_only(table, "delete"))
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('checkpoint', ?)",
                (_encode_checkpoint(checkpoint).decode(),),
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._abandon()
            raise JournalFailed(f"journal compaction failed: {exc}") from exc
        return events, [(str(tool), str(key)) for tool, key in removed]

    def vacuum(self) -> None:
        """Give the space of removed rows back to the file system."""
        try:
            self._conn.execute("VACUUM")  # written through the log, then
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file
        except sqlite3.Error as exc:
            raise JournalFailed(f"journal vacuum failed: {exc}") from exc

    def close(self) -> None:
        self._conn.close()
