"""jq: jq 1.6's options, output format, error messages and exit statuses over libjq."""

from __future__ import annotations

import json

import pytest
from text_support import oracle, oracle_available, out, run

from supervisor.scripted.text_tools.jq_tool.command import run_jq
from supervisor.scripted.text_tools.jq_tool.output import format_number
from supervisor.scripted.text_tools.jq_tool.program import compile_wrapped

DOC = '{"name":"widget","tags":["a","b"],"dims":{"w":2,"h":3.5},"empty":{},"none":[]}'


def test_pretty_print_two_spaces_key_order_kept() -> None:
    assert out("jq", ".", stdin=DOC) == (
        '{\n  "name": "widget",\n  "tags": [\n    "a",\n    "b"\n  ],\n  "dims": {\n'
        '    "w": 2,\n    "h": 3.5\n  },\n  "empty": {},\n  "none": []\n}\n'
    )


def test_compact_tab_indent_and_sort_keys() -> None:
    doc = '{"b":1,"a":{"d":[],"c":{}}}'
    assert out("jq", "-c", ".", stdin=doc) == '{"b":1,"a":{"d":[],"c":{}}}\n'
    assert out("jq", "-S", "-c", ".", stdin=doc) == '{"a":{"c":{},"d":[]},"b":1}\n'
    assert out("jq", "--tab", ".", stdin="[1,[2]]") == "[\n\t1,\n\t[\n\t\t2\n\t]\n]\n"
    assert out("jq", "--indent", "1", ".", stdin="[1]") == "[\n 1\n]\n"
    assert out("jq", "--indent", "0", ".", stdin="[1,[2]]") == "[1,[2]]\n"
    # The last format option wins, as in jq 1.6.
    assert out("jq", "-c", "--tab", ".", stdin="[1]") == "[\n\t1\n]\n"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"), (1e100, "1e+100"), (0.1, "0.1"), (1e20, "1e+20"), (1e17, "1e+17"),
        (1e16, "1e+16"), (1e15, "1000000000000000"), (123456789012345678, "123456789012345680"),
        (1e-5, "1e-05"), (0.0001, "0.0001"), (1.5e300, "1.5e+300"), (3.14159, "3.14159"),
        (0.30000000000000004, "0.30000000000000004"), (1e-7, "1e-07"), (-2.5, "-2.5"),
        (12345678901234567890123, "12345678901234568000000"), (5e-324, "5e-324"),
        (1.5e16, "15000000000000000"), (1.5e17, "1.5e+17"), (-0.0, "-0"), (100000, "100000"),
    ],
)  # fmt: skip
def test_number_format_is_jq16(value: float, text: str) -> None:
    assert format_number(value) == text


def test_numbers_in_documents() -> None:
    doc = "[1.0, 1e1000, -1e1000, 100000000000000000000, 2.50, 1.5e-7]"
    assert out("jq", "-c", ".", stdin=doc) == (
        "[1,1.7976931348623157e+308,-1.7976931348623157e+308,1e+20,2.5,1.5e-07]\n"
    )


def test_number_literals_stringify_as_jq16() -> None:
    # libjq 1.8 would keep the literal text ("1.0", "2.50", "1E+17").
    assert out("jq", "-c", "map(tostring)", stdin="[1.0, 2.50, 1e17, 1e1000]") == (
        '["1","2.5","1e+17","1.7976931348623157e+308"]\n'
    )
    assert out("jq", "-r", '"\\(.p)"', stdin='{"p": 10.0}') == "10\n"


def test_string_escapes_unicode_and_ascii_output() -> None:
    doc = '"\\u0000\\u001f\\u007f é \\ud83d\\ude00 \\" \\\\ / \\b\\f\\n\\r\\t"'
    assert out("jq", ".", stdin=doc) == (
        '"\\u0000\\u001f\\u007f é 😀 \\" \\\\ / \\b\\f\\n\\r\\t"\n'
    )
    assert out("jq", "-a", ".", stdin='"é😀"') == '"\\u00e9\\ud83d\\ude00"\n'
    assert out("jq", "-r", "-a", ".", stdin='"é"') == '"\\u00e9"\n'


def test_raw_and_join_output() -> None:
    assert out("jq", "-r", '.a, "x\\ny"', stdin='{"a":1}') == "1\nx\ny\n"
    assert out("jq", "-j", '.a, "x", [1]', stdin='{"a":1}') == "1x[\n  1\n]"


def test_multiple_inputs_slurp_null_and_raw() -> None:
    assert out("jq", ".a", stdin='{"a":1}\n{"a":2} {"a":3}') == "1\n2\n3\n"
    assert out("jq", "-s", "-c", ".", stdin="1 2\n3") == "[1,2,3]\n"
    assert out("jq", "-s", "-c", ".", stdin="") == "[]\n"
    assert out("jq", "-n", "-c", "[inputs]", stdin="1 2 3") == "[1,2,3]\n"
    assert out("jq", "-c", "[., inputs]", stdin="1 2 3") == "[1,2,3]\n"
    assert out("jq", "-R", "-c", ".", stdin="a\nb") == '"a"\n"b"\n'
    assert out("jq", "-Rs", "-c", ".", stdin="a\nb\n") == '"a\\nb\\n"\n'
    assert out("jq", "-Rs", "-c", ".", stdin="") == '""\n'
    assert out("jq", "-n", "1", stdin="ignored") == "1\n"
    assert out("jq", ".", stdin="") == ""


