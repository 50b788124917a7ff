"""Properties: tampering always fails closed, garbage only raises ProtocolError, and the two
connections never disagree whatever the interleaving of frames in flight."""

from __future__ import annotations

import contextlib
import hmac
from collections import deque
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proto_fixtures import GRANTS, KEYS, SID, forge

from worker_runtime.protocol.errors import ProtocolError, Refused
from worker_runtime.protocol.framing import LineReader, Opener, Sealer
from worker_runtime.protocol.host import HostConnection
from worker_runtime.protocol.messages import (
    Cancel,
    CancelResult,
    Chunk,
    HostMessage,
    Invoke,
    JsonPayload,
    Ping,
    Reconciled,
    Result,
    Succeeded,
    TextPayload,
    WorkerMessage,
)
from worker_runtime.protocol.worker import (
    CancelReceived,
    InvokeReceived,
    Opened,
    PingReceived,
    ReconcileReceived,
    WorkerConnection,
)

SAMPLE_LINES = [
    Sealer(KEYS.host, SID).seal(Ping, nonce="n")[:-1],
    Sealer(KEYS.host, SID).seal(
        Invoke,
        rid="r1",
        tool="json.echo",
        payload=JsonPayload({"k": ["v", 1, None]}),
        attempt=1,
        idempotency_key="op",
        deadline_ms=10,
    )[:-1],
    Sealer(KEYS.host, SID).seal(Cancel, cid="c2", rid="r1", tool="t")[:-1],
]
WORKER_LINES = [
    Sealer(KEYS.worker, SID).seal(Result, rid="r1", payload=TextPayload("héllo"))[:-1],
    Sealer(KEYS.worker, SID).seal(Chunk, rid="r1", index=1, text="x")[:-1],
    Sealer(KEYS.worker, SID).seal(
        Reconciled, rid="q1", tool="t", operation_key="k", status=Succeeded(TextPayload("x"))
    )[:-1],
    Sealer(KEYS.worker, SID).seal(
        CancelResult, cid="c1", rid="r1", tool="t", outcome="acknowledged"
    )[:-1],
]


@given(
    which=st.integers(0, len(SAMPLE_LINES) + len(WORKER_LINES) - 1),
    position=st.integers(0, 10_000),
    byte=st.integers(0, 255),
    how=st.sampled_from(["replace", "insert", "delete"]),
)
def test_any_single_byte_change_fails_and_changes_nothing(
    which: int, position: int, byte: int, how: str
) -> None:
    lines = SAMPLE_LINES + WORKER_LINES
    line = lines[which]
    is_host = which < len(SAMPLE_LINES)
    opener: Opener[Any] = Opener(
        KEYS.host if is_host else KEYS.worker, SID, HostMessage if is_host else WorkerMessage
    )
    i = position % len(line)
    if how == "replace":
        if line[i] == byte:
            byte = (byte + 1) % 256
        bad = line[:i] + bytes([byte]) + line[i + 1 :]
    elif how == "insert":
        bad = line[:i] + bytes([byte]) + line[i:]
    else:
        bad = line[:i] + line[i + 1 :]
    try:
        opener.open(bad)
    except ProtocolError:
        pass
    else:
        raise AssertionError(f"a changed line opened: {bad!r}")
    assert opener.next_seq == 1
    assert opener.open(line).seq == 1  # the correct line still opens afterwards


@given(st.binary(min_size=1, max_size=200), st.text(max_size=3000))
def test_a_frame_tag_is_the_hmac_sha256_of_its_body(key: bytes, text: str) -> None:
    # the precomputed pads (`FrameMac`), as seal and open use them inline, against hmac
    line = Sealer(key, SID).seal(Chunk, rid="r1", index=1, text=text)[:-1]
    tag, _, body = line.partition(b" ")
    assert tag == hmac.new(key, body, "sha256").hexdigest().encode()
    assert Opener(key, SID, WorkerMessage).open(line).seq == 1


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=200), max_size=20), st.integers(1, 300))
def test_random_bytes_into_the_line_reader_raise_only_protocol_errors(
    chunks: list[bytes], limit: int
) -> None:
    reader = LineReader(limit=limit)
    opener: Opener[Any] = Opener(KEYS.host, SID, HostMessage)
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while (line := reader.next_line()) is not None:
                assert len(line) <= limit and b"\n" not in line
                with contextlib.suppress(ProtocolError):
                    opener.open(line)
            assert reader.buffered <= limit
        reader.feed_eof()
        while reader.next_line() is not None:
            pass
    except ProtocolError:
        pass


