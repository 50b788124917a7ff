"""Background jobs: ``cmd &`` runs concurrently, ``wait`` collects; output is flushed per
job and in job order, never interleaved."""

from __future__ import annotations

import anyio
from language_support import run

from supervisor.scripted.contract import CommandResult


async def nap(args: list[str], stdin: str | None) -> CommandResult:
    """Sleeps args[0] seconds, then prints args[1:] (one word per line)."""
    await anyio.sleep(float(args[0]))
    return CommandResult(stdout="".join(f"{a}\n" for a in args[1:]))


class Overlap:
    """A `nap` that counts how many of its calls were in flight at once."""

    def __init__(self) -> None:
        self.now = self.most = 0

    async def __call__(self, args: list[str], stdin: str | None) -> CommandResult:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            return await nap(args, stdin)
        finally:
            self.now -= 1


async def test_jobs_run_concurrently() -> None:
    overlap = Overlap()
    script = "nap 0.2 a & nap 0.2 b & nap 0.2 c & wait; echo done"
    result = await run(script, {"nap": overlap})
    assert result.stdout == "a\nb\nc\ndone\n"
    assert overlap.most == 3  # all three were in flight together


async def test_output_is_in_job_order_not_completion_order() -> None:
    result = await run("nap 0.2 slow1 slow2 & nap 0.01 fast & wait", {"nap": nap})
    assert result.stdout == "slow1\nslow2\nfast\n"


async def test_job_output_goes_where_wait_is() -> None:
    result = await run("nap 0.01 job & echo parent; wait; echo after", {"nap": nap})
    assert result.stdout == "parent\njob\nafter\n"


async def test_unwaited_jobs_are_collected_at_the_end() -> None:
    result = await run("nap 0.05 late & echo first", {"nap": nap})
    assert result.stdout == "first\nlate\n"


async def test_wait_for_a_pid_returns_its_status() -> None:
    script = "(exit 3) & p=$!; nap 0.01 x & wait $p; echo status=$?; wait; echo all=$?"
    result = await run(script, {"nap": nap})
    assert result.stdout == "status=3\nx\nall=0\n"


async def test_wait_for_unknown_pid() -> None:
    result = await run("wait 4242; echo $?")
    assert result.stdout == "127\n"
    assert "not a child of this shell" in result.stderr


async def test_job_runs_in_a_copy_of_the_shell() -> None:
    result = await run("x=1; { x=2; echo in $x; } & wait; echo out $x")
    assert result.stdout == "in 2\nout 1\n"


async def test_background_loop_of_tool_calls() -> None:
    overlap = Overlap()
    script = "for i in 1 2 3 4 5; do nap 0.2 item$i & done; wait"
    result = await run(script, {"nap": overlap})
    assert result.stdout == "".join(f"item{i}\n" for i in range(1, 6))
    assert overlap.most == 5


async def test_jobs_inside_command_substitution_are_captured() -> None:
    result = await run('x=$(nap 0.01 inner & echo outer); echo "[$x]"', {"nap": nap})
    assert result.stdout == "[outer\ninner]\n"


async def test_a_limit_in_a_job_aborts_the_execution() -> None:
    result = await run("{ for ((;;)); do :; done; } & wait; echo never", max_commands=200)
    assert result.exit_code == 1
    assert result.error == "resource limit exceeded: maximum command count exceeded (200)"
    assert result.stdout == ""


async def test_job_stderr_is_kept() -> None:
    result = await run("{ echo oops >&2; } & wait")
    assert result.stderr == "oops\n"
