"""Checkpoints laid out for answers (``recorder.reference.layout``): the state some events
after a checkpoint, folded from the messages those events may touch only and sent with the
others as they were stored, is byte for byte what restoring the whole checkpoint gives."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from bench.workload import mixed_events
from recorder.errors import InputError
from recorder.reference import JSONObject, layout
from recorder.reference.projector import Projector, parts_after
from recorder.wire.events import read_event_file
from recorder.wire.jsontext import dump
from tests.interop.fuzz import make_case, trial_of
from tests.interop.fuzz.judge import _starting_point

START = [{"id": "u0", "role": "user", "content": "start"}]


def written_after(checkpoint: bytes, frames: list[bytes], head: JSONObject) -> bytes | None:
    """The answer ``parts_after`` makes, joined as a body."""
    parts = parts_after(checkpoint, frames, head)
    return None if parts is None else b"".join(parts)


def _generated(seed: int, count: int) -> Iterator[tuple[list[bytes], Any, Any]]:
    """The interop fuzzer's streams ``0..count`` of ``seed`` that read as event files, each
    with the messages and state it starts from."""
    for number in range(count):
        trial = trial_of(make_case(seed, number))
        try:
            frames = read_event_file(trial.file)
        except InputError:
            continue
        messages, state = _starting_point(trial)
        yield frames, messages, state


def _compare(
    frames: list[bytes], messages: Any, state: Any, at: int, until: int, seen: Counter[str]
) -> None:
    """The answer after ``frames[: until + 1]`` from a checkpoint after ``frames[: at + 1]``."""
    projector = Projector(messages, state)
    projector.feed_many(frames[: at + 1])
    saved = projector.checkpoint()
    later = frames[at + 1 : until + 1]
    projector.feed_many(later)
    expected = dump(projector.result().to_json())
    restored = Projector.restore(saved)
    restored.feed_many(later)
    assert dump(restored.result().to_json()) == expected
    answer = written_after(saved, later, {})
    if answer is None:
        seen["whole"] += 1
        return
    seen["spliced"] += 1
    assert answer == expected, (at, until)


def test_spliced_answers_equal_the_whole_fold_over_generated_streams() -> None:
    rng = random.Random(11)
    seen: Counter[str] = Counter()
    for frames, messages, state in _generated(23, 1500):
        for _ in range(4):
            if not frames:
                break
            at = rng.randrange(len(frames))
            _compare(frames, messages, state, at, rng.randrange(at, len(frames)), seen)
    # Both ways are taken: the property covers the splice, not only the way around it.
    assert seen["spliced"] > 300 and seen["whole"] > 300, seen


def test_a_long_conversation_is_spliced_at_every_distance() -> None:
    frames = mixed_events(2000, seed=7)
    seen: Counter[str] = Counter()
    for at in (0, 1, 249, 999, 1500):
        for until in (at, at + 1, at + 37, at + 249, 1999):
            _compare(frames, START, {"s": 1}, at, min(until, 1999), seen)
    assert seen == Counter(spliced=25)


def test_the_answer_sends_the_stored_bytes_of_untouched_messages() -> None:
    """The messages no event touches are never decoded: what the first line holds goes out."""
    frames = mixed_events(400, seed=2)
    projector = Projector(START, {})
    projector.feed_many(frames[:300])
    saved = projector.checkpoint()
    assert layout.split(saved) is not None
    original_first = orjson.dumps(START[0])
    forged_first = original_first.replace(b'"start"', b'"FORGE"')  # as long: the index holds
    forged = saved.replace(original_first, forged_first, 1)
    answer = orjson.loads(written_after(forged, frames[300:340], {}))
    assert answer["messages"][0]["content"] == "FORGE"
    honest = orjson.loads(written_after(projector.checkpoint(), frames[300:340], {}))
    assert answer["messages"][1:] == honest["messages"][1:]


@pytest.mark.parametrize(
    ("name", "events"),
    [
        ("an open chunk lane", [{"type": "TEXT_MESSAGE_CHUNK", "messageId": "u0", "delta": "x"}]),
        ("a snapshot of every message", [{"type": "MESSAGES_SNAPSHOT", "messages": START}]),
        ("a retired shape that mints an id", [{"type": "THINKING_START"}]),
        (
            "a RUN_STARTED carrying messages",
            [{"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": {"messages": []}}],
        ),
    ],
)
def test_what_may_touch_any_message_is_folded_from_the_whole(
    name: str, events: list[dict[str, Any]]
) -> None:
    projector = Projector(START, {})
    frames = [orjson.dumps(e) for e in events]
    if name == "an open chunk lane":  # the checkpoint itself holds the open lane
        projector.feed_many(frames)
        frames = [orjson.dumps({"type": "STEP_STARTED", "stepName": "s"})]
    assert written_after(projector.checkpoint(), frames, {}) is None, name


def test_what_orjson_cannot_write_keeps_the_older_layout() -> None:
    infinite = b'{"type":"STATE_SNAPSHOT","snapshot":{"big":1e400}}'  # JSON.parse: Infinity
    for messages, frames in (
        ([{"id": "a", "role": "user", "content": "x"}], [infinite]),
        ([{"id": "a", "role": "user", "content": "\ud800"}], []),
    ):
        projector = Projector(messages, {})
        projector.feed_many(frames)
        saved = projector.checkpoint()
        assert saved.startswith(b"{"), saved
        assert written_after(saved, [], {}) is None
        again = Projector.restore(saved).result()
        assert dump(again.to_json()) == dump(projector.result().to_json())


def test_a_laid_out_checkpoint_is_three_lines_the_first_what_a_client_is_sent() -> None:
    projector = Projector(START, {"s": [1]})
    projector.feed_many(mixed_events(120, seed=4))
    saved = projector.checkpoint()
    laid = layout.split(saved)
    assert laid is not None and saved.count(b"\n") == 2
    assert laid.messages == dump(projector.result().messages)
    assert laid.count() == len(projector.result().messages)
    assert written_after(saved, [], {}) == dump(projector.result().to_json())
    for broken in (saved.replace(b"\n", b"", 1), saved + b"\n", b"[]\n[]\n{}"):
        with pytest.raises(InputError):
            Projector.restore(broken)
        assert written_after(broken, [], {}) is None


def test_a_checkpoint_without_an_index_answers_at_its_point_and_folds_from_the_whole() -> None:
    """A closed run's last checkpoint keeps no index (nothing folds on from it): it costs
    about what the run changed, answers at its point, and is restored whole otherwise."""
    frames = mixed_events(200, seed=9)
    projector = Projector(START, {})
    projector.feed_many(frames[:150])
    bare = projector.checkpoint(indexed=False)
    laid = layout.split(bare)
    assert laid is not None and laid.index == b"" and laid.count() == 0
    assert len(bare) < len(projector.checkpoint())
    assert written_after(bare, [], {}) == dump(projector.result().to_json())
    assert written_after(bare, frames[150:160], {}) is None
    resumed = Projector.restore(bare)
    resumed.feed_many(frames[150:])
    projector.feed_many(frames[150:])
    assert dump(resumed.result().to_json()) == dump(projector.result().to_json())


def test_checkpoints_of_the_older_layout_are_read_and_answered_by_the_whole_fold() -> None:
    """A database written before the three-line layout holds version 2 checkpoints: they
    restore as they did, and answers past them fold from the whole."""
    frames = mixed_events(300, seed=12)
    projector = Projector(START, {"s": 1})
    projector.feed_many(frames[:200])
    current = projector.checkpoint()
    laid = layout.split(current)
    assert laid is not None
    rest = orjson.loads(laid.rest)
    older = dump(
        {
            **rest,
            "version": 2,
            "messages": orjson.loads(laid.messages),
            "aliases": [],
        },
        exact=True,
    )
    assert older.startswith(b"{") and not layout.laid_out(older)
    assert written_after(older, frames[200:250], {}) is None
    assert Projector.projection_of(older) == Projector.projection_of(current)
    resumed = Projector.restore(older)
    resumed.feed_many(frames[200:])
    projector.feed_many(frames[200:])
    assert dump(resumed.result().to_json()) == dump(projector.result().to_json())


def _incremental_equals_whole(
    frames: list[bytes], messages: Any, state: Any, points: list[int], seen: Counter[str]
) -> None:
    projector = Projector(messages, state)
    since: bytes | None = None
    fed: list[bytes] = []
    done = 0
    for point in points:
        for frame in frames[done : point + 1]:
            projector.feed(frame)
            fed.append(frame)
        done = point + 1
        earlier = None if since is None else layout.split(since)
        if earlier is not None and layout.first_touched(earlier, fed) is not None:
            seen["taken from the one before"] += 1
        for indexed in (True, False):
            whole = projector.checkpoint(indexed=indexed)
            after = None if since is None else (since, fed)
            assert projector.checkpoint(indexed=indexed, after=after) == whole, (point, indexed)
        since, fed = projector.checkpoint(), []


def test_a_checkpoint_written_from_the_one_before_is_the_one_written_whole() -> None:
    """A fold's next checkpoint takes the messages the events since left be as written in
    the one before: byte for byte what writing it whole gives."""
    rng = random.Random(5)
    seen: Counter[str] = Counter()
    for frames, messages, state in _generated(31, 800):
        if not frames:
            continue
        points = sorted(rng.sample(range(len(frames)), min(4, len(frames))))
        _incremental_equals_whole(frames, messages, state, points, seen)
    frames = mixed_events(3000, seed=13)
    _incremental_equals_whole(frames, START, {}, [*range(0, 3000, 250), 2999], seen)
    assert seen["taken from the one before"] > 250, seen
