"""The replay server's request reader and h11 read the same bytes the same way.

:func:`streamtape.serve.request.read_request` is a small strict reader (its module
docstring has the table of answers). h11 is the sans-I/O HTTP/1.1 parser the
Python world checks itself against (wsproto, httpcore and hypercorn are built on
it). Hypothesis writes requests, well formed and malformed, and both read them:
they must agree on accepting or refusing, and on an accepted request's method,
target, version, headers (names case-insensitive, order kept) and body. The same
bytes go to :func:`~streamtape.serve.request.peek_request`, the proxy's look at a
first request, which must read the same request or decline it.

Where the two differ by design, the difference is a :class:`Difference` below,
with its reason and its direction (the reader refuses what h11 takes, or takes
what h11 refuses). Each generated request carries the differences it exercises,
and a disagreement passes only when one of them explains it in its direction.
Nothing else is filtered.

h11 0.16 or later is required: 0.14 (which mitmproxy 11 pins on Python 3.11)
takes chunk data not followed by CRLF (CVE-2025-43859), which the reader rightly
refuses, so that version is not a reference to agree with.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamtape.serve.request import MAX_HEAD, BadRequest, HTTPRequest, peek_request, read_request

if TYPE_CHECKING:
    import h11
else:
    h11 = pytest.importorskip("h11")

H11_VERSION = metadata.version("h11")
if tuple(int(x) for x in H11_VERSION.split(".")[:2]) < (0, 16):
    pytest.skip(
        f"h11 {H11_VERSION} is installed; the reference must be h11 >= 0.16: older h11 "
        "takes chunk data not followed by CRLF (CVE-2025-43859), which the reader rightly "
        "refuses (on Python 3.11 mitmproxy 11 pins h11 0.14)",
        allow_module_level=True,
    )

MAX_BODY = 64
"""The reader's body limit in this test: small, so that bodies over it are generated."""


# --------------------------------------------------------------------------- the differences


@dataclass(frozen=True)
class Difference:
    """A documented way the reader and h11 answer the same bytes differently."""

    name: str
    reader_refuses: bool
    """True: the reader refuses what h11 takes. False: the reader takes what h11 refuses."""
    why: str


BODY_OVER_LIMIT = Difference("body over the limit", True,
    "the reader answers 413 to a body over max_body, before reading it; h11 has no body limit")
HTTP_VERSION = Difference("HTTP version other than 1.0 and 1.1", True,
    "the reader answers 505 (the table: it speaks HTTP/1.1); h11 reads any HTTP/x.y")
BARE_LF = Difference("bare LF line ending", True,
    "the reader takes CRLF only and answers 400 to a bare LF (the table); RFC 9112 2.2 lets "
    "a recipient take one, and h11 does")
OBS_FOLD = Difference("obsolete line fold", True,
    "the reader answers 400 to an obs-fold (the table); RFC 9112 5.2 allows refusing or "
    "unfolding, and h11 unfolds")
LENGTH_AND_CHUNKED = Difference("Content-Length beside Transfer-Encoding", True,
    "the reader answers 400: two parsers could frame the body two ways (RFC 9112 6.1 says it "
    "ought to be handled as an error); h11 lets chunked win")
SPACE_BEFORE_CHUNK_EXT = Difference("whitespace before a chunk extension's ';'", False,
    "RFC 9112 7.1.1's chunk-ext allows BWS before the ';', and the reader takes it; h11's "
    "chunk line pattern does not")
SPACE_AFTER_CHUNK_SIZE = Difference("whitespace after a chunk size without an extension", True,
    "not in RFC 9112 7.1's grammar (chunk-size [ chunk-ext ] CRLF), so the reader refuses it; "
    "h11 takes trailing whitespace on purpose, for servers that send it")
CONTROL_IN_CHUNK_EXT = Difference("CR or NUL inside a chunk extension", True,
    "the reader refuses a bare CR or a NUL anywhere in a chunk line (the table); h11's "
    "extension pattern (';.*') takes any byte but LF")
VT_FF_IN_VALUE = Difference("VT or FF in a field value", False,
    "RFC 9110 5.5 lets a recipient keep control characters other than CR, LF and NUL, and the "
    "reader does, as it keeps \\x01 or DEL (so does h11); h11's field-value pattern excludes "
    "VT and FF only because Python's \\s matches them")
