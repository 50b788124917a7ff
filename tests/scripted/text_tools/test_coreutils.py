"""head tail wc seq tr cut uniq sort expr and the extras: expected outputs and exit
statuses recorded from GNU coreutils 9.1 / util-linux (C.UTF-8), checked against the
installed tools where present, plus the messages and bounds of our own."""

from __future__ import annotations

import pytest
from text_support import oracle, oracle_available, out, run

from supervisor.scripted.text_tools.seq import MAX_LINES

# (argv, stdin, stdout, exit status), as GNU prints them.
ROWS: list[tuple[list[str], str, str, int]] = [
    (["head", "-n", "2"], "a\nb\nc\n", "a\nb\n", 0),
    (["head", "-2"], "a\nb\nc\n", "a\nb\n", 0),
    (["head", "-n", "-1"], "a\nb\nc\n", "a\nb\n", 0),
    (["head", "-c", "3"], "abcdef", "abc", 0),
    (["head", "-c", "-2"], "abcdef", "abcd", 0),
    (["head", "-n", "5"], "a\nb", "a\nb", 0),
    (["head", "-n", "x"], "a", "", 1),
    (["head", "-v", "-n1"], "a\nb\n", "==> standard input <==\na\n", 0),
    (["head", "-5c"], "a\nb\n", "a\nb\n", 0),
    (["head", "--lines=1"], "a\nb\n", "a\n", 0),
    (["head", "-n", "1k"], "a\nb\n", "a\nb\n", 0),
    (["tail", "-n", "2"], "a\nb\nc\n", "b\nc\n", 0),
    (["tail", "-2"], "a\nb\nc\n", "b\nc\n", 0),
    (["tail", "+2"], "a\nb\nc", "b\nc", 0),
    (["tail", "-n", "+2"], "a\nb\nc\n", "b\nc\n", 0),
    (["tail", "-n", "+0"], "a\nb\n", "a\nb\n", 0),
    (["tail", "-c", "3"], "ab\ncd", "\ncd", 0),
    (["tail", "-c", "+3"], "a\nb\nc\n", "b\nc\n", 0),
    (["tail", "-n", "1.5"], "a", "", 1),
    (["tail", "-1f"], "a\nb\n", "b\n", 0),
    (["tail", "-n", "2"], "a\n\n\nb", "\nb", 0),
    (["wc"], "hi\n", "      1       1       3\n", 0),
    (["wc", "-l"], "hi\nthere\n", "2\n", 0),
    (["wc", "-lw"], "hi\n", "      1       1\n", 0),
    (["wc", "-mc"], "héllo wörld\n", "     12      14\n", 0),
    (["wc"], "", "      0       0       0\n", 0),
    (["wc", "-L"], "a\tb\n", "9\n", 0),
    (["wc", "-l", "-"], "hi\n", "1 -\n", 0),
    (["wc", "-lwcmL"], "hi\n", "      1       1       3       3       2\n", 0),
    (["wc"], "a b\n\n  c", "      2       3       8\n", 0),
    (["wc", "-w"], "a b\xa0c\n", "3\n", 0),
    (["seq", "3"], "", "1\n2\n3\n", 0),
    (["seq", "2", "5"], "", "2\n3\n4\n5\n", 0),
    (["seq", "1", "0.25", "2"], "", "1.00\n1.25\n1.50\n1.75\n2.00\n", 0),
    (["seq", "0.5", "3"], "", "0.5\n1.5\n2.5\n", 0),
    (["seq", "1", "1.55"], "", "1\n", 0),
    (["seq", "0", "0.1", "0.3"], "", "0.0\n0.1\n0.2\n0.3\n", 0),
    (["seq", "-w", "8", "11"], "", "08\n09\n10\n11\n", 0),
    (["seq", "-w", "-3", "1"], "", "-3\n-2\n-1\n00\n01\n", 0),
    (["seq", "-s", ",", "3"], "", "1,2,3\n", 0),
    (["seq", "-s", ", ", "1", "3"], "", "1, 2, 3\n", 0),
    (["seq", "-f", "%03g", "3"], "", "001\n002\n003\n", 0),
    (["seq", "-f", "x%.2fy", "1", "0.5", "2"], "", "x1.00y\nx1.50y\nx2.00y\n", 0),
    (["seq", "5", "-2", "1"], "", "5\n3\n1\n", 0),
    (["seq", "1", "0", "3"], "", "", 1),
    (["seq", "x"], "", "", 1),
    (["seq", "1e2", "1e2"], "", "100\n", 0),
    (
        ["seq", "100000000000000000000", "100000000000000000001"],
        "",
        "100000000000000000000\n100000000000000000001\n",
        0,
    ),
    (["seq", "1", "0"], "", "", 0),
    (["seq", "-w", "1", "0.5", "2"], "", "1.0\n1.5\n2.0\n", 0),
    (["seq", "0.1", "0.1", "0.5"], "", "0.1\n0.2\n0.3\n0.4\n0.5\n", 0),
    (["seq", "-f", "%e", "1", "2"], "", "1.000000e+00\n2.000000e+00\n", 0),
    (["seq", "-f", "%g", "1000000", "1000001"], "", "1e+06\n1e+06\n", 0),
    (["seq", "1.0", "3"], "", "1.0\n2.0\n3.0\n", 0),
    (["seq", "-s", "", "3"], "", "123\n", 0),
    (["seq", "3", "-s:"], "", "", 1),
    (["seq"], "", "", 1),
    (["seq", "1", "2", "3", "4"], "", "", 1),
    (["seq", "-f", "%d", "3"], "", "", 1),
    (["seq", "-f", "abc", "3"], "", "", 1),
    (["seq", "0x10", "0x12"], "", "16\n17\n18\n", 0),
    (["seq", "--", "-1", "1"], "", "-1\n0\n1\n", 0),
    (["seq", "1.5e1", "17"], "", "15\n16\n17\n", 0),
    (["seq", "-1", "1"], "", "-1\n0\n1\n", 0),
    (["seq", "10", "-3", "-5"], "", "10\n7\n4\n1\n-2\n-5\n", 0),
    (["seq", "-s ", "5"], "", "1 2 3 4 5\n", 0),
    (["cut", "-d:", "-f2"], "a:b:c\nd\ne:f\n", "b\nd\nf\n", 0),
    (["cut", "-d:", "-f2", "-s"], "a:b:c\nd\n", "b\n", 0),
    (["cut", "-d:", "-f3,1"], "a:b:c:d\n", "a:c\n", 0),
    (["cut", "-d:", "-f2-"], "a:b:c:d\n", "b:c:d\n", 0),
    (["cut", "-d:", "--complement", "-f2"], "a:b:c:d\n", "a:c:d\n", 0),
    (["cut", "-d:", "-f1,3", "--output-delimiter= "], "a:b:c:d\n", "a c\n", 0),
    (["cut", "-c2-4"], "abcdef\n", "bcd\n", 0),
    (["cut", "-c-2,5-"], "abcdef\n", "abef\n", 0),
    (["cut", "-c1-2"], "héllo\n", "h�\n", 0),
    (["cut", "-b1,3", "--output-delimiter=,"], "abcdef\n", "a,c\n", 0),
    (["cut", "-b1-2,4-5", "--output-delimiter=,"], "abcdef\n", "ab,de\n", 0),
    (["cut", "-f2"], "a\tb\n", "b\n", 0),
    (["cut", "-c1"], "abc", "a\n", 0),
    (["cut", "-f0"], "", "", 1),
    (["cut"], "", "", 1),
    (["cut", "-d::", "-f1"], "", "", 1),
    (["cut", "-c1", "-f1"], "", "", 1),
    (["cut", "-d:", "-c1"], "", "", 1),
    (["cut", "-f3-1"], "", "", 1),
    (["cut", "-d,", "-f", "1"], "a,b\n", "a\n", 0),
    (["cut", "-d ", "-f3"], "a b  c\n", "\n", 0),
    (["cut", "-c5"], "abc\n", "\n", 0),
    (["cut", "-d ", "-f2-3"], "a b c d\n", "b c\n", 0),
    (["cut", "-f1,1,2"], "a\tb\tc\n", "a\tb\n", 0),
    (["uniq", "-c"], "a\na\nb\nA\n", "      2 a\n      1 b\n      1 A\n", 0),
    (["uniq", "-ci"], "a\na\nb\nA\n", "      2 a\n      1 b\n      1 A\n", 0),
    (["uniq", "-f1", "-c"], "a 1\nb 1\nc 2\n", "      2 a 1\n      1 c 2\n", 0),
    (["uniq", "-s1"], "xa\nya\n", "xa\n", 0),
    (["uniq", "-w2"], "ab1\nab2\n", "ab1\n", 0),
    (["uniq", "-D"], "a\na\nb\n", "a\na\n", 0),
    (["uniq", "-u"], "a\na\nb\n", "b\n", 0),
    (["uniq", "-d"], "a\na\nb\nb\n", "a\nb\n", 0),
    (["uniq"], "a\na\nb", "a\nb\n", 0),
    (["uniq", "--group"], "a\na\nb\n", "a\na\n\nb\n", 0),
    (["uniq", "-f0", "-c"], "  a\n\ta\n", "      1   a\n      1 \ta\n", 0),
    (["uniq", "-f1", "-c"], "x  a\ny a\n", "      1 x  a\n      1 y a\n", 0),
    (["uniq", "--group=both"], "a\na\nb\n", "\na\na\n\nb\n\n", 0),
    (["uniq", "--all-repeated=separate"], "a\na\nb\nc\nc\n", "a\na\n\nc\nc\n", 0),
    (["sort", "-k2n"], "b 2\na 10\nc 1\n", "c 1\nb 2\na 10\n", 0),
    (["sort", "-k2,2nr"], "b 2\na 10\nc 1\n", "a 10\nb 2\nc 1\n", 0),
    (["sort", "-V"], "1.10\n1.9\n1.2\n", "1.2\n1.9\n1.10\n", 0),
    (["sort", "-h"], "10K\n2M\n500\n1G\n", "500\n10K\n2M\n1G\n", 0),
    (["sort", "-f"], "B\na\nC\n", "a\nB\nC\n", 0),
    (["sort"], "B\na\nC\n", "B\nC\na\n", 0),
    (["sort", "-g"], "x\n-5\n3\n1e2\n", "x\n-5\n3\n1e2\n", 0),
    (["sort", "-u"], "a\nb\na\n", "a\nb\n", 0),
    (["sort", "-c"], "b\na\n", "", 1),
    (["sort", "-t ", "-k2"], "a b\na a\n", "a a\na b\n", 0),
    (["sort", "-b"], " b\na\n", "a\n b\n", 0),
    (["sort", "-M"], "FEB\njan\nxx\n", "xx\njan\nFEB\n", 0),
    (["sort", "-n", "-r"], "2\n10\n1\n", "10\n2\n1\n", 0),
    (["sort"], "a\n\nb\n", "\na\nb\n", 0),
    (["sort", "-t:", "-k2", "-n"], "a:3\nb:1\n", "b:1\na:3\n", 0),
    (["sort", "-k1.2n"], "x1\nx10\nx2\n", "x1\nx2\nx10\n", 0),
    (["sort", "-f", "-u"], "b\nA\na\nB\n", "A\nb\n", 0),
    (["sort", "-n", "-u"], "1\n1.0\n01\n", "1\n", 0),
    (["sort", "-k2", "-s"], "aa 1\nab 1\n", "aa 1\nab 1\n", 0),
    (["sort", "-k2", "-r"], "aa 1\nab 1\n", "ab 1\naa 1\n", 0),
    (["sort", "-k2"], "a b\na  a\n", "a  a\na b\n", 0),
    (["sort", "-n"], "-1\n-10\n5\n", "-10\n-1\n5\n", 0),
    (["sort", "-n"], "1.5\n1.10\n1.05\n", "1.05\n1.10\n1.5\n", 0),
    (["sort", "-k0"], "a\n", "", 2),
    (["sort", "-t", ""], "a\n", "", 2),
    (["sort", "-t", "ab"], "a\n", "", 2),
    (["sort", "-r"], "a\nc\nb\n", "c\nb\na\n", 0),
    (["sort", "-rn"], "3 a\n3 b\n1 c\n", "3 b\n3 a\n1 c\n", 0),
    (["sort", "-k1,1", "-k2n"], "b 2\na 3\nb 1\na 1\n", "a 1\na 3\nb 1\nb 2\n", 0),
    (["sort", "-k2,2", "-k1,1r"], "x 1\ny 1\nz 0\n", "z 0\ny 1\nx 1\n", 0),
    (["sort", "-t,", "-k3"], "a,b,c\nd,e,a\n", "d,e,a\na,b,c\n", 0),
    (["sort", "-n"], "abc\n10\n-\n2\n", "-\nabc\n2\n10\n", 0),
    (["sort", "-u", "-k1,1"], "a 1\na 2\nb 3\n", "a 1\nb 3\n", 0),
    (["sort", "-s", "-k1,1"], "b 2\na 1\nb 1\n", "a 1\nb 2\nb 1\n", 0),
    (["sort", "-nr", "-k2", "-t:"], "x:1\ny:3\nz:2\n", "y:3\nz:2\nx:1\n", 0),
    (["sort", "-d"], "a-b\nab\na c\n", "a c\na-b\nab\n", 0),
    (["sort", "-V"], "foo-1.2\nfoo-1.10\nfoo-1.2~rc1\n", "foo-1.2~rc1\nfoo-1.2\nfoo-1.10\n", 0),
    (["sort", "-h"], "1.5G\n1G\n-1K\n0\n", "-1K\n0\n1G\n1.5G\n", 0),
    (["sort", "-g"], "1e3\n-inf\nnan\n5\n", "nan\n-inf\n5\n1e3\n", 0),
    (["sort", "-z"], "b\x00a\x00", "a\x00b\x00", 0),
    (["sort", "-m"], "b\na\n", "b\na\n", 0),
    (["sort", "-c", "-u"], "a\na\n", "", 1),
    (["sort", "-C"], "b\na\n", "", 1),
    (["sort", "-k", "2.2,2.3"], "a xcb\nb xab\n", "b xab\na xcb\n", 0),
    (["sort", "-bk2"], "a   z\nb y\n", "b y\na   z\n", 0),
    (["sort", "-k1n", "-k2"], "1 b\n1 a\n0 c\n", "0 c\n1 a\n1 b\n", 0),
    (["sort", "-rk1,1"], "a 1\nb 2\na 3\n", "b 2\na 3\na 1\n", 0),
    (["expr", "1", "+", "2"], "", "3\n", 0),
    (["expr", "10", "/", "3"], "", "3\n", 0),
    (["expr", "10", "%", "3"], "", "1\n", 0),
    (["expr", "5", "*", "3"], "", "15\n", 0),
    (["expr", "1", "/", "0"], "", "", 2),
    (["expr", "a", "+", "1"], "", "", 2),
    (["expr", "abc", ":", "a.c"], "", "3\n", 0),
    (["expr", "abc", ":", "\\(b.\\)"], "", "\n", 1),
    (["expr", "abc", ":", ".\\(b.\\)"], "", "bc\n", 0),
    (["expr", "abc", ":", "x"], "", "0\n", 1),
    (["expr", "length", "hello"], "", "5\n", 0),
    (["expr", "substr", "hello", "2", "3"], "", "ell\n", 0),
    (["expr", "index", "hello", "l"], "", "3\n", 0),
    (["expr", "3", "<", "10"], "", "1\n", 0),
    (["expr", "a", "<", "b"], "", "1\n", 0),
    (["expr", "01", "=", "1"], "", "1\n", 0),
    (["expr", "01"], "", "01\n", 0),
    (["expr", "0"], "", "0\n", 1),
    (["expr", "", "|", "5"], "", "5\n", 0),
    (["expr", "0", "&", "5"], "", "0\n", 1),
    (["expr", "5", "&", ""], "", "0\n", 1),
    (["expr", "1", "+"], "", "", 2),
    (["expr", "(", "1", "+", "2", ")", "*", "3"], "", "9\n", 0),
    (["expr", "match", "abc", "a\\(.\\)"], "", "b\n", 0),
    (["expr", "-5", "+", "3"], "", "-2\n", 0),
    (["expr", "+", "length"], "", "length\n", 0),
    (["expr", "length"], "", "", 2),
    (["expr", "9999999999999999999", "+", "1"], "", "10000000000000000000\n", 0),
    (["expr", "a", "=", "a"], "", "1\n", 0),
    (["expr", "a", "!=", "b"], "", "1\n", 0),
    (["expr", "abc", ":", "a*"], "", "1\n", 0),
    (["expr", "x", ":", ".*"], "", "1\n", 0),
    (["expr", "2", ">", "10"], "", "0\n", 1),
    (["expr", "b", ">", "a"], "", "1\n", 0),
    (["expr", "", "=", ""], "", "1\n", 0),
    (["expr", "1", "2"], "", "", 2),
    (["expr", "substr", "abc", "0", "1"], "", "\n", 1),
    (["expr", "index", "abc", ""], "", "0\n", 1),
    (["expr", "-", "1"], "", "", 2),
    (["expr", "-7", "/", "2"], "", "-3\n", 0),
    (["expr", "-7", "%", "2"], "", "-1\n", 0),
    (["expr", "7", "%", "-2"], "", "1\n", 0),
    (["expr"], "", "", 2),
    (["expr", "(", "1"], "", "", 2),
    (["expr", "length", "héllo"], "", "5\n", 0),
    (["expr", "10", "-", "2", "-", "3"], "", "5\n", 0),
    (["expr", "2", "*", "3", "+", "4"], "", "10\n", 0),
    (["expr", "foo.txt", ":", ".*\\.\\(.*\\)"], "", "txt\n", 0),
    (["tac"], "a\nb\nc\n", "c\nb\na\n", 0),
    (["tac"], "a\nb", "ba\n", 0),
    (["tac", "-b"], "a\nb\n", "\n\nba", 0),
    (["tac", "-s", "b"], "a\nb\n", "\na\nb", 0),
    (["tac", "-s", ","], "a,b,c", "cb,a,", 0),
    (["rev"], "abc\nhé\n", "cba\néh\n", 0),
    (["rev"], "ab", "ba", 0),
    (["nl"], "a\n\nb\n", "     1\ta\n       \n     2\tb\n", 0),
    (["nl", "-ba", "-w3", "-s: "], "a\n\nb\n", "  1: a\n  2: \n  3: b\n", 0),
    (["nl", "-n", "ln"], "a\nb\n", "1     \ta\n2     \tb\n", 0),
    (["nl", "-n", "rz", "-w4", "-v", "5", "-i", "2"], "a\nb\n", "0005\ta\n0007\tb\n", 0),
    (["nl", "-bpx"], "x\ny\n", "     1\tx\n       y\n", 0),
    (["nl"], "a\nb", "     1\ta\n     2\tb\n", 0),
    (["paste", "-s"], "a\nb\nc\n", "a\tb\tc\n", 0),
    (["paste", "-sd,"], "a\nb\nc\n", "a,b,c\n", 0),
    (["paste", "-", "-"], "a\nb\nc\n", "a\tb\nc\t\n", 0),
    (["paste", "-d:", "-", "-", "-"], "a\nb\nc\n", "a:b:c\n", 0),
    (["paste", "-s", "-d", ",\\n"], "a\nb\nc\nd\n", "a,b\nc,d\n", 0),
    (["paste", "-s"], "", "\n", 0),
    (["paste", "-s", "-", "-"], "a\n", "a\n\n", 0),
    (["paste", "-", "-"], "", "", 0),
    (["paste"], "a\nb\n", "a\nb\n", 0),
    (["fold", "-w", "7"], "hello world foo bar\n", "hello w\norld fo\no bar\n", 0),
    (["fold", "-s", "-w", "7"], "hello world foo bar\n", "hello \nworld \nfoo bar\n", 0),
    (["fold", "-w", "4"], "a\tb\n", "a\n\t\nb\n", 0),
    (["fold", "-w", "2"], "éé\n", "é\né\n", 0),
    (["fold", "-w3"], "abcdefgh", "abc\ndef\ngh", 0),
    (["fold", "-5"], "abcdefghij\n", "abcde\nfghij\n", 0),
    (
        ["fold", "-s", "-w", "10"],
        "the quick brown fox jumps\n",
        "the quick \nbrown fox \njumps\n",
        0,
    ),
    (["fold", "-b", "-w", "3"], "a\tbcdef\n", "a\tb\ncde\nf\n", 0),
    (["tr", "-s", "lo"], "hello world\n", "helo world\n", 0),
    (["tr", "a-y", "b-z"], "hello\n", "ifmmp\n", 0),
    (["tr", "-d", "l"], "hello\n", "heo\n", 0),
    (["tr", "-cd", "0-9\\n"], "hello 123\n", "123\n", 0),
    (["tr", "abc", "x"], "abc\n", "xxx\n", 0),
    (["tr", "-t", "abc", "x"], "abc\n", "xbc\n", 0),
    (["tr", "[:upper:]", "[:lower:]"], "Hello\n", "hello\n", 0),
    (["tr", "[:lower:]", "[:upper:]"], "Hello\n", "HELLO\n", 0),
    (["tr", "-s", " "], "a  b   c\n", "a b c\n", 0),
    (["tr", ":", "\\n"], "a:b:c\n", "a\nb\nc\n", 0),
    (["tr", "a-c", "[x*]"], "abc\n", "xxx\n", 0),
    (["tr", "a-d", "[x*2]yz"], "abcd\n", "xxyz\n", 0),
    (["tr", "-s", "a", "x"], "aab\n", "xb\n", 0),
    (["tr"], "hello\n", "", 1),
    (["tr", "a"], "hello\n", "", 1),
    (["tr", "é", "e"], "é\n", "ee\n", 0),
    (["tr", "a-", "xy"], "a-b\n", "xyb\n", 0),
    (["tr", "\\\\", "/"], "a\\b\n", "a/b\n", 0),
    (["tr", "-c", "a", "x"], "abc\n", "axxx", 0),
    (["tr", "[:alpha:]", "[:digit:]"], "abc\n", "", 1),
    (["tr", "-d", "[:digit:]"], "a1\n", "a\n", 0),
    (["tr", "-ds", "a", "B"], "aAbB\n", "AbB\n", 0),
    (["tr", "z-a", "x"], "z\n", "", 1),
    (["tr", "\\141", "X"], "abc\n", "Xbc\n", 0),
    (["tr", "[:space:]", "_"], "a b\n", "a_b_", 0),
    (["tr", "ab", "\\n\\t"], "ab\n", "\n\t\n", 0),
    (["tr", "-d", "\\n"], "a\nb\n", "ab", 0),
    (["tr", "-s", "\\n"], "a\n\n\nb\n", "a\nb\n", 0),
    (["tr", "[a-z]", "[A-Z]"], "a[b]\n", "A[B]\n", 0),
    (["tr", "-cs", "[:alnum:]", "\\n"], "hello, world! foo\n", "hello\nworld\nfoo\n", 0),
    (["tr", "a-z", "A-Z"], "hello\n", "HELLO\n", 0),
    (["tr", "-d", "aeiou"], "education\n", "dctn\n", 0),
    (["tr", "{}", "()"], "{x}\n", "(x)\n", 0),
    (["tr", "-s", "[:blank:]"], "a   b\t\tc\n", "a b\tc\n", 0),
]


