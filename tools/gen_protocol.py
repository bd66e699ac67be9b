"""Generate `src/exactly/protocol/messages/*.py` from Kafka's JSON message specs.

The specs come from the kafka-python wheel (`kafka/protocol/schemas/resources/*.json`, a copy of Apache
Kafka's `clients/src/main/resources/common/message/`); kafka-python is pinned in pyproject.toml so that
regeneration is reproducible.

For every API in `APIS` and every version in its range this writes straight-line Python: one frozen,
slotted dataclass per struct (version-agnostic, as Kafka's `*Data` classes are) and, per version, a
decode function (`struct.unpack_from` over runs of fixed-width fields) and an encode function that
appends chunks to a list (records bytes are appended as they are, never copied). Identical per-version
bodies are emitted once.

    python -m tools.gen_protocol            # rewrite the generated modules
    python -m tools.gen_protocol --check    # exit 1 if a committed module differs from what it would write
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


def _spec_dir() -> Path:
    # Locate the wheel's files without importing kafka-python (its import does work we don't need).
    spec = importlib.util.find_spec("kafka")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("kafka-python is not installed: `pip install -e '.[dev]'`")
    return Path(next(iter(spec.submodule_search_locations))) / "protocol" / "schemas" / "resources"


SPEC_DIR = _spec_dir()
# exactly's own extension APIs (private keys 10000-10009), in Kafka's JSON format, checked into the repo.
EXACTLY_SPEC_DIR = Path(__file__).resolve().parent.parent / "src" / "exactly" / "protocol" / "specs"
# Kafka APIs the pinned wheel does not ship (KIP-848's ConsumerGroupHeartbeat/ConsumerGroupDescribe,
# KIP-932's share group APIs), written
# in Kafka's JSON format from Apache Kafka's specs of the same name, checked into the repo.
KAFKA_EXTRA_SPEC_DIR = EXACTLY_SPEC_DIR / "kafka"
OUT_DIR = Path(__file__).resolve().parent.parent / "src" / "exactly" / "protocol" / "messages"

# API name -> (lowest, highest) version the codecs are generated for. This is the union of what
# confluent-kafka (librdkafka 2.16), kafka-python 3.0, aiokafka 0.14 and kcat send (shared/reference/
# kafka-wire.md §1.3). Produce v0-2 are advertised by the broker but absent from the 4.x specs.
APIS: dict[str, tuple[int, int]] = {
    "Produce": (3, 13),
    "Fetch": (4, 18),
    "ListOffsets": (1, 11),
    "Metadata": (0, 13),
    "OffsetCommit": (2, 10),
    "OffsetFetch": (1, 10),
    "FindCoordinator": (0, 6),
    "JoinGroup": (0, 9),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "SyncGroup": (0, 5),
    "DescribeGroups": (0, 6),
    "ListGroups": (0, 5),
    "ApiVersions": (0, 4),
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "DeleteRecords": (0, 2),
    "InitProducerId": (0, 5),
    "OffsetForLeaderEpoch": (2, 4),
    "AddPartitionsToTxn": (0, 5),
    "AddOffsetsToTxn": (0, 4),
    "EndTxn": (0, 5),
    "WriteTxnMarkers": (1, 2),
    "TxnOffsetCommit": (0, 5),
    "DescribeConfigs": (1, 4),
    "CreatePartitions": (0, 3),
    "DeleteGroups": (0, 2),
    "IncrementalAlterConfigs": (0, 1),
    "OffsetDelete": (0, 0),
    "DescribeCluster": (0, 2),
    "DescribeQuorum": (0, 2),
    "ListConfigResources": (0, 1),
    "DescribeProducers": (0, 0),
    "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 2),
    "AlterConfigs": (0, 2),
    "DescribeLogDirs": (1, 5),
    "AlterReplicaLogDirs": (1, 2),
    "ElectLeaders": (0, 2),
    "AlterPartitionReassignments": (0, 1),
    "ListPartitionReassignments": (0, 0),
    "DescribeTopicPartitions": (0, 0),
    "DescribeClientQuotas": (0, 1),
    "AlterClientQuotas": (0, 1),
    # security (issue 13): SASL, ACLs, SCRAM credentials
    "SaslHandshake": (0, 1),
    "SaslAuthenticate": (0, 2),
    "CreateAcls": (1, 3),
    "DescribeAcls": (1, 3),
    "DeleteAcls": (1, 3),
    "DescribeUserScramCredentials": (0, 0),
    "AlterUserScramCredentials": (0, 0),
}

# Kafka APIs read from KAFKA_EXTRA_SPEC_DIR.
KAFKA_EXTRA_APIS: dict[str, tuple[int, int]] = {
    "ConsumerGroupHeartbeat": (0, 1),
    "ConsumerGroupDescribe": (0, 1),
    # KIP-932 share groups (4.1's stable versions; v0 was 4.0's early access)
    "ShareGroupHeartbeat": (1, 1),
    "ShareGroupDescribe": (1, 1),
    "ShareFetch": (1, 1),
    "ShareAcknowledge": (1, 1),
    "DescribeShareGroupOffsets": (0, 0),
    "AlterShareGroupOffsets": (0, 0),
    "DeleteShareGroupOffsets": (0, 0),
    # the share coordinator's inter-broker APIs (4.1's versions)
    "InitializeShareGroupState": (0, 0),
    "ReadShareGroupState": (0, 0),
    "WriteShareGroupState": (0, 0),
    "DeleteShareGroupState": (0, 0),
    "ReadShareGroupStateSummary": (0, 0),
}

# exactly's extension APIs (docs/two-phase-commit.md, docs/share-transactional-acks.md), read from
# EXACTLY_SPEC_DIR.
EXACTLY_APIS: dict[str, tuple[int, int]] = {
    "PrepareTxn": (0, 0),
    "CommitBatch": (0, 0),
    "AbortBatch": (0, 0),
    "ListPreparedTxns": (0, 0),
    "AddShareAcksToTxn": (0, 0),
}


def spec_dir_for(api: str) -> Path:
    """Where the JSON specs of `api` are read from."""
    if api in EXACTLY_APIS:
        return EXACTLY_SPEC_DIR
    if api in KAFKA_EXTRA_APIS:
        return KAFKA_EXTRA_SPEC_DIR
    return SPEC_DIR


INF = 1 << 30
FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "float64": "d", "bool": "?"}
FIXED_SIZE = {"b": 1, "h": 2, "i": 4, "q": 8, "H": 2, "d": 8, "?": 1, "16s": 16, "B": 1}
PY_SCALAR = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
    "uuid": "uuid.UUID",
    "records": "bytes | bytearray | memoryview",
}


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int

    @staticmethod
    def parse(text: str | None) -> Versions:
        if text is None or text == "none":
            return Versions(0, -1)
        if text.endswith("+"):
            return Versions(int(text[:-1]), INF)
        if "-" in text:
            lo, hi = text.split("-")
            return Versions(int(lo), int(hi))
        return Versions(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.hi < self.lo


@dataclass
class Field:
    name: str
    py: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: str | None
    struct: Struct | None = None  # for struct and []struct types

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)


def load_json(path: Path) -> dict[str, object]:
    text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.MULTILINE)
    text = re.sub(r"//[^\"\n]*$", "", text, flags=re.MULTILINE)
    data: dict[str, object] = json.loads(text)
    return data


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) else s


class SpecReader:
    """Turns one message JSON into Struct objects, registering nested structs by class name."""

    def __init__(self, structs: dict[str, Struct], prefix: str) -> None:
        self.structs = structs
        self.prefix = prefix
        self.common: dict[str, list[dict[str, object]]] = {}

    def read_message(self, spec: dict[str, object]) -> Struct:
        for cs in spec.get("commonStructs", []):  # type: ignore[attr-defined]
            self.common[cs["name"]] = cs["fields"]
        return self.define(str(spec["name"]), spec["fields"])  # type: ignore[arg-type]

    def define(self, name: str, raw_fields: list[dict[str, object]]) -> Struct:
        fields = [self.read_field(f) for f in raw_fields]
        existing = self.structs.get(name)
        if existing is not None:
            if _shape(existing) == _shape(Struct(name, fields)):
                return existing
            return self.define(self.prefix + name, raw_fields)
        st = Struct(name, fields)
        self.structs[name] = st
        return st

    def read_field(self, raw: dict[str, object]) -> Field:
        typ = str(raw["type"])
        elem = typ[2:] if typ.startswith("[]") else typ
        f = Field(
            name=str(raw["name"]),
            py=snake(str(raw["name"])),
            type=typ,
            versions=Versions.parse(str(raw["versions"])),
            nullable=Versions.parse(raw.get("nullableVersions")),  # type: ignore[arg-type]
            tagged=Versions.parse(raw.get("taggedVersions")),  # type: ignore[arg-type]
            tag=raw.get("tag"),  # type: ignore[arg-type]
            default=None if raw.get("default") is None else str(raw["default"]),
        )
        if elem[:1].isupper():
            sub = raw.get("fields")
            if sub is None:
                sub = self.common[elem]
            f.struct = self.define(elem, sub)  # type: ignore[arg-type]
        return f


def _shape(st: Struct) -> list[tuple[object, ...]]:
    return [
        (f.name, f.type, f.versions, f.nullable, f.tagged, f.tag, f.default, f.struct and _shape(f.struct))
        for f in st.fields
    ]


# --- Python-side types and defaults -------------------------------------------------------------------------


def py_type(f: Field) -> str:
    if f.is_struct:
        assert f.struct is not None
        base = f"list[{f.struct.name}]" if f.is_array else f.struct.name
        if not f.is_array:
            return f"{base} | None"
    elif f.is_array:
        base = f"list[{PY_SCALAR[f.elem]}]"
    else:
        base = PY_SCALAR[f.type]
    if not f.nullable.empty:
        return f"{base} | None"
    return base


def py_default(f: Field) -> str:
    """A Python expression for the field's default value (used in decoders for absent fields)."""
    if f.is_struct and not f.is_array:
        return "None"
    if f.default == "null":
        return "None"
    if f.is_array:
        return "[]"
    t = f.type
    if t in ("int8", "int16", "int32", "int64", "uint16"):
        return str(int(f.default, 0)) if f.default else "0"
    if t == "float64":
        return repr(float(f.default)) if f.default else "0.0"
    if t == "bool":
        return "True" if f.default == "true" else "False"
    if t == "string":
        return repr(f.default or "")
    if t == "bytes":
        return 'b""'
    if t == "records":
        return "None" if not f.nullable.empty else 'b""'
    if t == "uuid":
        return "_p.UUID_ZERO"
    raise ValueError(f"no default for {f.name}: {t}")


