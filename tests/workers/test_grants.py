"""What the host grants, and the strict reading of a worker's (untrusted) description."""

from __future__ import annotations

import dataclasses

import pytest

from supervisor.ledger import StreamPolicy, ToolPolicy
from supervisor.workers.grants import (
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_STREAM,
    UNLIMITED_CALLS,
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


def test_explicit_policies_change_what_they_name_and_must_match_what_is_served() -> None:
    served = [ToolSpec("a", "text", True), ToolSpec("b", "json", True)]
    mine = ToolPolicy("a", max_calls=3, max_input_bytes=10)
    policies = merge_policies(served, [mine])
    assert policies["a"] == dataclasses.replace(
        default_policy("a", "text"), max_calls=3, max_input_bytes=10
    )
    assert policies["b"] == default_policy("b", "json")
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


def test_one_override_leaves_every_other_default_of_a_described_tool() -> None:
    """Issue 18: ``ToolPolicy("text.upper", max_attempts=2)`` used to bring ToolPolicy's
    own defaults along (one call ever, 16 KiB of input, no stream)."""
    served = [ToolSpec("text.upper", "text", True), ToolSpec("progress", "json", True)]
    policies = merge_policies(
        served, [ToolPolicy("text.upper", max_attempts=2), ToolPolicy("progress", deadline=5)]
    )
    upper, progress = policies["text.upper"], policies["progress"]
    assert upper == dataclasses.replace(default_policy("text.upper", "text"), max_attempts=2)
    assert upper.max_calls == UNLIMITED_CALLS and upper.stream == DEFAULT_STREAM
    assert progress == dataclasses.replace(default_policy("progress", "json"), deadline=5)
    assert progress.format == "json"  # the format was not named: the described one
    # what is named stands, even where it equals ToolPolicy's own default
    strict = merge_policies(served, [ToolPolicy("progress", "json", max_calls=1, stream=None)])
    assert strict["progress"].max_calls == 1 and strict["progress"].stream is None
    assert strict["progress"].max_input_bytes == DEFAULT_MAX_INPUT_BYTES


def test_a_policy_knows_the_fields_it_was_given() -> None:
    assert ToolPolicy("a").named == {"name"}
    assert ToolPolicy("a", "json", max_calls=2).named == {"name", "format", "max_calls"}
    assert dataclasses.replace(ToolPolicy("a"), max_calls=2).named >= {"max_calls", "stream"}
    assert ToolPolicy("a", max_calls=2) == ToolPolicy("a", "text", max_calls=2)  # not compared