def test_arguments() -> None:
    assert out("jq", "-c", "--arg", "x", "1", "--argjson", "y", '{"a":1}', "[$x, $y]",
               stdin="null") == '["1",{"a":1}]\n'  # fmt: skip
    assert out("jq", "-c", "$ARGS", "--args", "a", "b", stdin="null") == (
        '{"positional":["a","b"],"named":{}}\n'
    )
    assert out("jq", "-c", "$ARGS.positional", "--jsonargs", "1", "{}", stdin="null") == (
        "[1,{}]\n"
    )
    bad = run("jq", "--argjson", "y", "{", ".", stdin="1")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("jq: invalid JSON text passed to --argjson\n")


def test_arguments_do_not_recompile() -> None:
    # The compile cache lives in the process that runs the filter: the jq engine child
    # runs run_jq, and consecutive calls go to the same child (see test_jq_engine.py).
    compile_wrapped.cache_clear()
    for i in range(5):
        result = run_jq(["--arg", "id", str(i), "-r", "$id"], "null")
        assert (result.stdout, result.exit_code) == (f"{i}\n", 0)
        assert out("jq", "--arg", "id", str(i), "-r", "$id", stdin="null") == f"{i}\n"
    assert compile_wrapped.cache_info().misses == 1


def test_runtime_errors_and_last_input_status() -> None:
    r = run("jq", ".a", stdin="3")
    assert (r.stdout, r.exit_code) == ("", 5)
    assert r.stderr == 'jq: error (at <stdin>:0): Cannot index number with string "a"\n'
    # jq 1.6: the status is the last input's; earlier errors only print.
    r = run("jq", ".a", stdin='{"a":1}\n3\n{"a":4}\n')
    assert (r.stdout, r.exit_code) == ("1\n4\n", 0)
    assert r.stderr == 'jq: error (at <stdin>:2): Cannot index number with string "a"\n'
    r = run("jq", "-n", '"x" | error')
    assert (r.stderr, r.exit_code) == ("jq: error (at <unknown>): x\n", 5)
    r = run("jq", "error", stdin='{"a":[1]}')
    assert r.stderr == 'jq: error (at <stdin>:0) (not a string): {"a":[1]}\n'
    assert out("jq", 'try error("x") catch .', stdin="1") == '"x"\n'


def test_exit_status_option() -> None:
    assert run("jq", "-e", ".", stdin="null").exit_code == 1
    assert run("jq", "-e", ".", stdin="false").exit_code == 1
    assert run("jq", "-e", ".", stdin="0").exit_code == 0
    assert run("jq", "-e", "empty", stdin="1").exit_code == 4
    assert run("jq", "-e", ".", stdin="").exit_code == 0
    assert run("jq", "-e", "1,false", stdin="1 2").exit_code == 1


def test_parse_errors() -> None:
    r = run("jq", ".", stdin="1 {")
    assert (r.stdout, r.exit_code) == ("1\n", 4)
    assert r.stderr == "parse error: Unfinished JSON term at EOF at line 1, column 3\n"
    r = run("jq", "-s", ".", stdin="1 {")
    assert (r.stdout, r.exit_code) == ("", 4)
    r = run("jq", "-n", "-c", "[try inputs catch .]", stdin="1 {")
    assert r.stdout == '[1,"Unfinished JSON term at EOF at line 1, column 3"]\n'


def test_compile_errors_exit_3() -> None:
    r = run("jq", "-n", "foo")
    assert r.exit_code == 3
    assert r.stderr == (
        "jq: error: foo/0 is not defined at <top-level>, line 1:\nfoo\njq: 1 compile error\n"
    )
    r = run("jq", "-n", "1 +")
    assert r.exit_code == 3
    assert "syntax error, unexpected $end" in r.stderr


def test_usage_errors_exit_2() -> None:
    for args in (["--foo", "."], ["-Z", "."], ["--indent", "8", "."], ["--arg", "x"]):
        r = run("jq", *args, stdin="1")
        assert r.exit_code == 2, args
        assert r.stderr.startswith("jq: "), args
    assert out("jq", "--version") == "jq-1.6\n"
    assert out("jq", stdin="[1]") == "[\n  1\n]\n"  # no filter: "."


def test_halt_and_halt_error() -> None:
    assert run("jq", "halt_error", stdin='"bye\\n"').stderr == "bye\n"
    r = run("jq", "halt_error(3)", stdin='{"a":1}')
    assert (r.stderr, r.exit_code) == ('{"a":1}\n', 3)
    assert run("jq", "., halt", stdin="1 2").stdout == "1\n2\n"