@pytest.mark.parametrize(("argv", "stdin", "stdout", "status"), ROWS)
def test_recorded_behaviour(argv: list[str], stdin: str, stdout: str, status: int) -> None:
    result = run(argv[0], *argv[1:], stdin=stdin)
    assert (result.stdout, result.exit_code) == (stdout, status)


@pytest.mark.parametrize(
    ("argv", "stdin"), [(row[0], row[1]) for row in ROWS if oracle_available(row[0][0])]
)
def test_matches_installed_tools(argv: list[str], stdin: str) -> None:
    result = run(argv[0], *argv[1:], stdin=stdin)
    assert (result.stdout, result.exit_code) == oracle(argv[0], argv[1:], stdin)


def test_messages() -> None:
    assert run("head", "-n", "x").stderr == "head: invalid number of lines: ‘x’\n"
    assert run("seq", "1", "0", "3").stderr == (
        "seq: invalid Zero increment value: ‘0’\nTry 'seq --help' for more information.\n"
    )
    assert run("cut").stderr == (
        "cut: you must specify a list of bytes, characters, or fields\n"
        "Try 'cut --help' for more information.\n"
    )
    assert run("sort", "-k0").stderr == (
        "sort: field number is zero: invalid field specification ‘0’\n"
        "Try 'sort --help' for more information.\n"
    )
    assert run("expr", "1", "/", "0").stderr == "expr: division by zero\n"
    assert run("expr", "a", "+", "1").stderr == "expr: non-integer argument\n"
    assert run("tr", "a").stderr.startswith("tr: missing operand after ‘a’\n")
    assert run("sort", "-c", stdin="b\na\n").stderr == "sort: -:2: disorder: a\n"


