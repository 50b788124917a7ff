"""The errors of the sandbox: each says what went wrong and, where it can, how to fix it.

Everything here fails closed: a launch that cannot get the sandbox its policy asks for
raises instead of running something weaker.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base class of every sandbox failure."""


class PolicyError(SandboxError, ValueError):
    """A `SandboxPolicy` or bind that is invalid as written (caught at construction)."""


class SandboxUnavailable(SandboxError):
    """The machine cannot give the policy what it asks for; nothing was started.

    ``missing`` names the feature, ``fix`` is the command or change that provides it.
    """

    def __init__(self, missing: str, fix: str, detail: str = "") -> None:
        self.missing = missing
        self.fix = fix
        self.detail = detail
        text = f"sandbox unavailable: {missing}"
        if detail:
            text += f" ({detail})"
        super().__init__(f"{text}; fix: {fix}")


class LaunchError(SandboxError):
    """The sandbox could not be started (bwrap or our own set-up step failed)."""


class ContainmentError(SandboxError):
    """Teardown could not prove that nothing of the sandbox survives."""