OBS_TEXT_TARGET = Difference("obs-text (bytes 0x80-0xff) in the target", False,
    "the reader takes raw non-ASCII bytes in a target (a raw UTF-8 path), read as Latin-1, as "
    "it does in field values; h11 takes only visible ASCII there")
LONG_NUMBER = Difference("more than 20 digits in a Content-Length or a chunk size", False,
    "h11 caps both at 20 digits; the reader reads the number (leading zeros and all) and "
    "answers 413 when it is over the limit")
LENGTH_SPELLED_TWICE = Difference("one Content-Length value written two ways", False,
    "the reader compares repeated Content-Length values as numbers (5 and 05 agree: RFC 9110 "
    "8.6, the same decimal value), h11 as strings")
EMPTY_CODING = Difference("an empty element in the Transfer-Encoding list", False,
    "RFC 9110 5.6.1: a recipient MUST take empty list elements ('chunked, '), and the reader "
    "does; h11 wants the value to be exactly 'chunked'")
FRAMING_TRAILER = Difference("Content-Length or Transfer-Encoding as a trailer field", False,
    "the reader discards trailer fields, which RFC 9110 6.5.1 allows (these two may not be "
    "trailers); h11 checks them as framing headers and refuses values it would not frame with")


# --------------------------------------------------------------------------- generating requests

TOKEN = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
VISIBLE = "".join(map(chr, range(0x21, 0x7F)))
VALUE = VISIBLE + " \t" + "\x01\x7f" + "\x80\xe9\xff"
"""Field value characters: visible ASCII, inner whitespace, two controls both readers keep,
obs-text. (The two only h11 refuses, :data:`VT_FF_IN_VALUE`, come as a flaw.)"""

NOT_TOKEN = '()<>@,;\\"/[]?={} '
"""The separators (RFC 9110 5.6.2): never in a token."""
tokens = st.text(TOKEN, min_size=1, max_size=8)
NAMES = ["Accept", "User-Agent", "Content-Type", "X-Request-Id", "Authorization", "Connection",
         "Expect", "Upgrade", "TE", "Accept-Encoding"]


@dataclass
class Built:
    """Bytes being put together, and the differences they exercise."""

    raw: bytes = b""
    marks: frozenset[Difference] = frozenset()

    def add(self, data: bytes, *marks: Difference) -> None:
        self.raw += data
        self.marks |= frozenset(marks)


@dataclass(frozen=True)
class Case:
    """A request's bytes and the differences they exercise."""

    raw: bytes
    marks: frozenset[Difference] = frozenset()


def flaw(draw: st.DrawFn, flaws: list[str], one_in: int) -> str:
    """``"none"`` most of the time, one of ``flaws`` once in ``one_in`` (shrinking goes to
    ``"none"``), so that most requests are well formed and a malformed one has one flaw."""
    if draw(st.integers(0, one_in - 1)) < one_in - 1:
        return "none"
    return draw(st.sampled_from(flaws))


@st.composite
def field_lines(draw: st.DrawFn, fields: list[tuple[str, str]]) -> Built:
    """Header (or trailer) lines for ``fields``, with optional whitespace, now and then
    a malformed one."""
    out = Built()
    for name, value in fields:
        ows = draw(st.sampled_from(["", " ", "  ", "\t", " \t"]))
        trail = draw(st.sampled_from(["", " ", "\t"]))
        line, ending = f"{name}:{ows}{value}{trail}", "\r\n"
        match flaw(draw, ["space-before-colon", "tab-before-colon", "no-colon", "empty-name",
                          "bad-name-char", "bare-cr", "nul", "vt-ff", "fold", "bare-lf"], 25):
            case "space-before-colon":
                line = f"{name} :{value}"
            case "tab-before-colon":
                line = f"{name}\t:{value}"
            case "no-colon":
                line = f"{name} {value}"
            case "empty-name":
                line = f":{value}"
            case "bad-name-char":
                line = f"{name}{draw(st.sampled_from(NOT_TOKEN))}x:{value}"
            case "bare-cr":
                line = f"{name}: a\rb"
            case "nul":
                line = f"{name}: a\x00b"
            case "vt-ff":
                line = f"{name}: a" + draw(st.sampled_from(["\x0b", "\x0c"])) + "b"
                out.marks |= {VT_FF_IN_VALUE}
            case "fold":
                line += "\r\n" + draw(st.sampled_from([" ", "\t", "  "])) + "folded"
                out.marks |= {OBS_FOLD}
            case "bare-lf":
                ending = "\n"
                out.marks |= {BARE_LF}
        out.add((line + ending).encode("latin-1"))
    return out


