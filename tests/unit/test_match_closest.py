"""Which recording a no-match names as the closest, and how the message says it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamtape
from streamtape import Interaction, NoMatchError, Request, Response
from streamtape.cassette.reader import load_many
from streamtape.match.indexed import IndexedMatcher, interactions_of, matcher_for
from streamtape.match.matcher import Matcher

URL = "https://api.openai.com/v1/chat/completions"
LOCAL = "http://127.0.0.1:8123/v1/chat/completions"


def rec(body: object, *, method: str = "POST", url: str = URL) -> Interaction:
    data = json.dumps(body).encode() if body is not None else b""
    return Interaction(Request(method, url, headers=(), body=data), Response(200))


def chat(content: str = "hi", **extra: object) -> dict[str, object]:
    return {"model": "gpt-x", "stream": True, "messages": [{"role": "user", "content": content}], **extra}


def miss(m: Matcher, body: object, *, method: str = "POST", url: str = LOCAL) -> NoMatchError:
    with pytest.raises(NoMatchError) as e:
        m.match(method, url, {}, json.dumps(body).encode())
    return e.value


def test_the_closest_is_the_recording_that_differs_least_not_the_first_on_the_path() -> None:
    # The issue's case: recording #1's body with a seed added was said to be closest to #0.
    m = Matcher([rec(chat(max_tokens=12)), rec(chat(max_tokens=200))])
    err = miss(m, chat(max_tokens=200, seed=8))
    assert err.closest is not None and err.closest.index == 1
    assert err.closest.differences == ("body has seed=8, not in the recording",)
    assert "closest is #1 POST /v1/chat/completions: body has seed=8, not in the recording" in str(err)


def test_each_differing_missing_or_extra_body_field_counts_at_any_depth() -> None:
    m = Matcher([
        rec(chat("a", temperature=0.1, top_p=0.4)),  # content, temperature and top_p differ: 3
        rec(chat("b", temperature=0.2)),  # temperature differs, top_p missing: 2
    ])
    err = miss(m, chat("b", temperature=0.9, top_p=0.5))
    assert err.closest is not None and err.closest.index == 1
    assert err.closest.differences == (
        "body temperature is 0.9, recorded 0.2",
        "body has top_p=0.5, not in the recording",
    )


def test_a_list_of_another_length_counts_one_per_item_more_or_fewer() -> None:
    turns = [{"role": "user", "content": str(i)} for i in range(5)]
    m = Matcher([
        rec({"model": "gpt-x", "messages": turns[:1]}),  # four messages fewer
        rec({"model": "other", "messages": turns}),  # one field differs
    ])
    err = miss(m, {"model": "gpt-x", "messages": turns})
    assert err.closest is not None and err.closest.index == 1


def test_a_different_method_or_path_outweighs_any_number_of_field_differences() -> None:
    many = {f"f{i}": i for i in range(50)}
    m = Matcher([
        rec(chat(), method="PUT"),
        rec(chat(), url="https://api.openai.com/v1/completions"),
        rec(many),  # same method and path, 53 fields apart
    ])
    assert miss(m, chat(seed=1)).closest.index == 2  # type: ignore[union-attr]
    m = Matcher([rec(chat(), method="PUT"), rec(many, url="https://api.openai.com/v1/completions")])
    assert miss(m, chat()).closest.index == 1  # type: ignore[union-attr]


def test_a_query_parameter_weighs_more_than_a_body_field() -> None:
    m = Matcher([rec(chat(), url=URL + "?api-version=1"), rec(chat(seed=1), url=URL + "?api-version=2")])
    err = miss(m, chat(), url=LOCAL + "?api-version=2")
    assert err.closest is not None and err.closest.index == 1


def test_ties_go_to_the_earlier_recording() -> None:
    m = Matcher([rec(chat("a")), rec(chat("b")), rec(chat("c"))])
    assert miss(m, chat("d")).closest.index == 0  # type: ignore[union-attr]


def test_the_message_words_the_first_three_differences_and_counts_the_rest() -> None:
    m = Matcher([rec(chat("a", n=1, seed=1, top_p=1, user="u"))])
    err = miss(m, chat("b", n=2, seed=2, top_p=2, user="v"))
    msg = str(err)
    assert "\n" not in msg
    assert err.closest is not None and len(err.closest.differences) == 5
    assert msg.endswith(
        'closest is #0 POST /v1/chat/completions: body messages[0].content is "b", recorded "a"; '
        "body n is 2, recorded 1; body seed is 2, recorded 1 (and 2 more differences)"
    )
    one_more = miss(Matcher([rec(chat("a", n=1, seed=1, top_p=1))]), chat("b", n=2, seed=2, top_p=2))
    assert str(one_more).endswith("(and 1 more difference)")


def test_with_several_cassettes_served_the_message_names_the_cassette_and_the_place_in_it() -> None:
    m = Matcher([rec(chat("a")), rec(chat("b")), rec(chat("c"))], sources=["a.tape", "b.tape", "b.tape"])
    err = miss(m, chat("c", seed=3))
    assert err.closest is not None
    assert (err.closest.index, err.closest.cassette, err.closest.position) == (2, "b.tape", 1)
    assert err.cassette == "b.tape"
    assert "; closest is b.tape#1 POST /v1/chat/completions: body has seed=3" in str(err)


def test_with_one_cassette_the_message_still_names_the_cassette_file() -> None:
    m = Matcher([rec(chat("a")), rec(chat("b"))], sources=["chat.tape", "chat.tape"])
    err = miss(m, chat("b", seed=3))
    assert "; closest is chat.tape#1 POST" in str(err)  # the cassette file, named
    assert err.cassette == "chat.tape" and err.closest is not None and err.closest.where == "chat.tape#1"


def test_without_sources_the_closest_has_no_cassette() -> None:
    err = miss(Matcher([rec(chat("a"))]), chat("b"))
    assert err.cassette is None and err.closest is not None and err.closest.where == "#0"


def test_the_indexed_matcher_names_the_same_closest_and_cassette_from_files(tmp_path: Path) -> None:
    streamtape.save(tmp_path / "a.tape", [rec(chat("a")), rec(chat("b", max_tokens=12))])
    streamtape.save(tmp_path / "b.tape", [rec(chat("c")), rec(chat("b", max_tokens=200))])
    chain, names = interactions_of(load_many([tmp_path / "a.tape", tmp_path / "b.tape"]))
    indexed = matcher_for(chain, indexed_min=0, sources=names)
    plain = Matcher(list(chain), sources=names)
    assert isinstance(indexed, IndexedMatcher)
    errors = [miss(m, chat("b", max_tokens=200, seed=8)) for m in (indexed, plain)]
    assert str(errors[0]) == str(errors[1])
    assert "closest is b.tape#1 POST /v1/chat/completions: body has seed=8, not in the recording" in str(errors[0])
    assert [e.closest.index for e in errors if e.closest] == [3, 3]
