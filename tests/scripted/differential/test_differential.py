"""Every case of ``cases_*.txt``: sandvisor's stdout and exit status equal /bin/bash's
(or, for a documented logic-only difference, the expectations written in the case)."""

from __future__ import annotations

import pytest
from differential_harness import Case, all_cases, run_bash, run_sandvisor

CASES = all_cases()


def test_suite_is_large_enough() -> None:
    assert len(CASES) >= 300, len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_case(case: Case) -> None:
    got = await run_sandvisor(case.script)
    assert "internal error" not in (got.error or ""), got.error
    if case.skip_reason is not None:
        assert (got.stdout, got.exit_code) == ("".join(case.expect_stdout), case.expect_exit), (
            f"stderr: {got.stderr!r}"
        )
        return
    want_stdout, want_status = run_bash(case.script)
    assert (got.stdout, got.exit_code) == (want_stdout, want_status), f"stderr: {got.stderr!r}"
