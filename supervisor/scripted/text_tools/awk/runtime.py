"""The state of one awk run: variables, the current record and its fields, input, output.

Fields are split lazily, with the FS in force when the record was read (POSIX: a new FS
applies from the next record). Assigning a field marks ``$0`` stale; it is rebuilt with
OFS when read, or before OFS changes (as gawk does).
"""

from __future__ import annotations

import re
from typing import Any

from ...budget import spend
from ..common import MAX_OUTPUT_BYTES, OutputLimitError
from ..posix_regex import Regex, RegexError, compile_posix, finditer, split
from .values import UNINIT, StrNum, Value, to_int, to_number, to_str

#: Loop iterations (all loops of one run together) and array elements a run may create:
#: a script cannot spin or fill memory forever.
MAX_LOOP_ITERATIONS = 3_000_000
MAX_ARRAY_ELEMENTS = 1_000_000
MAX_CALL_DEPTH = 64


class AwkFatal(Exception):
    """A run-time error: gawk's ``fatal:`` message; the run stops with status 2."""


class NextRecord(Exception):
    pass


class NextFile(Exception):
    pass


class ExitProgram(Exception):
    def __init__(self, status: int | None) -> None:
        super().__init__(status)
        self.status = status


class Array(dict[str, Any]):
    """An awk array (string keys); the runtime counts the elements created."""

    __slots__ = ()


_DEFAULT_FS_SPLIT = re.compile(r"[ \t\n]+")
_OTHER_SPACE = re.compile(r"[\r\x0b\x0c\x1c-\x1f]")