def dataclass_default(f: Field) -> str:
    d = py_default(f)
    if d == "[]":
        return "field(default_factory=list)"
    return d


# --- code emission ---------------------------------------------------------------------------------------


class Emitter:
    def __init__(self) -> None:
        self.functions: list[str] = []
        self.bodies: dict[tuple[str, str], str] = {}  # (struct, body text) -> function name
        self.names: dict[tuple[str, int, str], str] = {}  # (struct, version, dir) -> function name
        self.structs_fmt: dict[str, str] = {}  # fmt -> Struct variable name

    def st(self, fmt: str) -> str:
        name = self.structs_fmt.get(fmt)
        if name is None:
            name = "_S_" + fmt.replace("?", "o").replace("16s", "u")
            self.structs_fmt[fmt] = name
        return name

    def function(self, kind: str, st: Struct, v: int, flexible: bool) -> str:
        key = (st.name, v, kind)
        if key in self.names:
            return self.names[key]
        body = self.dec_body(st, v, flexible) if kind == "dec" else self.enc_body(st, v, flexible)
        name = self.bodies.get((st.name, body))
        if name is None:
            name = f"_{kind}_{st.name}_v{v}"
            self.bodies[(st.name, body)] = name
            if kind == "dec":
                sig = f"def {name}(buf: memoryview, pos: int) -> tuple[{st.name}, int]:\n"
            else:
                sig = f"def {name}(m: {st.name}, out: list[_p.Chunk]) -> None:\n"
            self.functions.append(sig + body)
        self.names[key] = name
        return name

    # decoding -------------------------------------------------------------------------------------------

    def dec_body(self, st: Struct, v: int, flexible: bool) -> str:
        lines: list[str] = []
        run: list[tuple[str, str]] = []  # (fmt, local)

        def flush() -> None:
            if not run:
                return
            fmt = "".join(f for f, _ in run)
            size = sum(FIXED_SIZE[f] for f, _ in run)
            targets = ", ".join(local for _, local in run)
            targets = f"({targets},)" if len(run) == 1 else targets
            lines.append(f"{targets} = {self.st(fmt)}.unpack_from(buf, pos)")
            lines.append(f"pos += {size}")
            lines.extend(f"{local} = _p.read_uuid({local})" for f, local in run if f == "16s")
            run.clear()

        present = [f for f in st.fields if v in f.versions]
        regular = [f for f in present if not (flexible and v in f.tagged)]
        tagged = sorted((f for f in present if flexible and v in f.tagged), key=lambda f: f.tag or 0)
        for f in regular:
            local = "f_" + f.py
            if not f.is_array and f.type in FIXED:
                run.append((FIXED[f.type], local))
            elif f.type == "uuid":
                run.append(("16s", local))
            else:
                flush()
                lines.extend(self.dec_value(f, v, flexible, local))
        flush()
        if flexible:
            if tagged:
                for f in tagged:
                    lines.append(f"f_{f.py}: {py_type(f)} = {py_default(f)}")
                lines.append("_count, pos = _p.read_uvarint(buf, pos)")
                lines.append("for _ in range(_count):")
                lines.append("    _tag, _end, pos = _p.read_tag_header(buf, pos)")
                for i, f in enumerate(tagged):
                    lines.append(f"    {'if' if i == 0 else 'elif'} _tag == {f.tag}:")
                    value = self.dec_value(f, v, flexible, "f_" + f.py)
                    if f.type in FIXED:
                        value = [f"(f_{f.py},) = {self.st(FIXED[f.type])}.unpack_from(buf, pos)"]
                    lines.extend("        " + ln for ln in value)
                lines.append("    pos = _end")
            else:
                lines.append("if buf[pos]:")
                lines.append("    pos = _p.skip_tagged_fields(buf, pos)")
                lines.append("else:")
                lines.append("    pos += 1")
        args = ", ".join(("f_" + f.py) if v in f.versions else py_default(f) for f in st.fields)
        lines.append(f"return {st.name}({args}), pos")
        return "".join("    " + ln + "\n" for ln in lines)

    def dec_value(self, f: Field, v: int, flexible: bool, local: str) -> list[str]:
        nullable = v in f.nullable
        c = "compact_" if flexible else ""
        if f.is_array:
            lines = [f"_n, pos = _p.read_{c}array_len(buf, pos)"]
            if nullable:
                lines.append(f"{local}: {py_type(f)}")
                lines.append("if _n < 0:")
                lines.append(f"    {local} = None")
                lines.append("else:")
                ind = "    "
            else:
                lines.append("if _n < 0:")
                lines.append('    raise _p.ProtocolError("null in a non-nullable array")')
                ind = ""
            if f.is_struct:
                assert f.struct is not None
                fn = self.function("dec", f.struct, v, flexible)
                lines.append(f"{ind}{local} = []")
                lines.append(f"{ind}for _ in range(_n):")
                lines.append(f"{ind}    _e_{f.py}, pos = {fn}(buf, pos)")
                lines.append(f"{ind}    {local}.append(_e_{f.py})")
            elif f.elem in FIXED:
                fmt = FIXED[f.elem]
                lines.append(f'{ind}{local} = list(_struct.unpack_from(">%d{fmt}" % _n, buf, pos))')
                lines.append(f"{ind}pos += {FIXED_SIZE[fmt]} * _n")
            elif f.elem == "string":
                lines.append(f"{ind}{local} = []")
                lines.append(f"{ind}for _ in range(_n):")
                lines.append(f"{ind}    _s, pos = _p.read_{c}string(buf, pos)")
                lines.append(f"{ind}    {local}.append(_s)")
            else:
                raise ValueError(f"unsupported array type {f.type}")
            return lines
        if f.is_struct:
            assert f.struct is not None
            fn = self.function("dec", f.struct, v, flexible)
            if nullable:
                return [
                    f"{local}: {py_type(f)} = None",
                    "if buf[pos] == 0xFF:",
                    "    pos += 1",
                    "else:",
                    f"    {local}, pos = {fn}(buf, pos + 1)",
                ]
            return [f"{local}, pos = {fn}(buf, pos)"]
        n = "nullable_" if nullable else ""
        if f.type in ("string", "bytes"):
            return [f"{local}, pos = _p.read_{c}{n}{f.type}(buf, pos)"]
        if f.type == "records":
            read = [f"{local}, pos = _p.read_{c}records(buf, pos)"]
            if not nullable:  # a null where the spec allows none reads as an empty record set
                read = [
                    f"_r, pos = _p.read_{c}records(buf, pos)",
                    f'{local} = memoryview(b"") if _r is None else _r',
                ]
            return read
        if f.type in FIXED:  # only reached for tagged fields
            return [f"({local},) = {self.st(FIXED[f.type])}.unpack_from(buf, pos)"]
        if f.type == "uuid":
            return [f"{local} = _p.read_uuid(bytes(buf[pos : pos + 16]))"]
        raise ValueError(f"unsupported type {f.type}")

    # encoding -------------------------------------------------------------------------------------------

    def enc_body(self, st: Struct, v: int, flexible: bool) -> str:
        lines: list[str] = []
        run: list[tuple[str, str]] = []  # (fmt, expression)

        def flush() -> None:
            if not run:
                return
            fmt = "".join(f for f, _ in run)
            lines.append(f"out.append({self.st(fmt)}.pack({', '.join(e for _, e in run)}))")
            run.clear()

        present = [f for f in st.fields if v in f.versions]
        regular = [f for f in present if not (flexible and v in f.tagged)]
        tagged = sorted((f for f in present if flexible and v in f.tagged), key=lambda f: f.tag or 0)
        for f in regular:
            expr = "m." + f.py
            if not f.is_array and f.type in FIXED:
                run.append((FIXED[f.type], expr))
            elif f.type == "uuid":
                run.append(("16s", expr + ".bytes"))
            else:
                flush()
                lines.extend(self.enc_value(f, v, flexible, expr, "out"))
        if flexible:
            if tagged:
                flush()
                lines.append("_tags: list[tuple[int, bytes]] = []")
                for f in tagged:
                    expr = "m." + f.py
                    lines.append(f"if {self.nondefault(f, expr)}:")
                    t = "_t_" + f.py
                    lines.append(f"    {t}: list[_p.Chunk] = []")
                    if f.type in FIXED:
                        lines.append(f"    {t}.append({self.st(FIXED[f.type])}.pack({expr}))")
                    else:
                        lines.extend("    " + ln for ln in self.enc_value(f, v, flexible, expr, t))
                    lines.append(f'    _tags.append(({f.tag}, b"".join({t})))')
                lines.append("out.append(_p.tagged_fields(_tags))")
            else:
                run.append(("B", "0"))
        flush()
        if not lines:
            lines.append("pass")
        return "".join("    " + ln + "\n" for ln in lines)

    def nondefault(self, f: Field, expr: str) -> str:
        if f.is_struct and not f.is_array:  # like Kafka's generator: a default-valued struct is left out
            assert f.struct is not None
            return f"{expr} is not None and {expr} != {f.struct.name}()"
        d = py_default(f)
        if d == "None":
            return f"{expr} is not None"
        if d == "[]":
            return expr
        return f"{expr} != {d}"

    def enc_value(self, f: Field, v: int, flexible: bool, expr: str, out: str) -> list[str]:
        nullable = v in f.nullable
        c = "compact_" if flexible else ""
        if f.is_array:
            lines: list[str] = []
            ind = ""
            if not nullable and not f.nullable.empty:
                lines.append(f"{expr}_ = _p.required({expr})".replace(".", "_", 1))
                expr = expr.replace(".", "_", 1) + "_"
            if nullable:
                null = "_p.NULL_COMPACT_ARRAY" if flexible else "_p.NULL_ARRAY"
                lines += [f"if {expr} is None:", f"    {out}.append({null})", "else:"]
                ind = "    "
            lines.append(f"{ind}{out}.append(_p.{c}array_len(len({expr})))")
            if f.is_struct:
                assert f.struct is not None
                fn = self.function("enc", f.struct, v, flexible)
                lines.append(f"{ind}for _e_{f.py} in {expr}:")
                lines.append(f"{ind}    {fn}(_e_{f.py}, {out})")
            elif f.elem in FIXED:
                fmt = FIXED[f.elem]
                lines.append(f'{ind}{out}.append(_struct.pack(">%d{fmt}" % len({expr}), *{expr}))')
            elif f.elem == "string":
                lines.append(f"{ind}for _s in {expr}:")
                lines.append(f"{ind}    {out}.append(_p.{c}string(_s))")
            else:
                raise ValueError(f"unsupported array type {f.type}")
            return lines
        if f.is_struct:
            assert f.struct is not None
            fn = self.function("enc", f.struct, v, flexible)
            if nullable:
                return [
                    f"if {expr} is None:",
                    f'    {out}.append(b"\\xff")',
                    "else:",
                    f'    {out}.append(b"\\x01")',
                    f"    {fn}({expr}, {out})",
                ]
            return [f"{fn}({expr} if {expr} is not None else {f.struct.name}(), {out})"]
        n = "nullable_" if nullable else ""
        if f.type == "string":
            return [f"{out}.append(_p.{c}{n}string({expr}))"]
        if f.type == "bytes":
            fn = f"{c}{n}bytes" if (c or n) else "bytes_"
            return [f"{out}.append(_p.{fn}({expr}))"]
        if f.type == "records":
            return [
                f"{out}.append(_p.{c}records_len({expr}))",
                f"if {expr} is not None:",
                f"    {out}.append({expr})",
            ]
        if f.type == "uuid":
            return [f"{out}.append({expr}.bytes)"]
        raise ValueError(f"unsupported type {f.type}")