@st.composite
def header_lists(draw: st.DrawFn) -> list[tuple[str, str]]:
    names = st.one_of(st.sampled_from(NAMES), tokens)
    values = st.text(VALUE, max_size=12).map(lambda v: v.strip(" \t"))
    return draw(st.lists(st.tuples(names, values), max_size=5))


@st.composite
def chunked_bodies(draw: st.DrawFn) -> tuple[list[tuple[str, str]], Built]:
    """Transfer-Encoding headers and a chunked body (extensions, trailers), with its marks."""
    built = Built()
    te = "chunked"
    match flaw(draw, ["case", "empty-element", "gzip", "identity", "twice", "two-fields"], 8):
        case "case":
            te = draw(st.sampled_from(["Chunked", "CHUNKED"]))
        case "empty-element":
            te = draw(st.sampled_from(["chunked, ", ", chunked", "chunked,,"]))
            built.marks |= {EMPTY_CODING}
        case "gzip":
            te = "gzip, chunked"
        case "identity":
            te = "identity"
        case "twice":
            te = "chunked, chunked"
    headers = [("Transfer-Encoding", te)]
    if te == "chunked" and draw(st.integers(0, 19)) == 19:
        headers.append(("Transfer-Encoding", "chunked"))  # two fields: chunked twice
    pieces = draw(st.lists(st.binary(min_size=1, max_size=30), max_size=4))
    if sum(map(len, pieces)) > MAX_BODY:
        built.marks |= {BODY_OVER_LIMIT}
    for piece in [*pieces, b""]:
        size = len(piece)
        digits = draw(st.sampled_from(["%x", "%X"])) % size
        digits = "0" * draw(st.sampled_from([0, 0, 0, 0, 1, 3])) + digits
        ext = "".join(draw(st.lists(st.sampled_from(
            [";a", ";name=value", ';q="quoted string"', "; spaced = x", ";e="]), max_size=2)))
        line_end, after = "\r\n", b"\r\n"
        match flaw(draw, ["bad-size", "negative", "0x", "size+1", "size-1", "long-size",
                          "no-crlf-after-data", "lf-after-data", "junk-after-data",
                          "space-after-size", "space-before-ext", "bare-lf-size-line",
                          "cr-in-ext", "nul-in-ext", "missing"], 12):
            case "missing":  # the body ends here, without its last chunk
                return headers, built
            case "bad-size":
                digits = draw(st.sampled_from(["zz", "", " ", "1_0", "g", "+1"]))
            case "negative":
                digits = "-" + digits
            case "0x":
                digits = "0x" + digits
            case "size+1":
                digits = "%x" % (size + 1)
            case "size-1" if size:
                digits = "%x" % (size - 1)
            case "long-size":
                digits = "0" * 20 + digits
                built.marks |= {LONG_NUMBER}
            case "no-crlf-after-data":
                after = b""
            case "lf-after-data":
                after = b"\n"
            case "junk-after-data":
                after = b"XY"
            case "space-after-size":
                ext = draw(st.sampled_from([" ", "\t", "  "]))
                built.marks |= {SPACE_AFTER_CHUNK_SIZE}
            case "space-before-ext":
                ext = draw(st.sampled_from([" ", "\t"])) + (ext or ";a")
                built.marks |= {SPACE_BEFORE_CHUNK_EXT}
            case "bare-lf-size-line":
                line_end = "\n"
            case "cr-in-ext":
                ext = ";a\rb"
                built.marks |= {CONTROL_IN_CHUNK_EXT}
            case "nul-in-ext":
                ext = ";a\x00b"
                built.marks |= {CONTROL_IN_CHUNK_EXT}
        built.add(f"{digits}{ext}{line_end}".encode("latin-1"))
        if not piece:
            break
        built.add(piece + after)
    trailers = draw(header_lists())
    if any(k.lower() in ("content-length", "transfer-encoding") for k, _ in trailers):
        built.marks |= {FRAMING_TRAILER}
    lines = draw(field_lines(trailers))
    built.add(lines.raw, *lines.marks)
    if flaw(draw, ["bare-lf"], 20) == "bare-lf":
        built.add(b"\n", BARE_LF)
    else:
        built.add(b"\r\n")
    return headers, built


