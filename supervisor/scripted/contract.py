"""The seams between the three rooms of scripted orchestration.

* the language core (parser, interpreter, shell builtins) runs a script and dispatches
  every simple command that is not a shell builtin or function through a command table;
* the text tools (jq, grep, sed, awk, ...) are entries of that table;
* the tool surface (``ToolDef`` tools, ``help``, ``discover``) adds more entries and wraps
  the whole in ``ScriptedTool``.

A command sees its arguments (without its own name) and its stdin, never the shell's
state, the filesystem or a process. That keeps every command a pure function of its input,
testable on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(slots=True)
class CommandResult:
    """What one command produced. ``stdout``/``stderr`` are passed through verbatim."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


#: A command: ``(args, stdin) -> CommandResult``, sync or async. ``args`` excludes the
#: command's own name. ``stdin`` is None when nothing is piped or redirected into it,
#: and ``""`` for an empty pipe or ``</dev/null``.
Command = Callable[[list[str], "str | None"], "CommandResult | Awaitable[CommandResult]"]

#: The table the interpreter consults for a simple command name.
CommandTable = Mapping[str, Command]

#: A command may carry ``reads_stdin(args) -> bool``: False when, with these arguments,
#: it reads no standard input (``jq -n``, ``seq``, ``awk 'BEGIN {...}'``). The interpreter
#: then passes None and leaves the input to the commands after it, as bash does (``while
#: read`` keeps its lines). A command without it reads all of its input.
READS_STDIN = "reads_stdin"

#: The ``time.monotonic()`` deadline of the execution in progress, set by the engine for
#: the duration of ``run_script``. Commands that wait (async tool callbacks) run under it;
#: None outside an execution or when it has no timeout.
execution_deadline: ContextVar[float | None] = ContextVar("execution_deadline", default=None)


@dataclass(frozen=True, slots=True)
class ExecutionLimits:
    """Hard limits of one execution (reference-bashkit.md section 4.3).

    Every limit aborts the whole execution with
    ``resource limit exceeded: <what> (<limit>)``: exit 1, stdout discarded, ``error`` set.
    """

    max_commands: int = 10_000
    max_loop_iterations: int = 10_000
    max_total_loop_iterations: int = 1_000_000
    max_function_depth: int = 100
    max_subst_depth: int = 32
    max_subshell_depth: int = 32
    timeout_seconds: float = 30.0
    max_stdout_bytes: int = 1_048_576
    max_stderr_bytes: int = 1_048_576
    max_input_bytes: int = 10_000_000
    max_ast_depth: int = 100
    max_parser_operations: int = 100_000
    #: Largest string a variable, word or pipe may hold: memory stays bounded.
    max_value_bytes: int = 10_000_000
    max_background_jobs: int = 64
    #: One budget for everything the script holds and builds (variables, arrays,
    #: expansions, pipes, tool outputs, arithmetic and parse work), in bytes.
    max_memory_bytes: int = 64 * 1024 * 1024


@dataclass(slots=True)
class ExecResult:
    """The result of one script execution (bashkit's ``ExecResult`` fields)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    error: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    final_env: dict[str, str] | None = None

    @property
    def success(self) -> bool:
        return self.exit_code == 0 and self.error is None

    def to_dict(self) -> dict[str, object]:
        return {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "error": self.error,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "final_env": self.final_env,
        }


@dataclass(slots=True)
class ScriptRequest:
    """Everything the language core needs to run one script.

    The engine entry point (owned by the language core) is::

        async def run_script(request: ScriptRequest) -> ExecResult

    It works under trio and asyncio alike (it uses anyio), and it never raises for
    anything the script does: parse errors, limits and timeouts become an ``ExecResult``.
    """

    script: str
    commands: CommandTable = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    limits: ExecutionLimits = field(default_factory=ExecutionLimits)
    #: Names in ``commands`` that override a shell builtin of the same name (a tool named
    #: ``echo`` replaces ``echo``). Text tools never override shell builtins.
    overrides: frozenset[str] = frozenset()
    #: A per-request wall deadline (``timeout_ms`` of a tool request): exit 124 with
    #: ``sandvisor: execution timed out after {secs:.1f}s``; None for no such deadline.
    request_timeout_seconds: float | None = None