# --- modules ---------------------------------------------------------------------------------------------

HEADER = "# AUTOGENERATED by tools/gen_protocol.py from Kafka's {src} — do not edit.\n"


def module_name(api: str) -> str:
    return snake(api)


def generate_api(api: str, lo: int, hi: int, spec_dir: Path = SPEC_DIR) -> tuple[str, dict[str, object]]:
    req = load_json(spec_dir / f"{api}Request.json")
    resp = load_json(spec_dir / f"{api}Response.json")
    structs: dict[str, Struct] = {}
    req_st = SpecReader(structs, "Request").read_message(req)
    resp_st = SpecReader(structs, "Response").read_message(resp)
    info: dict[str, object] = {"key": req["apiKey"], "lo": lo, "hi": hi}
    em = Emitter()
    tables: list[str] = []
    for spec, st, kind in ((req, req_st, "REQUEST"), (resp, resp_st, "RESPONSE")):
        valid = Versions.parse(str(spec["validVersions"]))
        flex = Versions.parse(str(spec["flexibleVersions"]))
        assert lo in valid, (api, kind, valid)
        assert hi in valid, (api, kind, valid)
        info[kind.lower() + "_flexible_from"] = flex.lo if not flex.empty else -1
        for direction in ("dec", "enc"):
            names = [em.function(direction, st, v, v in flex) for v in range(lo, hi + 1)]
            table = "DECODERS" if direction == "dec" else "ENCODERS"
            typ = "_Decoder" if direction == "dec" else "_Encoder"
            entries = ", ".join(f"{v}: {n}" for v, n in zip(range(lo, hi + 1), names, strict=True))
            tables.append(f"{kind}_{table}: dict[int, {typ}] = {{{entries}}}\n")
    ours = spec_dir == EXACTLY_SPEC_DIR
    src = f"{api}Request.json and {api}Response.json"
    if ours:
        out = [HEADER.replace("Kafka's {src}", "exactly's {src}").format(src=src)]
    else:
        out = [HEADER.format(src=src)]
    kind_name = "exactly extension" if ours else "Kafka"
    out.append(f'"""Codecs for the {kind_name} ' + api + " API (key " + str(req["apiKey"]) + ")")
    out.append(f', versions {lo}-{hi}."""\n\n')
    out.append("from __future__ import annotations\n")
    if any("memoryview" in py_type(f) for st in structs.values() for f in st.fields):
        # the compiled build (mypyc) resolves a dataclass's annotations in the module's globals
        out.append("from builtins import memoryview\n")
    out.append("\nimport struct as _struct\nimport uuid\nfrom collections.abc import Callable\n")
    out.append("from dataclasses import dataclass, field\nfrom typing import Any\n\n")
    out.append("from exactly.protocol import primitives as _p\n\n")
    out.append("# ruff: noqa\n")
    out.append(f"API_KEY = {req['apiKey']}\nMIN_VERSION = {lo}\nMAX_VERSION = {hi}\n")
    out.append(f"REQUEST_FLEXIBLE_FROM = {info['request_flexible_from']}\n")
    out.append(f"RESPONSE_FLEXIBLE_FROM = {info['response_flexible_from']}\n\n")
    out.append("_Decoder = Callable[[memoryview, int], tuple[Any, int]]\n")
    out.append("_Encoder = Callable[[Any, list[_p.Chunk]], None]\n")
    for fmt, name in sorted(em.structs_fmt.items(), key=lambda kv: kv[1]):
        out.append(f'{name} = _struct.Struct(">{fmt}")\n')
    for st in structs.values():
        out.append("\n\n@dataclass(slots=True)\n")
        out.append(f"class {st.name}:\n")
        if not st.fields:
            out.append("    pass\n")
        for f in st.fields:
            out.append(f"    {f.py}: {py_type(f)} = {dataclass_default(f)}\n")
    for fn in em.functions:
        out.append("\n\n" + fn)
    out.append("\n\n")
    out.extend(tables)
    out.append(
        "\n# each struct's lists of structs: field -> element class (protocol/error_response.py reads this,\n"
        "# not the annotations, which the compiled build erases to `list`)\n"
        "STRUCT_LISTS: dict[type[Any], dict[str, type[Any]]] = {\n"
    )
    for st in structs.values():
        lists = [(f.py, f.struct.name) for f in st.fields if f.is_array and f.struct is not None]
        if lists:
            entries = ", ".join(f'"{name}": {element}' for name, element in lists)
            out.append(f"    {st.name}: {{{entries}}},\n")
    out.append("}\n")
    return "".join(out), info


