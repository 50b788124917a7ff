"""The stack machine for large expressions computes what the generated code computes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.scripted.errors import ShellError
from supervisor.scripted.shell import arithmetic
from supervisor.scripted.shell.arith_vm import compile_program
from supervisor.scripted.shell.arithmetic import ArithError, _binop, _compile_tree, _Parser
from supervisor.scripted.shell.state import Variables


class Env(Variables):
    def __init__(self) -> None:
        self.init_variables()


ATOMS = st.sampled_from(["0", "1", "7", "x", "y", "a[1]", "a[x]", "9223372036854775807", "010"])
UNARY = st.sampled_from(["-", "!", "~", "+"])
BINARY = st.sampled_from(
    [
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "<<",
        ">>",
        "<",
        ">",
        "<=",
        ">=",
        "==",
        "!=",
        "&",
        "^",
        "|",
        "&&",
        "||",
    ]
)
ASSIGN = st.sampled_from(["=", "+=", "-=", "*=", "<<=", "|="])


def expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(UNARY, inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, BINARY, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
            st.tuples(st.sampled_from(["x", "y", "a[2]"]), ASSIGN, inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.sampled_from(["x++", "--y", "a[1]++", "++a[x]"]),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}, {t[1]})"),
        )

    return st.recursive(ATOMS, extend, max_leaves=12)


def run(text: str, vm: bool) -> tuple[object, dict[str, object]]:
    env = Env()
    env.assign("x", "3")
    env.assign("y", "-5")
    env.assign_array("a", [(None, "4", False), (None, "6", False), (None, "8", False)])
    parser = _Parser(text)
    node = parser.comma()
    fn = compile_program(node, _compile_tree, _binop) if vm else _compile_tree(node)
    try:
        outcome: object = fn(env)
    except ArithError as exc:
        outcome = ("error", exc.message, exc.token)
    except ShellError as exc:  # a bad subscript (`a[y]` with y=-5): the same on both paths
        outcome = ("shell error", exc.message)
    state = {name: env.vars[name].value for name in ("x", "y", "a")}
    return outcome, state


@settings(max_examples=300, deadline=None)
@given(expressions())
def test_vm_agrees_with_generated_code(text: str) -> None:
    assert run(text, vm=True) == run(text, vm=False)


def test_long_expressions_run_on_the_vm_and_wrap() -> None:
    text = "+".join(["9223372036854775807"] * 5000)
    fn = arithmetic.compile_arith(text)
    assert fn.__class__.__name__ == "Program"
    assert fn(Env()) == (5000 * (2**63 - 1) + 2**63) % 2**64 - 2**63