@st.composite
def length_bodies(draw: st.DrawFn) -> tuple[list[tuple[str, str]], Built]:
    """Content-Length headers and the body, with its marks."""
    body = draw(st.binary(max_size=80))
    n = len(body)
    built = Built()
    form = draw(st.sampled_from(["plain", "zeros", "list", "twice"]))
    form = {"none": form}.get(flaw(draw, [
        "many-zeros", "twice-spelled", "conflicting", "conflicting-list", "empty", "negative",
        "plus", "hex", "trailing-junk", "short-body"], 8), form)
    values: list[str] = {
        "plain": [str(n)], "zeros": ["00" + str(n)], "many-zeros": ["0" * 20 + str(n)],
        "list": [f"{n}, {n}"], "twice": [str(n), str(n)], "twice-spelled": [str(n), "0" + str(n)],
        "conflicting": [str(n), str(n + 1)], "conflicting-list": [f"{n}, {n + 1}"],
        "empty": [""], "negative": [f"-{n}"], "plus": [f"+{n}"], "hex": [f"0x{n}"],
        "trailing-junk": [f"{n}a"], "short-body": [str(n + 3)],
    }[form]
    if form == "many-zeros":
        built.marks |= {LONG_NUMBER}
    if form == "twice-spelled":
        built.marks |= {LENGTH_SPELLED_TWICE}
    numbers = [int(x) for v in values for x in v.split(",") if x.strip().isdigit()]
    if max(numbers, default=0) > MAX_BODY:
        built.marks |= {BODY_OVER_LIMIT}
    built.add(body)
    return [("Content-Length", v) for v in values], built


@st.composite
def request_lines(draw: st.DrawFn) -> tuple[str, set[Difference]]:
    """A request line and its marks."""
    marks: set[Difference] = set()
    method = draw(st.one_of(st.sampled_from(
        ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "post"]), tokens))
    target = draw(st.one_of(st.sampled_from(
        ["/", "/v1/chat/completions", "/api/chat?stream=true&x=%20", "*",
         "http://api.test/v1/models", "api.test:443"]), st.text(VISIBLE, min_size=1, max_size=12)))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"]))
    sep = " "
    match flaw(draw, ["method", "target", "version", "other-version", "separator"], 6):
        case "method":
            method = draw(st.sampled_from(["", "GE(T", "GET\x00", "G\xe9T"]))
        case "target":
            target = draw(st.sampled_from(["", "/a b", "/a\tb", "/a\x01b", "/a\x7fb", "/a\x0bb",
                                           "/caf\xe9", "/\xff"]))
            if any("\x80" <= c <= "\xff" for c in target):
                marks.add(OBS_TEXT_TARGET)
        case "version":
            version = draw(st.sampled_from(["HTTP/1.10", "http/1.1", "HTTP/1", "HTTP/1.1 ",
                                            "HTTP/a.b", "HTTP/1.1\x00", ""]))
        case "other-version":
            version = draw(st.sampled_from(["HTTP/2.0", "HTTP/0.9", "HTTP/1.2", "HTTP/3.0"]))
            marks.add(HTTP_VERSION)
        case "separator":
            sep = draw(st.sampled_from(["  ", "\t", " \t"]))
    return f"{method}{sep}{target}{sep}{version}", marks


