"""Matching requests to recorded interactions."""

from __future__ import annotations

import contextlib
import json
import threading

import pytest

from streamtape import Interaction, NoMatchError, Request, Response
from streamtape.match.matcher import Matcher

URL = "https://api.openai.com/v1/chat/completions"
LOCAL = "http://127.0.0.1:8123/v1/chat/completions"


def rec(
    body: object = None,
    *,
    method: str = "POST",
    url: str = URL,
    headers: tuple[tuple[str, str], ...] = (),
    tag: str = "",
    raw: bytes | None = None,
) -> Interaction:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
    return Interaction(Request(method, url, headers=headers, body=data), Response(200), labels={"tag": tag})


def chat(content: str = "hi", **extra: object) -> dict[str, object]:
    return {"model": "gpt-x", "stream": True, "messages": [{"role": "user", "content": content}], **extra}


def tag(m: Matcher, body: object, *, method: str = "POST", url: str = LOCAL, headers=None) -> str:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return m.match(method, url, headers or {}, data).labels["tag"]


def test_json_bodies_match_as_data_whatever_the_key_order_and_spacing():
    m = Matcher([rec(chat("hi"), tag="a")])
    body = b'{ "messages" : [ {"content": "hi", "role": "user"} ], "stream": true, "model": "gpt-x" }'
    assert tag(m, body) == "a"


def test_host_and_scheme_are_ignored_but_path_and_method_are_not():
    m = Matcher([rec(chat(), tag="a")])
    assert tag(m, chat(), url="http://localhost:1/v1/chat/completions") == "a"
    assert tag(m, chat(), url="/v1/chat/completions") == "a"
    with pytest.raises(NoMatchError, match="path /v1/completions, recorded /v1/chat/completions"):
        tag(m, chat(), url="/v1/completions")
    with pytest.raises(NoMatchError, match="method PUT, recorded POST"):
        tag(m, chat(), method="PUT")


def test_json_values_keep_their_types():
    m = Matcher([rec({"n": 1, "flag": True}, tag="a")])
    assert tag(m, {"n": 1.0, "flag": True}) == "a"
    with pytest.raises(NoMatchError, match="body flag is 1, recorded true"):
        tag(m, {"n": 1, "flag": 1})


def test_query_is_compared_as_pairs_in_any_order():
    m = Matcher([rec(None, method="GET", url="https://h/v1/models?a=1&b=2", tag="a")])
    assert tag(m, b"", method="GET", url="/v1/models?b=2&a=1") == "a"
    with pytest.raises(NoMatchError, match="query a=\"3\", recorded a=\"1\""):
        tag(m, b"", method="GET", url="/v1/models?b=2&a=3")
    with pytest.raises(NoMatchError, match="query lacks b"):
        tag(m, b"", method="GET", url="/v1/models?a=1")


def test_non_json_bodies_match_byte_for_byte():
    m = Matcher([rec(raw=b"prompt=hello", tag="a")])
    assert tag(m, b"prompt=hello") == "a"
    with pytest.raises(NoMatchError, match="body differs at byte 8"):
        tag(m, b"prompt=hullo")


def test_ignore_fields_plain_names_apply_at_any_depth_and_dotted_names_from_the_top():
    m = Matcher([rec(chat("hi", user="u1", metadata={"trace": "t1", "keep": 1}), tag="a")],
                ignore_fields=["trace", "user"])
    assert tag(m, chat("hi", user="u2", metadata={"trace": "t9", "keep": 1})) == "a"
    assert tag(m, chat("hi", metadata={"keep": 1})) == "a"  # an ignored field may be absent
    with pytest.raises(NoMatchError, match=r"metadata\.keep"):
        tag(m, chat("hi", user="u2", metadata={"trace": "t9", "keep": 2}))

    deep = Matcher([rec({"a": {"id": 1}, "id": 5}, tag="d")], ignore_fields=["a.id"])
    assert tag(deep, {"a": {"id": 2}, "id": 5}) == "d"
    with pytest.raises(NoMatchError, match="body id is 6, recorded 5"):
        tag(deep, {"a": {"id": 2}, "id": 6})

    listed = Matcher([rec(chat("hi"), tag="l")], ignore_fields=["messages.content"])
    assert tag(listed, chat("anything")) == "l"


def test_headers_are_not_compared_unless_asked():
    r = rec(chat(), headers=(("OpenAI-Organization", "org-1"), ("Authorization", "REDACTED")), tag="a")
    assert tag(Matcher([r]), chat(), headers={"OpenAI-Organization": "org-2"}) == "a"
    m = Matcher([r], match_headers=["openai-organization", "authorization"])
    assert tag(m, chat(), headers={"openai-organization": "org-1", "authorization": "Bearer sk-real"}) == "a"
    with pytest.raises(NoMatchError, match='header openai-organization is "org-2", recorded "org-1"'):
        tag(m, chat(), headers=[("OpenAI-Organization", "org-2")])


