"""Hypothesis strategies for what a client may write to a stdio server: one example is a
`Script`, a list of pieces rendered to bytes and written in a few arbitrary chunks.

Pieces: a request of every method (tool arguments from each tool's inputSchema, or mutated,
or garbage; URIs with `../`; the 2026-07-28 `_meta` envelope or a broken one), notifications,
cancels naming earlier requests, responses to nothing, batches, JSON-RPC edge cases (odd ids,
wrong `jsonrpc`, params as a list), and byte-level damage (invalid UTF-8, NUL, lone CR, BOM,
truncation, several frames on one line, empty lines, deep nesting, lines of a few MB).
Request ids are placeholders (`IdRef`) numbered at render time, so no two examples share one.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from specactor.protocol.context import LOG_LEVELS
from specactor.protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
)
from tests.schema_strategies import from_schema

_serial = itertools.count(1)
_MARK = "\ue000\ue001id{}\ue001\ue000"

# ---------------------------------------------------------------------- ids

# "again" reuses the id rendered just before it: two requests in flight under one id.
VALID_IDS = ["int", "int", "int", "str", "str", "neg", "zero", "empty", "big", "huge", "negbig", "escaped", "again"]
ODD_IDS = ["float", "floatint", "exp", "true", "null", "list", "object", "surrogate"]


@dataclass(frozen=True)
class IdRef:
    """An id of some kind, made unique when rendered. `text` seasons string ids."""

    kind: str
    text: str = ""

    def literal(self, n: int) -> str:
        table = {
            "int": str(n), "neg": str(-n), "zero": "0", "empty": '""', "big": str(2**63 + n),
            "huge": str(10**30 + n), "negbig": str(-(2**63) - n), "float": f"{n}.5", "floatint": f"{n}.0",
            "exp": f"{n}e2", "true": "true", "null": "null", "list": f"[{n}]", "object": f'{{"n":{n}}}',
            "surrogate": '"\\ud800"', "str": json.dumps(f"{self.text}#{n}", ensure_ascii=False),
            "escaped": json.dumps(f"\u0000\n\"\\{n}"), "again": str(n),
        }
        return table[self.kind]


@dataclass(frozen=True)
class Earlier:
    """The id of the `back`-th request rendered before it in the same example (for cancels)."""

    back: int


@dataclass
class Render:
    ids: list[str] = field(default_factory=list)  # literals of the valid ids rendered so far

    def encode(self, obj: Any, *, spaced: bool = False) -> bytes:
        """JSON with each placeholder swapped for its literal."""
        swaps: dict[str, str] = {}

        def walk(node: Any) -> Any:
            if isinstance(node, IdRef | Earlier):
                if isinstance(node, IdRef) and node.kind == "again" and self.ids:
                    literal = self.ids[-1]
                elif isinstance(node, IdRef):
                    literal = node.literal(next(_serial))
                    if node.kind in VALID_IDS:
                        self.ids.append(literal)
                else:
                    literal = self.ids[-1 - node.back % len(self.ids)] if self.ids else "1"
                mark = _MARK.format(len(swaps))
                swaps[json.dumps(mark, ensure_ascii=False)] = literal
                return mark
            if isinstance(node, dict):
                return {k: walk(v) for k, v in node.items()}
            if isinstance(node, list):
                return [walk(v) for v in node]
            return node

        text = json.dumps(walk(obj), ensure_ascii=False, separators=(", ", ": ") if spaced else (",", ":"))
        for mark, literal in swaps.items():
            text = text.replace(mark, literal)
        return text.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------- JSON values and params

text = st.text(max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8)
ids = st.builds(IdRef, st.sampled_from(VALID_IDS), text)
odd_ids = st.builds(IdRef, st.sampled_from(ODD_IDS))
PATHS = ["..", "../..", "../../../etc/passwd", "..%2f..%2fetc", "%2e%2e/%2e%2e", "a/../../b", "/etc/passwd",
         "./.", "\x00", "%00", "a\\..\\..\\b", "é/漢/😀", "", "a" * 300, "~", "//", "a?b#c", "{x}"]
_SCHEMA_CACHE: dict[str, st.SearchStrategy[Any]] = {}


def schema_args(name: str, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if name not in _SCHEMA_CACHE:
        _SCHEMA_CACHE[name] = from_schema(schema)
    return _SCHEMA_CACHE[name]


@st.composite
def tool_arguments(draw: st.DrawFn, name: str, schema: dict[str, Any]) -> Any:
    how = draw(st.sampled_from(["valid", "valid", "valid", "drop", "wrong", "extra", "garbage"]))
    if how == "garbage":
        return draw(json_values)
    args = draw(schema_args(name, schema))
    if not isinstance(args, dict):
        return args
    args = dict(args)
    if how == "drop" and args:
        del args[draw(st.sampled_from(sorted(args)))]
    elif how == "wrong" and args:
        args[draw(st.sampled_from(sorted(args)))] = draw(json_values)
    elif how == "extra":
        args[draw(text)] = draw(json_values)
    return args


@st.composite
def uris(draw: st.DrawFn, catalog: dict[str, Any]) -> str:
    how = draw(st.sampled_from(["listed", "template", "template", "scheme", "text"]))
    if how == "listed" and catalog["resources"]:
        return str(draw(st.sampled_from(catalog["resources"])))
    if how in ("template", "listed") and catalog["templates"]:
        template = draw(st.sampled_from(catalog["templates"]))
        head, _, rest = template.partition("{")
        tail = rest.partition("}")[2]
        return f"{head}{draw(st.sampled_from(PATHS) | text)}{tail}"
    if how == "scheme":
        scheme = draw(st.sampled_from(["openspec://", "airsspec:///", "specactor://", "file:///", "", "x:"]))
        return scheme + draw(st.sampled_from(PATHS) | text)
    return draw(text)


def meta_envelope(era: str) -> st.SearchStrategy[Any]:
    good: dict[str, Any] = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
    variants = st.one_of(
        st.just(good),
        st.fixed_dictionaries({META_PROTOCOL_VERSION: st.just("2026-07-28"), META_CLIENT_CAPABILITIES: st.just({}),
                               "progressToken": st.integers() | text,
                               META_LOG_LEVEL: st.sampled_from(LOG_LEVELS) | text}),
        st.fixed_dictionaries({META_PROTOCOL_VERSION: st.sampled_from(SUPPORTED_VERSIONS) | json_values}),
        st.fixed_dictionaries({META_CLIENT_CAPABILITIES: json_values}),
        json_values)
    if era == "2026-07-28":
        return st.one_of(*[st.just(good)] * 6, variants)
    return st.one_of(*[st.none()] * 6, variants)


@st.composite
def params_for(draw: st.DrawFn, method: str, catalog: dict[str, Any]) -> dict[str, Any]:
    tools, prompts = catalog["tools"], catalog["prompts"]
    match method:
        case "initialize":
            return {"protocolVersion": draw(st.sampled_from(SUPPORTED_VERSIONS) | text), "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "0"}}
        case "tools/call":
            name = draw(st.sampled_from(sorted(tools)) | text)
            params = {"name": name}
            if name in tools:
                params["arguments"] = draw(tool_arguments(name, tools[name]))
            return params
        case "resources/read" | "resources/subscribe" | "resources/unsubscribe":
            return {"uri": draw(uris(catalog))}
        case "prompts/get":
            name = draw(st.sampled_from(sorted(prompts)) | text)
            names = st.sampled_from(prompts[name]) | text if prompts.get(name) else text
            return {"name": name, "arguments": draw(st.dictionaries(names, text, max_size=3) | json_values)}
        case "completion/complete":
            ref = draw(st.one_of(
                st.builds(lambda n: {"type": "ref/prompt", "name": n}, st.sampled_from(sorted(prompts)) | text),
                st.builds(lambda u: {"type": "ref/resource", "uri": u}, st.sampled_from(catalog["templates"]) | text),
                json_values))
            return {"ref": ref, "argument": {"name": draw(text), "value": draw(text)}}
        case "logging/setLevel":
            return {"level": draw(st.sampled_from(LOG_LEVELS) | text)}
        case "tools/list" | "resources/list" | "prompts/list" | "resources/templates/list":
            return {"cursor": draw(st.none() | text | st.just("dG9vbHM6Mg==") | st.just("dG9vbHM6LTE="))}
        case "subscriptions/listen":
            return {"notifications": draw(st.fixed_dictionaries({}, optional={
                "toolsListChanged": st.booleans(), "resourcesListChanged": st.booleans(),
                "resourceSubscriptions": st.lists(uris(catalog), max_size=2)}))}
    return {}


METHODS = ["initialize", "ping", "tools/list", "tools/call", "tools/call", "tools/call", "resources/list",
           "resources/templates/list", "resources/read", "resources/read", "resources/subscribe",
           "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
           "server/discover", "subscriptions/listen"]


@st.composite
def requests(draw: st.DrawFn, catalog: dict[str, Any], era: str) -> dict[str, Any]:
    method = draw(st.sampled_from(METHODS) | text)
    params = draw(params_for(method, catalog))
    meta = draw(meta_envelope(era))
    if meta is not None:
        params["_meta"] = meta
    if method in ("tools/call", "prompts/get", "resources/read") and draw(st.integers(0, 9)) == 0:
        # the 2026-07-28 input-required round trip, answered with forged or garbage state
        params.update(draw(st.fixed_dictionaries({}, optional={
            "requestState": text | st.sampled_from(["a.b", ".", "é.é", "eyJ9.AAAA", "=.="]),
            "inputResponses": st.dictionaries(text, json_values, max_size=2) | json_values})))
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(ids), "method": method}
    if params or draw(st.booleans()):
        msg["params"] = params
    return msg


@st.composite
def notifications(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(st.sampled_from(["notifications/cancelled"] * 3 + ["notifications/initialized",
                                   "notifications/progress", "notifications/roots/list_changed"]) | text)
    params: Any = {}
    if method == "notifications/cancelled":
        params = {"requestId": draw(st.builds(Earlier, st.integers(0, 5)) | ids),
                  **draw(st.fixed_dictionaries({}, optional={"reason": text | json_values}))}
    elif method == "notifications/progress":
        params = {"progressToken": draw(st.integers() | text), "progress": draw(st.floats(allow_nan=False))}
    return {"jsonrpc": "2.0", "method": method, "params": params}


@st.composite
def responses(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(st.sampled_from([{"result": {}}, {"error": {"code": -1, "message": "no"}},
                                 {"result": None}, {"result": {}, "error": {}}]))
    return {"jsonrpc": "2.0", "id": draw(ids), **body}


@st.composite
def mutated(draw: st.DrawFn, messages: st.SearchStrategy[dict[str, Any]]) -> Any:
    """A message with one JSON-RPC-level change: odd id, wrong jsonrpc, odd method or params."""
    msg = dict(draw(messages))
    change = draw(st.sampled_from(["odd_id", "drop_id", "jsonrpc", "no_jsonrpc", "method", "params_list",
                                   "params_scalar", "extra"]))
    if change == "odd_id":
        msg["id"] = draw(odd_ids)
    elif change == "drop_id":
        msg.pop("id", None)
    elif change == "jsonrpc":
        msg["jsonrpc"] = draw(st.sampled_from(["1.0", "2", 2.0, None, "2.0 "]) | json_values)
    elif change == "no_jsonrpc":
        del msg["jsonrpc"]
    elif change == "method":
        msg["method"] = draw(st.sampled_from(["", None, 5, ["ping"]]) | json_values)
    elif change == "params_list":
        msg["params"] = draw(st.lists(json_values, max_size=3))
    elif change == "params_scalar":
        msg["params"] = draw(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text)
    else:
        msg[draw(text)] = draw(json_values)
    return msg


# ---------------------------------------------------------------------- pieces (lines of bytes)

DAMAGE = ["none"] * 8 + ["truncate", "insert", "flip", "special", "bom", "twice"]
SPECIAL = [b"\x00", b"\r", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\n", b"\x1b[2J", b"\\"]
ENDINGS = [b"\n"] * 6 + [b"\r\n", b"\n\n", b" \n", b"\r\r\n", b"\t\n"]


@dataclass(frozen=True)
class Piece:
    """JSON objects (several means several frames on one line), maybe damaged, then a line end."""

    objs: tuple[Any, ...]
    ending: bytes = b"\n"
    spaced: bool = False
    damage: str = "none"
    at: int = 0  # where damage lands, modulo the length
    extra: bytes = b""
    joiner: bytes = b""

    def render(self, ctx: Render) -> bytes:
        data = self.joiner.join(ctx.encode(obj, spaced=self.spaced) for obj in self.objs)
        at = self.at % (len(data) + 1)
        match self.damage:
            case "truncate":
                data = data[:at]
            case "insert" | "special":
                data = data[:at] + self.extra + data[at:]
            case "flip" if at < len(data):
                data = data[:at] + self.extra[:1] + data[at + 1:]
            case "bom":
                data = b"\xef\xbb\xbf" + data
            case "twice":
                data = data + self.extra + data
        return data + self.ending


@dataclass(frozen=True)
class RawPiece:
    data: bytes

    def render(self, ctx: Render) -> bytes:
        return self.data


@dataclass(frozen=True)
class LongPiece:
    """A line of `size` bytes or more: a long argument, garbage, deep nesting, or padding."""

    kind: str
    size: int

    def render(self, ctx: Render) -> bytes:
        n = self.size
        match self.kind:
            case "argument":
                return ctx.encode({"jsonrpc": "2.0", "id": IdRef("int"), "method": "tools/call",
                                   "params": {"name": "spec_status", "arguments": {"spec_id": "a" * n}}}) + b"\n"
            case "tool_name":
                return ctx.encode({"jsonrpc": "2.0", "id": IdRef("int"), "method": "tools/call",
                                   "params": {"name": "é" * (n // 2)}}) + b"\n"
            case "nesting":
                return b"[" * n + b"\n"
            case "objects":
                return b'{"a":' * (n // 5) + b"\n"
            case "padding":
                return b" " * n + ctx.encode({"jsonrpc": "2.0", "id": IdRef("int"), "method": "ping"}) + b"\n"
        return b"x" * n + b"\n"


@dataclass(frozen=True)
class FloodPiece:
    """`count` cheap requests in one write (past the dispatcher's pending bound of 256 when
    large), each `cancel_every`-th one cancelled right after it is sent (0: none)."""

    count: int
    cancel_every: int
    modern: bool

    def render(self, ctx: Render) -> bytes:
        meta = {"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}} if self.modern else {}
        out = []
        for i in range(self.count):
            call = {"jsonrpc": "2.0", "id": IdRef("int"), "method": "tools/call",
                    "params": {"name": ("spec_list", "sync_status", "memory_search")[i % 3],
                               "arguments": {"query": "x"} if i % 3 == 2 else {}, **meta}}
            out.append(ctx.encode(call) + b"\n")
            if self.cancel_every and i % self.cancel_every == 0:
                out.append(ctx.encode({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": Earlier(0)}}) + b"\n")
        return b"".join(out)


@st.composite
def pieces(draw: st.DrawFn, catalog: dict[str, Any], era: str) -> Piece | RawPiece | LongPiece | FloodPiece:
    kind = draw(st.sampled_from(["request"] * 8 + ["notification"] * 3 + ["mutated"] * 3 + [
        "response", "batch", "joined", "raw", "text", "scalar", "blank", "long", "flood"]))
    reqs = requests(catalog, era)
    any_message = reqs | notifications() | responses()
    if kind == "raw":
        return RawPiece(draw(st.binary(max_size=200)) + b"\n")
    if kind == "text":
        return RawPiece(draw(st.text(max_size=200)).encode("utf-8", "surrogatepass") + b"\n")
    if kind == "scalar":
        return RawPiece(draw(st.sampled_from([b"1", b'"x"', b"null", b"true", b"[]", b"{}", b"[[]]", b"[1]",
                                              b"{\"jsonrpc\":\"2.0\"}", b"-", b"{", b"}"])) + b"\n")
    if kind == "blank":
        return RawPiece(draw(st.sampled_from([b"\n", b"\r\n", b" \n", b"\t\n", b"\x0b\n", b"\x0c\n", b"\r\n\r\n"])))
    if kind == "long":
        size = draw(st.sampled_from([65_535, 65_536, 65_537, 1_048_575, 1_048_576, 1_048_577, 3_000_000])
                    | st.integers(1, 4_000_000))
        return LongPiece(draw(st.sampled_from(["argument", "tool_name", "nesting", "objects", "padding", "garbage"])),
                         size)
    if kind == "flood":
        return FloodPiece(draw(st.sampled_from([20, 100, 300, 600])), draw(st.sampled_from([0, 0, 1, 2, 7])),
                          era == "2026-07-28")
    if kind == "batch":
        batch = draw(st.lists(any_message | mutated(reqs) | json_values, max_size=4))
        objs: tuple[Any, ...] = ([batch] if draw(st.booleans()) else batch,)
    elif kind == "joined":
        objs = tuple(draw(st.lists(any_message, min_size=2, max_size=3)))
    else:
        source = {"request": reqs, "notification": notifications(), "response": responses(),
                  "mutated": mutated(any_message)}[kind]
        objs = (draw(source),)
    damage = draw(st.sampled_from(DAMAGE))
    extra = draw(st.sampled_from(SPECIAL)) if damage in ("special", "twice") else draw(st.binary(min_size=1,
                                                                                                max_size=4))
    if damage == "twice":
        extra = draw(st.sampled_from([b"", b" ", b"\r", b"\x00", b","]))
    return Piece(objs, ending=draw(st.sampled_from(ENDINGS)), spaced=draw(st.booleans()), damage=damage,
                 at=draw(st.integers(0, 1 << 20)), extra=extra,
                 joiner=draw(st.sampled_from([b"", b" ", b"\r", b"\t"])))


@dataclass(frozen=True)
class Script:
    """One example: its pieces, and where the rendered bytes are split into writes."""

    items: tuple[Piece | RawPiece | LongPiece | FloodPiece, ...]
    cuts: tuple[int, ...]

    def chunks(self) -> list[bytes]:
        ctx = Render()
        data = b"".join(piece.render(ctx) for piece in self.items)
        if not data.endswith(b"\n"):
            data += b"\n"
        points = sorted({c % len(data) for c in self.cuts} | {0, len(data)})
        return [data[a:b] for a, b in itertools.pairwise(points) if a < b]


def scripts(catalog: dict[str, Any], era: str) -> st.SearchStrategy[Script]:
    return st.builds(Script, st.lists(pieces(catalog, era), min_size=1, max_size=8).map(tuple),
                     st.lists(st.integers(0, 1 << 22), max_size=3).map(tuple))