class Runtime:
    def __init__(self, text: str) -> None:
        self.vars: dict[str, Any] = {
            "FS": " ", "OFS": " ", "ORS": "\n", "RS": "\n", "NR": 0.0, "NF": 0.0,
            "FNR": 0.0, "SUBSEP": "\x1c", "CONVFMT": "%.6g", "OFMT": "%.6g",
            "RSTART": 0.0, "RLENGTH": -1.0, "FILENAME": "", "IGNORECASE": 0.0, "RT": "",
            "ENVIRON": Array(), "ARGC": 1.0, "ARGV": Array({"0": "awk"}),
            "PROCINFO": Array(),
        }  # fmt: skip
        self.text = text
        self.records: list[str] | None = None
        self.terminators: list[str] = []
        self.next_record = 0
        self.record = ""
        self.record_fs = " "
        self.fields: list[str] | None = []
        self.dirty = False
        self.out: list[str] = []
        self.err: list[str] = []
        self.size = 0
        self.loop_budget = MAX_LOOP_ITERATIONS
        self.elements = 0
        self.depth = 0
        self.rand_seed = 0.0
        self.rand_state: Any = None
        self.range_active: dict[int, bool] = {}
        #: records between two spends of fuel (a mask) and the fuel spent then (`pace`)
        self.record_mask = 31
        self.record_fuel = 32

    def pace(self, program_size: int) -> None:
        """Fuel per record by the program's length (a record may run all of it; loops
        and calls spend their own): every 32 records, or at each record of a large
        program, so that the deadline is looked at within a few milliseconds."""
        per = 1 + program_size // 16
        self.record_mask, self.record_fuel = (31, 32 * per) if per < 32 else (0, per)

    # -- output
    def write(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT_BYTES:
            raise OutputLimitError
        self.out.append(text)

    def loop_tick(self) -> None:
        """One more loop iteration (inlined in ``while``/``for``, which call this every
        1,024 iterations): the loop limit, and fuel for the deadline."""
        spend()
        self.loop_budget -= 1
        if self.loop_budget < 0:
            raise AwkFatal(f"loop iteration limit ({MAX_LOOP_ITERATIONS}) exceeded")

    def new_element(self) -> None:
        spend()
        self.elements += 1
        if self.elements > MAX_ARRAY_ELEMENTS:
            raise AwkFatal(f"array element limit ({MAX_ARRAY_ELEMENTS}) exceeded")

    # -- records and fields
    def set_record(self, text: str) -> None:
        self.record = text
        self.record_fs = to_str(self.vars["FS"])
        self.fields = None
        self.dirty = False

    def split_record(self) -> list[str]:
        fields = self.fields
        if fields is None:
            fields = self.split(self.record, self.record_fs, paragraph=self.vars["RS"] == "")
            self.fields = fields
            self.vars["NF"] = float(len(fields))
        return fields

    def split(self, text: str, fs: str, paragraph: bool = False) -> list[str]:
        if fs == " ":
            if text.isascii() and _OTHER_SPACE.search(text) is None:
                return text.split()  # the same as blanks and newlines here, only faster
            stripped = text.strip(" \t\n")
            return _DEFAULT_FS_SPLIT.split(stripped) if stripped else []
        if text == "":
            return []
        if fs == "":
            return list(text)
        if paragraph:
            # In paragraph mode a newline always separates fields too.
            parts: list[str] = []
            for line in text.split("\n"):
                parts.extend(self.split(line, fs))
            return parts
        if len(fs) == 1 and not (fs.isalpha() and self.ignorecase()):
            return text.split(fs)
        return split(self.regex(fs), text)

    def get_field(self, index: float) -> Value:
        i = to_int(index)
        if i == 0:
            return StrNum(self.get_record())
        if i < 0:
            raise AwkFatal(f"attempt to access field {i}")
        fields = self.split_record()
        if i > len(fields):
            return UNINIT
        return StrNum(fields[i - 1])

    def get_record(self) -> str:
        if self.dirty:
            self.rebuild()
        return self.record

    def rebuild(self) -> None:
        fields = self.split_record()
        self.record = to_str(self.vars["OFS"], self.vars["CONVFMT"]).join(fields)
        self.dirty = False

    def set_field(self, index: float, value: Value) -> None:
        i = to_int(index)
        convfmt = self.vars["CONVFMT"]
        if i == 0:
            self.set_record(to_str(value, convfmt))
            return
        if i < 0:
            raise AwkFatal(f"attempt to access field {i}")
        fields = self.split_record()
        if i > len(fields):
            if i > 1_000_000:
                raise AwkFatal(f"field index {i} too large")
            fields.extend([""] * (i - len(fields)))
            self.vars["NF"] = float(len(fields))
        fields[i - 1] = to_str(value, convfmt)
        self.dirty = True

    def set_nf(self, value: Value) -> None:
        n = to_int(to_number(value))
        if n < 0:
            raise AwkFatal(f"NF set to negative value {n}")
        if n > 1_000_000:
            raise AwkFatal(f"NF value {n} too large")
        fields = self.split_record()
        if n < len(fields):
            del fields[n:]
        else:
            fields.extend([""] * (n - len(fields)))
        self.vars["NF"] = float(n)
        self.dirty = True

    def get_nf(self) -> float:
        self.split_record()
        nf: float = self.vars["NF"]
        return nf

    def set_special(self, name: str, value: Value) -> None:
        if name == "NF":
            self.set_nf(value)
            return
        if name == "OFS" and self.dirty:
            self.rebuild()
        self.vars[name] = value

    # -- input
    def read_record(self) -> str | None:
        if self.records is None:
            # Records are cut with the RS in force once BEGIN has run.
            rs = to_str(self.vars["RS"], self.vars["CONVFMT"])
            self.records, self.terminators = split_records(self.text, rs)
            self.text = ""
        if self.next_record >= len(self.records):
            return None
        index = self.next_record
        if not index & self.record_mask:
            spend(self.record_fuel)
        text = self.records[index]
        self.vars["RT"] = self.terminators[index]
        self.next_record = index + 1
        variables = self.vars
        nr = variables["NR"]
        variables["NR"] = (nr if type(nr) is float else to_number(nr)) + 1.0
        fnr = variables["FNR"]
        variables["FNR"] = (fnr if type(fnr) is float else to_number(fnr)) + 1.0
        return text

    # -- regexes
    def ignorecase(self) -> bool:
        value = self.vars.get("IGNORECASE", 0.0)
        return bool(value) and to_number(value) != 0

    def regex(self, source: str) -> Regex:
        try:
            return compile_posix(source, ere=True, icase=self.ignorecase(), dialect="awk")
        except RegexError as exc:
            raise AwkFatal(f"invalid regexp /{source}/: {exc}") from None


def split_records(text: str, rs: str) -> tuple[list[str], list[str]]:
    """The input's records and their terminators (``RT``) for the RS in force."""
    if text == "":
        return [], []
    if rs == "\n":
        records = text.split("\n")
        terms = ["\n"] * len(records)
        if records[-1] == "":
            records.pop()
            terms.pop()
        else:
            terms[-1] = ""
        return records, terms
    if rs == "":
        # Paragraph mode: records between runs of blank lines.
        stripped = text.lstrip("\n")
        records = []
        terms = []
        pos = 0
        for gap in re.finditer(r"\n\n+", stripped):
            records.append(stripped[pos : gap.start()])
            terms.append(gap.group(0))
            pos = gap.end()
        tail = stripped[pos:]
        if tail:
            body = tail.rstrip("\n")
            records.append(body)
            terms.append(tail[len(body) :])
        return records, terms
    if len(rs) == 1:
        records = text.split(rs)
        terms = [rs] * len(records)
        if records[-1] == "":
            records.pop()
            terms.pop()
        else:
            terms[-1] = ""
        return records, terms
    pattern = compile_posix(rs, ere=True, dialect="awk")
    records = []
    terms = []
    pos = 0
    for m in finditer(pattern, text):
        if m.end() == m.start():
            continue
        records.append(text[pos : m.start()])
        terms.append(m.group(0))
        pos = m.end()
    if pos < len(text):
        records.append(text[pos:])
        terms.append("")
    return records, terms
