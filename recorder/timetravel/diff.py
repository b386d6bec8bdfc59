"""State diffs between two points: an RFC 6902 patch of the state, and the messages added,
removed or changed (by message id; a message without one by its place)."""

from __future__ import annotations

from typing import Any

import jsonpatch

from recorder.store import EventStore
from recorder.timetravel.history import History
from recorder.timetravel.views import check_seq


async def diff(
    store: EventStore,
    history: History,
    run_id: str,
    *,
    from_seq: int | None = -1,
    to_seq: int | None = None,
    to_run: str | None = None,
) -> dict[str, Any]:
    """From after event ``from_seq`` of ``run_id`` (default: its start) to after event
    ``to_seq`` (default: the end) of ``to_run`` (default: the same run)."""
    source_run = await store.get_run(run_id)
    target_run = source_run if to_run is None else await store.get_run(to_run)
    check_seq(source_run, from_seq)
    check_seq(target_run, to_seq)
    before = await history.project(source_run, from_seq)
    after = await history.project(target_run, to_seq)
    patch = jsonpatch.make_patch(before.state, after.state).patch
    return {
        "source": {"runId": source_run.run_id, "seq": from_seq},
        "target": {"runId": target_run.run_id, "seq": to_seq},
        "patch": patch,
        "messages": message_changes(before.messages, after.messages),
    }


def message_changes(before: list[Any], after: list[Any]) -> dict[str, Any]:
    old = _by_id(before)
    new = _by_id(after)
    return {
        "added": [message for key, message in new.items() if key not in old],
        "removed": [message for key, message in old.items() if key not in new],
        "changed": [
            {"id": key, "before": old[key], "after": message}
            for key, message in new.items()
            if key in old and old[key] != message
        ],
    }


def _by_id(messages: list[Any]) -> dict[str, Any]:
    keyed: dict[str, Any] = {}
    for index, message in enumerate(messages):
        ident = message.get("id") if isinstance(message, dict) else None
        keyed[ident if isinstance(ident, str) else f"#{index}"] = message
    return keyed
