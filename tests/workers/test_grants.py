"""What the host grants, and the strict reading of a worker's (untrusted) description."""

from __future__ import annotations

import pytest

from supervisor.ledger import StreamPolicy, ToolPolicy
from supervisor.workers.grants import (
    DEFAULT_STREAM,
    DescribeError,
    default_policy,
    grant_for,
    merge_policies,
    parse_description,
)
from worker_runtime.protocol.messages import ToolSpec

NEEDS_SANDBOX = False


def test_a_description_is_parsed_strictly() -> None:
    tools = parse_description(b'{"tools":[{"name":"a.b","format":"json","cancellable":false}]}\n')
    assert tools == [ToolSpec("a.b", "json", False)]
    line = (
        b'{"tools":[{"name":"a","format":"json","description":"adds","alias":"Add",'
        b'"schema":{"type":"object","required":["x"]}}]}\n'
    )
    assert parse_description(line) == [
        ToolSpec("a", "json", True, "adds", {"type": "object", "required": ["x"]}, "Add")
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b'{"tools":[]}',  # no line feed
        b'{"tools":[]}\n{"tools":[]}\n',  # two lines
        b'{"tools":[{"name":"A","format":"text","cancellable":true}]}\n',  # bad id
        b'{"tools":[{"name":"a","format":"xml","cancellable":true}]}\n',
        b'{"tools":[{"name":"a","format":"text","cancellable":true,"x":1}]}\n',  # unknown
        b'{"tools":[{"name":"a","format":"text","cancellable":1}]}\n',
        b'{"tools":[{"name":"a","format":"text","cancellable":true},'
        b'{"name":"a","format":"text","cancellable":true}]}\n',  # twice
        b'{"tools":[]' + b" " * 300_000 + b"}\n",  # too large
        b'{"tools":[{"name":"a","format":"text","schema":{"type":"object"}}]}\n',  # text
        b'{"tools":[{"name":"a","format":"json","schema":[]}]}\n',  # not an object
        b'{"tools":[{"name":"a","format":"json","description":"' + b"d" * 9000 + b'"}]}\n',
        b'{"tools":[{"name":"a","format":"json","schema":'
        + b'{"a":' * 40
        + b"1"
        + b"}" * 40
        + b"}]}\n",  # nested deeper than 32
        b"not json\n",
    ],
)
def test_bad_descriptions_are_refused(data: bytes) -> None:
    with pytest.raises(DescribeError):
        parse_description(data)


def test_explicit_policies_win_and_must_match_what_is_served() -> None:
    served = [ToolSpec("a", "text", True), ToolSpec("b", "json", True)]
    mine = ToolPolicy("a", max_calls=3, max_input_bytes=10)
    policies = merge_policies(served, [mine])
    assert policies["a"] is mine and policies["b"] == default_policy("b", "json")
    with pytest.raises(ValueError, match="do not serve"):
        merge_policies(served, [ToolPolicy("c")])
    with pytest.raises(ValueError, match="served as json"):
        merge_policies(served, [ToolPolicy("b", format="text")])
    with pytest.raises(ValueError, match="twice"):
        merge_policies(None, [mine, mine])
    assert merge_policies(None, [mine]) == {"a": mine}


def test_grants_carry_the_policy_limits_and_the_session_budget() -> None:
    stream = StreamPolicy(max_chunks=3, max_chunk_bytes=5, max_total_bytes=9)
    grant = grant_for(ToolPolicy("a", max_input_bytes=7, max_output_bytes=8, stream=stream), 42)
    assert (grant.tool, grant.format, grant.max_calls) == ("a", "text", 42)
    assert (grant.max_input_bytes, grant.max_output_bytes) == (7, 8)
    assert grant.stream is not None and grant.stream.max_chunks == 3
    assert grant_for(ToolPolicy("a"), 1).stream is None
    assert default_policy("x", "text").stream == DEFAULT_STREAM
