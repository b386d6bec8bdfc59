"""MessageList's indexes rebuilt at once (``reindex``, as a checkpoint is restored) are
the ones built a message at a time (``push``): first message per id, first holder per
tool call, whatever the ids are."""

from __future__ import annotations

from typing import Any

from recorder.reference.messages import MessageList


def pushed(items: list[Any]) -> MessageList:
    built = MessageList([])
    for message in items:
        if type(message) is dict:
            built.push(message)
        else:
            built.items.append(message)
    return built


def test_reindex_finds_what_pushing_found() -> None:
    shared = {"id": "s", "role": "user", "content": "twice"}
    items: list[Any] = [
        {"id": "a", "role": "user", "content": "1"},
        {"id": "a", "role": "assistant", "content": "duplicate id"},
        {"role": "user", "content": "no id"},
        {"id": 1, "role": "user"},
        {"id": True, "role": "user"},
        {"id": None, "role": "user"},
        {"id": ["a"], "role": "user"},  # unhashable
        {"id": {"x": 1}, "role": "user"},
        "not a message",
        shared,
        {"id": "b", "role": "assistant", "toolCalls": [{"id": "c1"}, {"id": "c2"}, "x", {}]},
        {"id": "c", "role": "assistant", "toolCalls": [{"id": "c1"}, {"id": 3}]},
        {"id": "d", "role": "assistant", "toolCalls": "not a list"},
        shared,
        {"id": "a", "role": "tool", "content": "third"},
    ]
    for variant in (
        items,
        [m for m in items if not (type(m) is dict and type(m.get("id")) is list)],
    ):
        rebuilt = MessageList(list(variant))
        one_by_one = pushed(variant)
        assert rebuilt.by_id.keys() == one_by_one.by_id.keys()
        for key, message in one_by_one.by_id.items():
            assert rebuilt.by_id[key] is message
        assert rebuilt.calls.keys() == one_by_one.calls.keys()
        for key, (holder, call) in one_by_one.calls.items():
            assert rebuilt.calls[key][0] is holder and rebuilt.calls[key][1] is call
        assert rebuilt.aliased
        assert set(rebuilt.by_id) == {"a", "s", "b", "c", "d"}
        assert rebuilt.by_id["a"] is variant[0]
        assert set(rebuilt.calls) == {"c1", "c2"} and rebuilt.calls["c1"][0]["id"] == "b"