def test_host_is_invisible() -> None:
    assert out("jq", "-c", "$ENV, env", stdin="null") == "{}\n{}\n"
    r = run("jq", 'import "a" as a; .', stdin="1")
    assert r.exit_code == 3
    assert "filesystem access disabled" in r.stderr
    r = run("jq", 'include "a"; .', stdin="1")
    assert r.exit_code == 3
    assert out("jq", "-c", "[debug, stderr]", stdin="1") == "[1,1]\n"
    assert out("jq", "-c", "get_search_list", stdin="1") == "[]\n"


def test_jq16_builtins_and_semantics() -> None:
    assert out("jq", "-c", "[leaf_paths]", stdin='{"a":1,"b":[2]}') == '[["a"],["b",0]]\n'
    assert out("jq", 'ltrimstr("a")', stdin="1") == "1\n"
    assert out("jq", "-c", "[limit(-1; 1, 2)]", stdin="null") == "[1,2]\n"
    assert out("jq", "input_filename", stdin="1") == '"<stdin>"\n'


def test_input_is_refused_with_advice() -> None:
    r = run("jq", "input", stdin="1 2")
    assert r.exit_code == 3
    assert "use inputs" in r.stderr


def test_output_limit() -> None:
    r = run("jq", "-n", '"0123456789" * 2000000')
    assert r.exit_code == 5
    assert "output limit exceeded" in r.stderr


CORPUS = [
    DOC,
    '"\\u00e9\\u4e2d\\ud83d\\ude00 \\u2028 \\u0000 \\t"',
    "[-0.5, 1e-320, 9007199254740993, -9007199254740993, 3.0, 1.25e+2, 0.000123]",
    '{"nested": {"deeper": {"deepest": [[], {}, [[]], [{}]]}}}',
    '[true, false, null, "", "\\\\", "\\"quoted\\""]',
    '{"k": 1, "k": 2, "": 3, "é": 4}',
    "[123456789.123456789, 1.7976931348623157e308, 2.2250738585072014e-308]",
    '42\n[1,2]\n"s"',
]


@pytest.mark.skipif(not oracle_available("jq"), reason="the jq 1.6 binary is not installed")
@pytest.mark.parametrize("doc", CORPUS)
@pytest.mark.parametrize("flags", [[], ["-c"], ["-S"], ["--tab"], ["-a"], ["-r", "-c"]])
def test_formatting_matches_jq_binary(doc: str, flags: list[str]) -> None:
    got = run("jq", *flags, ".", stdin=doc)
    assert (got.stdout, got.exit_code) == oracle("jq", [*flags, "."], doc)


@pytest.mark.skipif(not oracle_available("jq"), reason="the jq 1.6 binary is not installed")
@pytest.mark.parametrize(
    ("program", "doc"),
    [
        (".[] | select(.a > 1) | .b", '[{"a":1,"b":"x"},{"a":2,"b":"y"}]'),
        ("map(.*2) | add / length", "[1,2,4]"),
        ("group_by(.a) | map(length)", '[{"a":2},{"a":1},{"a":2}]'),
        ('to_entries | map("\\(.key)=\\(.value)") | join("&")', '{"x":1.0,"y":"z"}'),
        ('[paths(type == "number")]', '{"a":1,"b":[2,{"c":3}]}'),
        (".a.b.c", '{"a":{"b":"s"}}'),
        ("[.[] | tostring]", '[1, "a", [1.5], {"b": null}]'),
        ("@csv, @tsv, @sh", '["a b", 1, null, true]'),
        ("keys, length, (.[] | type)", '{"b": [], "a": "x"}'),
        ('[splits(", *")] | reverse', '"a, b,c"'),
        ("sort_by(.n) | map(.n)", '[{"n":3},{"n":1},{"n":2}]'),
        ("with_entries(.value += 1)", '{"a":1,"b":2}'),
        ('[match("a+"; "g") | .offset]', '"baaab a"'),
        ('gsub("(?<d>[0-9])"; "<\\(.d)>")', '"a1b22"'),
        (".[] as [$a, $b] | {a: $a, b: $b}", "[[1,2],[3,4]]"),
        ("reduce .[] as $x (0; . + $x)", "[1,2,3.5]"),
        ('getpath(["a",0,"b"])', "null"),
        (".a |= (. // 0) + 1", "{}"),
        ("tojson, (tojson | fromjson)", '{"a":[1,"x",null]}'),
        ("now | type", "null"),
    ],
)
def test_programs_match_jq_binary(program: str, doc: str) -> None:
    for flags in ([], ["-c"], ["-r"]):
        got = run("jq", *flags, program, stdin=doc)
        assert (got.stdout, got.exit_code) == oracle("jq", [*flags, program], doc), flags


def test_big_documents_round_trip() -> None:
    doc = json.dumps([{"id": i, "name": f"n{i}", "price": i + 0.5} for i in range(2000)])
    assert json.loads(out("jq", "-c", ".", stdin=doc)) == json.loads(doc)
