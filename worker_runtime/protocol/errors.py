"""The protocol's exception family.

Every fatal failure is a `ProtocolError` whose subclass (and `code`) says which rule broke,
so the host can poison a session and log why. `Refused` is different: it is raised by a
*sender* that was asked to produce a frame its peer would have to reject; nothing was
sealed, no state changed, and the session lives on.
"""

from __future__ import annotations

from typing import ClassVar


class ProtocolError(Exception):
    """A fatal protocol failure: the session that raised it is dead for good."""

    code: ClassVar[str] = "protocol_error"


# -- bootstrap preamble (section 2): the worker exits 3 on any of these ------------------


class BootstrapError(ProtocolError):
    code = "bad_bootstrap"


class BadMagic(BootstrapError):
    code = "bad_magic"


class BadLength(BootstrapError):
    code = "bad_length"


class BadSessionId(BootstrapError):
    code = "bad_id"


class WeakKey(BootstrapError):
    code = "weak_key"


class TruncatedBootstrap(BootstrapError):
    code = "truncated_bootstrap"


# -- lines and frames (section 4, receiver checks 1-8) -----------------------------------


class LineTooLong(ProtocolError):
    code = "line_too_long"


class TruncatedLine(ProtocolError):
    """EOF in the middle of a line."""

    code = "truncated_line"


class MalformedFrame(ProtocolError):
    """No space between TAG and BODY, or a LF inside the line."""

    code = "malformed_frame"


class BadTag(ProtocolError):
    """The tag is not 64 lowercase hex characters."""

    code = "bad_tag"


class TagMismatch(ProtocolError):
    code = "tag_mismatch"


class MalformedBody(ProtocolError):
    """Not strict JSON of a known kind: bad JSON, unknown field, wrong type, bad id."""

    code = "malformed_body"


class BadVersion(ProtocolError):
    code = "bad_version"


class WrongSession(ProtocolError):
    code = "wrong_session"


class BadSequence(ProtocolError):
    code = "bad_sequence"


# -- state (section 7 and 9, receiver check 10) ------------------------------------------


class StateViolation(ProtocolError):
    """An authentic frame that is not valid in the current state."""

    code = "state_violation"


class UnexpectedMessage(StateViolation):
    """A kind that is not valid now: e.g. `invoke` before `open`, a second `ready`."""

    code = "unexpected_message"


class BadGrant(StateViolation):
    code = "bad_grant"


class ToolNotServed(StateViolation):
    code = "tool_not_served"


class BadToolSpec(StateViolation):
    """A tool description breaks section 6's rules (a schema on a text tool, too large)."""

    code = "bad_tool_spec"


class UnknownTool(StateViolation):
    code = "unknown_tool"


class FormatMismatch(StateViolation):
    code = "format_mismatch"


class PayloadTooDeep(StateViolation):
    code = "payload_too_deep"


class InputTooLarge(StateViolation):
    code = "input_too_large"


class OutputTooLarge(StateViolation):
    code = "output_too_large"


class CallBudgetExhausted(StateViolation):
    code = "call_budget_exhausted"


class DuplicateId(StateViolation):
    code = "duplicate_id"


class TooManyInFlight(StateViolation):
    code = "too_many_in_flight"


class IdCapacityExhausted(StateViolation):
    code = "id_capacity_exhausted"


class UnknownRequest(StateViolation):
    """A rid that is not in flight (or, on the worker, never seen)."""

    code = "unknown_request"


class CancelMismatch(StateViolation):
    """A cancel or cancel_result whose fields do not match the call or the cancel."""

    code = "cancel_mismatch"


class CancelRepeated(StateViolation):
    code = "cancel_repeated"


class CancelOutOfOrder(StateViolation):
    """A cancel outcome that the matrix of section 7 forbids in this state."""

    code = "cancel_out_of_order"


class StreamViolation(StateViolation):
    code = "stream_violation"


class BadMessageText(StateViolation):
    """An error or failed message outside 1..4,096 UTF-8 bytes."""

    code = "bad_message_text"


class CloseWhileInFlight(StateViolation):
    code = "close_while_in_flight"


class UnexpectedEof(StateViolation):
    """The peer's stream ended without a clean close."""

    code = "unexpected_eof"


class ConnectionDead(ProtocolError):
    """The connection already failed; it accepts nothing more."""

    code = "connection_dead"


# -- non-fatal --------------------------------------------------------------------------


class Refused(Exception):
    """A sender refused to produce a frame the receiver would have to reject.

    Nothing was sealed and no state changed. `code` names the rule (the same code the
    receiver's fatal error would carry); `violation` is that error when there is one.
    """

    def __init__(self, code: str, message: str, violation: ProtocolError | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.violation = violation

    @classmethod
    def because(cls, violation: ProtocolError) -> Refused:
        return cls(violation.code, str(violation), violation)