@st.composite
def requests(draw: st.DrawFn) -> Case:
    """One request's bytes, most well formed, some with a flaw, and the differences they
    exercise."""
    request_line, marks = draw(request_lines())
    headers = draw(header_lists())
    match flaw(draw, ["no-host", "two-hosts"], 10):
        case "none" | "two-hosts" as host:
            headers.insert(draw(st.integers(0, len(headers))), ("Host", "api.test"))
            if host == "two-hosts":
                headers.append(("host", "other.test"))
    if draw(st.integers(0, 9)) == 9:
        headers.append(("Expect", "100-continue"))
    body = Built()
    framing = draw(st.sampled_from(["none", "length", "chunked"]))
    if framing == "length":
        fields, body = draw(length_bodies())
        headers += fields
    elif framing == "chunked":
        fields, body = draw(chunked_bodies())
        if draw(st.integers(0, 9)) == 9:  # a Content-Length too, before or after
            fields.insert(draw(st.integers(0, len(fields))), ("Content-Length", "3"))
            marks.add(LENGTH_AND_CHUNKED)
        headers += fields
    lines = draw(field_lines(headers))
    head = (request_line + "\r\n").encode("latin-1") + lines.raw + b"\r\n"
    match flaw(draw, ["bare-lf", "empty-line-first"], 15):
        case "bare-lf":
            head = head.replace(b"\r\n", b"\n")
            marks.add(BARE_LF)
        case "empty-line-first":
            head = b"\r\n" + head
    return Case(head + body.raw, frozenset(marks | lines.marks | body.marks))


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Read:
    """An accepted request, as comparable values."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    lengths: frozenset[int]
    body: bytes


@dataclass(frozen=True)
class Refused:
    why: str


def _comparable(method: str, target: str, version: str, headers: list[tuple[str, str]],
                body: bytes) -> Read:
    """The request as compared, with the normalizations one side makes written out: h11
    folds repeated Content-Length values into one field (so the lengths are compared as
    a set of numbers, apart from the other fields) and writes Transfer-Encoding's value
    in lower case; the reader upper-cases the method (:class:`HTTPRequest`'s contract),
    so h11's is upper-cased by the caller."""
    lengths = frozenset(int(x) for k, v in headers if k.lower() == "content-length"
                        for x in v.split(","))
    kept = [(k.lower(), v.lower() if k.lower() == "transfer-encoding" else v)
            for k, v in headers if k.lower() != "content-length"]
    return Read(method, target, version, kept, lengths, body)


class _Writes:
    """The writer :func:`read_request` answers ``Expect: 100-continue`` on."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


def reader_reads(raw: bytes) -> Read | Refused:
    """The replay server's reader on ``raw``, then the end of the stream."""

    async def read() -> HTTPRequest | None:
        stream = asyncio.StreamReader(limit=MAX_HEAD)
        stream.feed_data(raw)
        stream.feed_eof()
        return await read_request(stream, cast(asyncio.StreamWriter, _Writes()),
                                  max_body=MAX_BODY, timeout=10)

    try:
        req = asyncio.run(read())
    except BadRequest as e:
        return Refused(f"{e.status} {e}")
    assert req is not None, "a request was sent"
    return _comparable(req.method, req.target, req.version, req.headers, req.body)


def h11_reads(raw: bytes) -> Read | Refused:
    """h11's server side on ``raw``, then the end of the stream: a Request, its Data, its
    EndOfMessage (trailers are not compared: the reader discards them)."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    conn.receive_data(raw)
    conn.receive_data(b"")
    try:
        event = conn.next_event()
        if not isinstance(event, h11.Request):
            return Refused(f"h11 gave {event!r}")
        body = b""
        while not isinstance(part := conn.next_event(), h11.EndOfMessage):
            if not isinstance(part, h11.Data):
                return Refused(f"h11 gave {part!r} inside the body")
            body += part.data
    except h11.RemoteProtocolError as e:
        return Refused(str(e))
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers.raw_items()]
    return _comparable(event.method.decode("latin-1").upper(), event.target.decode("latin-1"),
                       "HTTP/" + event.http_version.decode("ascii"), headers, body)


# --------------------------------------------------------------------------- the property


def _explained(case: Case, reader_refuses: bool) -> list[Difference]:
    return [d for d in case.marks if d.reader_refuses is reader_refuses]


def check_agreement(case: Case, ours: Read | Refused) -> None:
    """The reader (``ours``) and h11 agree, or a marked difference says why not."""
    theirs = h11_reads(case.raw)
    if isinstance(ours, Read) and isinstance(theirs, Read):
        assert ours == theirs
    elif isinstance(ours, Read):
        assert _explained(case, reader_refuses=False), f"only h11 refuses: {theirs}"
    elif isinstance(theirs, Read):
        assert _explained(case, reader_refuses=True), f"only the reader refuses: {ours}"


def check_peek(raw: bytes, ours: Read | Refused) -> None:
    """The proxy's peek reads the request the server reads (``ours``), or declines what
    needs a conversation (a chunked body, ``Expect``), or what the server refuses."""
    peeked = peek_request(raw, MAX_BODY)
    if isinstance(peeked, HTTPRequest):
        assert _comparable(peeked.method, peeked.target, peeked.version, peeked.headers,
                           peeked.body) == ours
    elif isinstance(ours, Read):
        assert peeked == "no"
        assert any(k in ("transfer-encoding", "expect") for k, _ in ours.headers), ours


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
# What the first runs found the reader taking and h11 refusing, all malformed (fixed since):
@example(Case(b"GET / HTTP/1.1\r\n\r\n"))  # no Host in HTTP/1.1 (RFC 9112 3.2: a MUST 400)
@example(Case(b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"))  # two (the same MUST)
@example(Case(b"GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n"))  # a tab, or a control, in the target
@example(Case(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"0\r\nno colon\r\n\r\n"))  # a malformed trailer line
# Chunk data not followed by CRLF: what h11 0.14 took (CVE-2025-43859).
@example(Case(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"3\r\nabcXY0\r\n\r\n"))
def test_the_reader_and_h11_agree_on_every_request(case: Case) -> None:
    ours = reader_reads(case.raw)
    check_agreement(case, ours)
    check_peek(case.raw, ours)


H = b"Host: a\r\n"
CHUNKED = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
DIFFERENCES = {
    BODY_OVER_LIMIT: b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 65\r\n\r\n" + b"x" * 65,
    HTTP_VERSION: b"GET / HTTP/1.2\r\n" + H + b"\r\n",
    BARE_LF: b"GET / HTTP/1.1\nHost: a\n\n",
    OBS_FOLD: b"GET / HTTP/1.1\r\n" + H + b"X: 1\r\n folded\r\n\r\n",
    LENGTH_AND_CHUNKED: CHUNKED[:-2] + b"Content-Length: 5\r\n\r\n0\r\n\r\n",
    SPACE_BEFORE_CHUNK_EXT: CHUNKED + b"3 ;a=b\r\nabc\r\n0\r\n\r\n",
    SPACE_AFTER_CHUNK_SIZE: CHUNKED + b"3 \r\nabc\r\n0\r\n\r\n",
    CONTROL_IN_CHUNK_EXT: CHUNKED + b"3;a\rb\r\nabc\r\n0\r\n\r\n",
    VT_FF_IN_VALUE: b"GET / HTTP/1.1\r\n" + H + b"X: a\x0bb\r\n\r\n",
    OBS_TEXT_TARGET: b"GET /caf\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n",
    LONG_NUMBER: CHUNKED + b"0" * 20 + b"3\r\nabc\r\n0\r\n\r\n",
    LENGTH_SPELLED_TWICE: b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nContent-Length: 03\r\n\r\nabc",
    EMPTY_CODING: CHUNKED.replace(b"chunked", b"chunked, ") + b"0\r\n\r\n",
    FRAMING_TRAILER: CHUNKED + b"0\r\nContent-Length: x\r\n\r\n",
}
"""One request per documented difference, on which the two answer as it says."""


@pytest.mark.parametrize(("difference", "raw"), DIFFERENCES.items(),
                         ids=[d.name.replace(" ", "-") for d in DIFFERENCES])
def test_each_documented_difference_is_real_and_goes_the_way_it_says(
    difference: Difference, raw: bytes
) -> None:
    ours, theirs = reader_reads(raw), h11_reads(raw)
    if difference.reader_refuses:
        assert isinstance(ours, Refused) and isinstance(theirs, Read), (ours, theirs)
    else:
        assert isinstance(ours, Read) and isinstance(theirs, Refused), (ours, theirs)


def test_every_difference_the_generator_marks_has_its_example() -> None:
    documented = {d for d in globals().values() if isinstance(d, Difference)}
    assert documented == set(DIFFERENCES)