def test_redacted_values_never_matter():
    r = rec({"api_key": "REDACTED", "nested": {"token": "REDACTED"}, "q": 1},
            url="https://h/v1/x?key=REDACTED&v=1", tag="a")
    m = Matcher([r])
    assert tag(m, {"api_key": "sk-1", "nested": {"token": {"any": "thing"}}, "q": 1}, url="/v1/x?key=abc&v=1") == "a"
    assert tag(m, {"q": 1, "nested": {}}, url="/v1/x?v=1") == "a"  # absent counts as any value


def test_identical_requests_get_their_recordings_in_order_then_the_last_again():
    m = Matcher([rec(chat(), tag="1"), rec(chat("other"), tag="x"), rec(chat(), tag="2")])
    assert [tag(m, chat()) for _ in range(4)] == ["1", "2", "2", "2"]
    assert tag(m, chat("other")) == "x"
    m.reset()
    assert tag(m, chat()) == "1"


def test_strict_matching_makes_running_out_an_error():
    m = Matcher([rec(chat(), tag="1"), rec(chat(), tag="2")], strict=True)
    assert [tag(m, chat()), tag(m, chat())] == ["1", "2"]
    with pytest.raises(NoMatchError, match=r"all 2 recorded interactions matching it \(#0, #1\) were already used"):
        tag(m, chat())


def test_no_match_names_the_closest_recorded_request_and_how_it_differs_on_one_line():
    m = Matcher([
        rec(None, method="GET", url="https://h/v1/models", tag="g"),
        rec(chat("tell me a joke"), tag="a"),
        rec(chat("hi", temperature=0.5), url="https://h/v1/completions", tag="b"),
    ])
    with pytest.raises(NoMatchError) as e:
        tag(m, chat("tell me a story"))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("no recorded interaction matches POST /v1/chat/completions; closest is #1 POST")
    assert 'body messages[0].content is "tell me a story", recorded "tell me a joke"' in msg


def test_no_match_carries_the_request_and_the_closest_recording_as_data():
    m = Matcher([
        rec(None, method="GET", url="https://h/v1/models", tag="g"),
        rec(chat("tell me a joke"), tag="a"),
    ])
    with pytest.raises(NoMatchError) as e:
        m.match("POST", LOCAL + "?x=1", {"X-Trace": "7"}, json.dumps(chat("tell me a story")).encode())
    err = e.value
    assert err.request is not None
    assert (err.request.method, err.request.target) == ("POST", "/v1/chat/completions?x=1")
    assert ("x-trace", "7") in err.request.headers
    assert err.request.json == chat("tell me a story")
    assert err.closest is not None
    assert err.closest.index == 1
    assert err.closest.request.body == json.dumps(chat("tell me a joke")).encode()
    assert err.closest.differences == (
        "query has x=\"1\", not in the recording",
        'body messages[0].content is "tell me a story", recorded "tell me a joke"',
    )
    assert err.closest.differences[0] in str(err)


def test_no_match_on_an_empty_cassette_says_so():
    with pytest.raises(NoMatchError, match="cassette is empty") as e:
        Matcher([]).match("GET", "/", {}, b"")
    assert e.value.closest is None
    assert e.value.request is not None and e.value.request.method == "GET"


def test_received_lists_requests_with_secrets_redacted_and_what_they_matched():
    m = Matcher([rec(chat(), tag="a")])
    tag(m, chat(), headers={"Authorization": "Bearer sk-secret", "X-Trace": "1"})
    with pytest.raises(NoMatchError):
        tag(m, chat("nope"))
    got = m.received
    assert [r["matched"] for r in got] == [0, None]
    assert ["authorization", "REDACTED"] in got[0]["headers"] and ["x-trace", "1"] in got[0]["headers"]
    assert got[1]["error"].startswith("no recorded interaction matches")
    assert json.loads(got[0]["body"]) == chat()
    json.dumps(got)  # JSON-ready


def test_concurrent_identical_requests_each_get_a_different_recording_first():
    n = 40
    m = Matcher([rec(chat(), tag=str(i)) for i in range(n)])
    results: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(n // 8):
            t = tag(m, chat())
            with lock:
                results.append(t)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=int) == [str(i) for i in range(n)]
    assert m.used == [1] * n


def test_match_indexed_returns_the_position_in_the_cassette():
    m = Matcher([rec(chat("a"), tag="a"), rec(chat("b"), tag="b")])
    i, ix = m.match_indexed("POST", LOCAL, {}, json.dumps(chat("b")).encode())
    assert i == 1 and ix.labels["tag"] == "b"



def test_received_keeps_only_the_latest_requests_so_a_long_running_server_does_not_grow():
    m = Matcher([Interaction(Request("GET", "http://h/a?n=0"), Response(200))], keep_received=3)
    for n in range(5):
        with contextlib.suppress(NoMatchError):
            m.match("GET", f"http://h/a?n={n}")
    assert [r["path"] for r in m.received] == ["/a?n=2", "/a?n=3", "/a?n=4"]
    assert [r["matched"] for r in m.received] == [None, None, None]