@given(st.binary(max_size=400))
def test_random_bytes_into_the_frame_opener_raise_only_protocol_errors(data: bytes) -> None:
    for key, kinds in ((KEYS.host, HostMessage), (KEYS.worker, WorkerMessage)):
        opener: Opener[Any] = Opener(key, SID, kinds)
        for line in (data, forge(key, data), b"0" * 64 + b" " + data):
            with contextlib.suppress(ProtocolError):
                opener.open(line)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["r1", "t", "text", "", "X Y"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["format", "value", "tool", "a"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    kind=st.sampled_from(["invoke", "cancel", "open", "ping", "close", "reconcile", "result"]),
    fields=st.dictionaries(
        st.sampled_from(["rid", "tool", "payload", "cid", "nonce", "grants", "attempt", "x"]),
        JSON,
        max_size=5,
    ),
)
def test_authentic_bodies_of_any_shape_raise_only_protocol_errors(
    kind: str, fields: dict[str, Any]
) -> None:
    import msgspec

    body = msgspec.json.encode({"type": kind, "v": 1, "sid": SID, "seq": 1, **fields})
    worker = WorkerConnection(SID, KEYS, {g.tool: g.format for g in GRANTS})
    with contextlib.suppress(ProtocolError):
        worker.receive(forge(KEYS.host, body))


# -- the two connections agree, whatever the interleaving -------------------------------

TOOLS = [g.tool for g in GRANTS]
VALUES = {"text.upper": "hi", "progress.count": "3", "json.echo": {"a": [1]}}


class _Session:
    """Both real connections with two in-flight queues between them."""

    def __init__(self) -> None:
        self.host = HostConnection(SID, KEYS, GRANTS, max_in_flight=3)
        self.worker = WorkerConnection(SID, KEYS, {g.tool: g.format for g in GRANTS})
        self.to_worker: deque[bytes] = deque()
        self.to_host: deque[bytes] = deque()
        self.running: list[str] = []  # rids the worker still has to finish
        self.host_events: list[Any] = []
        self.to_worker.append(self.host.open())

    def send_to_host(self, data: bytes) -> None:
        self.to_host.extend(line + b"\n" for line in data[:-1].split(b"\n"))

    def deliver_to_worker(self) -> None:
        event = self.worker.receive(self.to_worker.popleft()[:-1])
        if isinstance(event, Opened):
            self.send_to_host(self.worker.ready("t", "0"))
        elif isinstance(event, InvokeReceived):
            self.running.append(event.rid)
        elif isinstance(event, CancelReceived) and event.finished:
            self.send_to_host(self.worker.too_late(event.cid))
        elif isinstance(event, PingReceived):
            self.send_to_host(self.worker.pong(event.nonce))
        elif isinstance(event, ReconcileReceived):
            self.send_to_host(self.worker.reconciled(event.rid))

    def deliver_to_host(self) -> None:
        self.host_events.append(self.host.receive(self.to_host.popleft()[:-1]))

    def host_action(self, action: str, pick: int) -> None:
        try:
            if action == "invoke":
                tool = TOOLS[pick % len(TOOLS)]
                _, line = self.host.invoke(tool, VALUES[tool], idempotency_key=f"k{pick % 4}")
            elif action == "cancel" and self.host.in_flight:
                _, line = self.host.cancel(self.host.in_flight[pick % len(self.host.in_flight)])
            elif action == "ping":
                _, line = self.host.ping()
            elif action == "reconcile":
                _, line = self.host.reconcile(TOOLS[pick % len(TOOLS)], f"k{pick % 4}")
            else:
                return
        except Refused:
            return
        self.to_worker.append(line)

    def worker_action(self, action: str, pick: int) -> None:
        if not self.running:
            return
        rid = self.running[pick % len(self.running)]
        call = self.worker.call(rid)
        assert call is not None
        if action == "chunk":
            data = self.worker.chunk(rid, "x" * (pick % 7))
            if data is not None:
                self.send_to_host(data)
            return
        if action == "acknowledge" and call.cancel == "requested":
            data = self.worker.acknowledge(rid)
        elif action == "unsupported" and call.cancel == "requested":
            self.send_to_host(self.worker.unsupported(rid))
            return
        elif action == "error":
            data = self.worker.error(rid, "adapter_error", "boom", retryable=pick % 2 == 0)
        else:
            value: Any = {"a": pick} if call.grant.format == "json" else "x" * (pick % 100)
            try:
                data = self.worker.result(rid, value)
            except Refused as exc:
                data = self.worker.error(rid, "output_too_large", str(exc))
        self.running.remove(rid)
        self.send_to_host(data)


ACTIONS = st.tuples(
    st.sampled_from(
        [
            "h:invoke",
            "h:cancel",
            "h:ping",
            "h:reconcile",
            "w:chunk",
            "w:result",
            "w:error",
            "w:acknowledge",
            "w:unsupported",
            "deliver_to_worker",
            "deliver_to_host",
        ]
    ),
    st.integers(0, 1000),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ACTIONS, max_size=80))
def test_host_and_worker_connections_never_disagree(actions: list[tuple[str, int]]) -> None:
    s = _Session()
    s.deliver_to_worker()
    s.deliver_to_host()
    for action, pick in actions:
        if action == "deliver_to_worker" and s.to_worker:
            s.deliver_to_worker()
        elif action == "deliver_to_host" and s.to_host:
            s.deliver_to_host()
        elif action.startswith("h:"):
            s.host_action(action[2:], pick)
        elif action.startswith("w:"):
            s.worker_action(action[2:], pick)
    # drain: deliver everything, finish every call, deliver again
    while s.to_worker or s.to_host or s.running:
        while s.to_worker:
            s.deliver_to_worker()
        for rid in list(s.running):
            s.worker_action("result", len(rid))
        while s.to_host:
            s.deliver_to_host()
    assert s.host.in_flight == () and s.worker.in_flight == ()
    assert not s.host.dead and not s.worker.dead
    s.to_worker.append(s.host.close())
    s.deliver_to_worker()
    s.worker.receive_eof()
    s.host.receive_eof()