def test_seq_line_limit() -> None:
    result = run("seq", str(MAX_LINES + 5))
    assert result.exit_code == 1
    assert result.stderr == f"seq: line limit ({MAX_LINES}) exceeded; output truncated\n"
    lines = result.stdout.splitlines()
    assert len(lines) == MAX_LINES and lines[-1] == str(MAX_LINES)
    assert run("seq", "inf").stdout.count("\n") == MAX_LINES
    assert out("seq", str(MAX_LINES)).count("\n") == MAX_LINES


def test_byte_tools_mark_split_characters() -> None:
    # GNU cuts bytes: half a character is shown as U+FFFD, as the harness reads bash.
    assert out("cut", "-c1-2", stdin="héllo\n") == "h\ufffd\n"
    assert out("head", "-c", "1", stdin="é") == "\ufffd"
    assert out("tr", "é", "e", stdin="é\n") == "ee\n"


def test_sort_random_keeps_equal_lines_together() -> None:
    lines = out("sort", "-R", stdin="a\nb\na\nc\nb\n").splitlines()
    assert sorted(lines) == ["a", "a", "b", "b", "c"]
    for value in "ab":
        first = lines.index(value)
        assert lines[first + 1] == value


def test_a_long_sort_runs_in_slices_and_stays_stable(monkeypatch: pytest.MonkeyPatch) -> None:
    from supervisor.scripted.text_tools import sort as sort_module

    monkeypatch.setattr(sort_module, "_SORT_SLICE", 7)  # many slices, many merges
    lines = [f"{(i * 37) % 11} {chr(97 + i % 5)} {i}" for i in range(200)]
    data = "".join(line + "\n" for line in lines)
    for args, key, reverse in (
        (["-s", "-k1,1n"], lambda line: int(line.split()[0]), False),
        (["-s", "-r", "-k2,2"], lambda line: line.split()[1], True),
    ):
        got = sort_module.sort(args, data).stdout.splitlines()
        assert got == sorted(lines, key=key, reverse=reverse), args