def generate_index(infos: dict[str, dict[str, object]]) -> str:
    out = [HEADER.format(src="message specs (index)")]
    out.append('"""Every generated API: its key and the module with its codecs."""\n\n')
    out.append("from __future__ import annotations\n\n")
    out.append("from enum import IntEnum\nfrom types import ModuleType\n\n")
    out.append("from exactly.protocol.messages import (\n")
    for api in sorted(infos):
        out.append(f"    {module_name(api)},\n")
    out.append(")\n\n\nclass ApiKey(IntEnum):\n")
    for api, info in sorted(infos.items(), key=lambda kv: int(kv[1]["key"])):  # type: ignore[call-overload]
        out.append(f"    {snake(api).upper()} = {info['key']}\n")
    out.append("\n\nMODULES: dict[ApiKey, ModuleType] = {\n")
    for api, _info in sorted(infos.items(), key=lambda kv: int(kv[1]["key"])):  # type: ignore[call-overload]
        out.append(f"    ApiKey.{snake(api).upper()}: {module_name(api)},\n")
    out.append("}\n")
    return "".join(out)


def generate_all() -> dict[Path, str]:
    files: dict[Path, str] = {}
    infos: dict[str, dict[str, object]] = {}
    apis = [(api, lo, hi, SPEC_DIR) for api, (lo, hi) in APIS.items()]
    apis += [(api, lo, hi, KAFKA_EXTRA_SPEC_DIR) for api, (lo, hi) in KAFKA_EXTRA_APIS.items()]
    apis += [(api, lo, hi, EXACTLY_SPEC_DIR) for api, (lo, hi) in EXACTLY_APIS.items()]
    for api, lo, hi, spec_dir in apis:
        text, info = generate_api(api, lo, hi, spec_dir)
        files[OUT_DIR / f"{module_name(api)}.py"] = text
        infos[api] = info
    files[OUT_DIR / "__init__.py"] = generate_index(infos)
    return files


def format_source(files: dict[Path, str]) -> dict[Path, str]:
    """Run `ruff format` over the generated text so that committed files are formatted deterministically."""
    import subprocess

    ruff = Path(sys.executable).parent / "ruff"
    formatted: dict[Path, str] = {}
    for path, text in files.items():
        proc = subprocess.run(
            [str(ruff), "format", "--stdin-filename", str(path), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        )
        formatted[path] = proc.stdout
    return formatted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the committed files are stale")
    args = parser.parse_args(argv)
    files = format_source(generate_all())
    stale = [p for p, t in files.items() if not p.exists() or p.read_text() != t]
    extra = [p for p in OUT_DIR.glob("*.py") if p not in files]
    if args.check:
        for p in stale + extra:
            print(f"stale generated file: {p}", file=sys.stderr)
        return 1 if stale or extra else 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for p in extra:
        p.unlink()
    for p in stale:
        p.write_text(files[p])
    print(f"wrote {len(stale)} of {len(files)} modules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
