"""The state at a point: a run's starting point plus the fold of its events, with checkpoints.

A point is ``(run, seq)``: after event ``seq`` of that run (``-1``: before its first event).
The starting point of a run is what its agent was given (the posted RunAgentInput's
messages and state); imported runs without one use RUN_STARTED's ``input``, and failing
that the projection at the parent's fork point. From there the run's own events are
folded, so the cost never grows with the thread, and checkpoints (derived data in their
own table, safe to drop) bound it inside long runs too: a run's prefix never changes, so a
checkpoint at ``seq`` stays true while the run goes on. When a run closes, the recorder
folds it once more off its client's path (``build_checkpoints``): checkpoints inside it and
one at its last event, so the state at any run boundary is one checkpoint away and no
first query pays for building them. That fold gives way to the runs being recorded
(``GiveWay``), as search indexing does: a stream that follows a closed run does not share
the loop with its checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from recorder.errors import InputError, RunNotFound
from recorder.reference import layout
from recorder.reference.projector import Parts, Projection, Projector, parts_after
from recorder.store import EventStore, Run
from recorder.timetravel.giveway import GiveWay
from recorder.wire.events import decode
from recorder.wire.jsontext import dump

_PAGE = 2000
_SLICE = 250  # events folded in the background between two chances to give way


@dataclass(frozen=True, slots=True)
class StartingPoint:
    messages: list[dict[str, Any]]
    state: Any
    source: str  # "input", "run_started", "parent" or "empty"


@dataclass(frozen=True, slots=True)
class Located:
    """A run read with its checkpoint nearest to ``seq`` (``History.locate``)."""

    run: Run
    seq: int | None
    checkpoint: tuple[int, bytes] | None


class History:
    """Projections of recorded runs; ``checkpoint_every`` 0 or less keeps no checkpoints
    and reads none (every query folds from the run's start). ``busy()``: whether runs are
    being recorded, to which building a closed run's checkpoints gives way (``GiveWay``,
    up to ``max_lag`` seconds); queries never wait."""

    def __init__(
        self,
        store: EventStore,
        *,
        checkpoint_every: int = 250,
        busy: Callable[[], bool] | None = None,
        max_lag: float = 10.0,
    ) -> None:
        self.store = store
        self.checkpoints = checkpoint_every > 0
        self.checkpoint_every = checkpoint_every if self.checkpoints else 2**62
        self._give_way = GiveWay(busy, max_lag)

    async def starting_point(self, run: Run, _depth: int = 0) -> StartingPoint:
        if run.input is None:  # perhaps read without it (``get_run(input=False)``)
            run = await self.store.get_run(run.run_id)
        posted = decode(run.input) if run.input is not None else None
        if posted is not None:
            return _from_input(posted, "input")
        first = await self.store.read_events(run.run_id, limit=1)
        started = decode(first[0].payload) if first else None
        if (
            started
            and started.get("type") == "RUN_STARTED"
            and isinstance(started.get("input"), dict)
        ):
            return _from_input(started["input"], "run_started")
        if run.parent_run_id is not None and _depth < 100:
            try:
                parent = await self.store.get_run(run.parent_run_id)
            except Exception:
                parent = None
            if parent is not None:
                at = await self.project(parent, run.parent_seq, _depth=_depth + 1)
                return StartingPoint(at.messages, at.state, "parent")
        return StartingPoint([], {}, "empty")

    async def locate(self, run_id: str, seq: int | None = None) -> Located:
        """The run (without its input) and what ``project`` needs to start from at ``seq``
        (default: its last event), in one read: the state at a run's boundary is the
        checkpoint written when it closed, on the run's own row."""
        if not self.checkpoints:
            return Located(await self.store.get_run(run_id, input=False), seq, None)
        run, found = await self.store.run_checkpoint(run_id, seq)
        return Located(run, seq, found)

    async def state(self, run_id: str, seq: int | None = None) -> tuple[Run, Projection]:
        """The run (without its input) and its projection after event ``seq``."""
        located = await self.locate(run_id, seq)
        return located.run, await self.project(located.run, seq, located=located)

    async def project(
        self, run: Run, seq: int | None = None, *, located: Located | None = None, _depth: int = 0
    ) -> Projection:
        """Messages, state and pending interrupts after event ``seq`` (default: the last);
        ``located``: what ``locate`` read for this run and seq, spared reading again."""
        last = run.event_count - 1
        target = last if seq is None else seq
        if target < -1:
            raise InputError(f"seq must be -1 or more, got {target}")
        target = min(target, last)
        if located is not None and located.run is run and located.seq == seq:
            found = located.checkpoint if target >= 0 else None
        else:
            found = await self._checkpoint_at(run, target)
        if found is not None and found[0] == target:  # nothing to fold: read it as it is
            return Projector.projection_of(found[1])
        projector, done = await self._resume_point(run, target, _depth, found)
        await self._fold(run, projector, done, target)
        return projector.take()

    async def answer_parts(self, located: Located, head: dict[str, Any]) -> Parts:
        """``{**head, **project(...).to_json()}`` written, in pieces to send or join, from
        what ``locate`` read: where the checkpoint is laid out for it
        (``recorder.reference.layout``), the messages it holds that the events since leave
        be go out as they were stored, never decoded nor copied; the rest is folded as
        ``project`` folds it."""
        run, seq = located.run, located.seq
        found = located.checkpoint
        target = run.event_count - 1 if seq is None else min(seq, run.event_count - 1)
        if found is not None and 0 <= target - found[0] <= _PAGE and layout.laid_out(found[1]):
            frames: list[bytes] = []
            if found[0] < target:
                frames = await self.store.read_payloads(run.run_id, gt=found[0], lte=target)
            if len(frames) == target - found[0]:
                parts = parts_after(found[1], frames, head)
                if parts is not None:
                    return parts
        return [dump({**head, **(await self.project(run, seq, located=located)).to_json()})]

    async def build_checkpoints(self, run_id: str) -> int:
        """Fold a run to its end once, keeping a checkpoint every ``checkpoint_every``
        events and one at its last event (its boundary: the state a run after it starts
        from, read from one row). Done when a run closes, off its client's path, a slice
        of events at a time, giving way to the runs being recorded; what is there already
        is kept. The number of its events."""
        run = await self.store.get_run(run_id, input=False)
        last = run.event_count - 1
        if last < 0 or not self.checkpoints:
            return 0
        found = await self._checkpoint_at(run, last)
        projector, done = await self._resume_point(run, last, 0, found)
        if done < last:
            since = None if found is None else found[1]
            await self._fold(
                run, projector, done, last, keep_last=True, since=since, give_way=self._give_way
            )
        return run.event_count

    async def _checkpoint_at(self, run: Run, target: int) -> tuple[int, bytes] | None:
        """The nearest checkpoint at or before ``target``, if checkpoints are kept."""
        if target < 0 or not self.checkpoints:
            return None
        return await self.store.nearest_checkpoint(run.run_id, target)

    async def _resume_point(
        self, run: Run, target: int, depth: int, found: tuple[int, bytes] | None
    ) -> tuple[Projector, int]:
        if found is not None:
            return Projector.restore(found[1]), found[0]
        start = await self.starting_point(run, depth)
        # The starting point was decoded for this call alone: the projector may own it.
        return Projector(start.messages, start.state, copy=False), -1

    async def _fold(
        self,
        run: Run,
        projector: Projector,
        done: int,
        target: int,
        *,
        keep_last: bool = False,
        since: bytes | None = None,
        give_way: GiveWay | None = None,
    ) -> None:
        """Feed ``projector`` the run's events after ``done`` up to ``target``, saving
        checkpoints on the way; ``since``: the checkpoint it was restored from, whose
        messages the next checkpoint takes as written where the events leave them be.
        ``give_way`` (work in the background) is awaited before each page and slice."""
        every = self.checkpoint_every
        fed: list[bytes] = []
        while done < target:
            if give_way is not None:
                await give_way()
            page = await self.store.read_events(run.run_id, gt=done, lte=min(target, done + _PAGE))
            if not page:
                return
            # (A query folds the page whole; the check is per slice, never per event.)
            step = _PAGE if give_way is None else _SLICE
            for start in range(0, len(page), step):
                if start and give_way is not None:
                    await give_way()
                for event in page[start : start + step]:
                    projector.feed(event.payload)
                    if not self.checkpoints:
                        continue
                    fed.append(event.payload)
                    inside = event.seq % every == every - 1 and event.seq < target
                    last = keep_last and event.seq == target  # the boundary: nothing folds on
                    if inside or last:
                        after = None if since is None else (since, fed)
                        data = projector.checkpoint(indexed=inside, after=after)
                        await self.store.save_checkpoint(run.run_id, event.seq, data, seen=run)
                        since, fed = data, []
            done = page[-1].seq


async def rebuild_checkpoints(history: History, run_ids: Iterable[str]) -> int:
    """Drop every checkpoint and build those of ``run_ids`` again (checkpoints are derived
    data: the answers do not change); the number of runs rebuilt (not those purged since
    they were listed)."""
    await history.store.drop_checkpoints()
    count = 0
    for run_id in run_ids:
        try:
            await history.build_checkpoints(run_id)
        except RunNotFound:
            continue
        count += 1
    return count


def _from_input(posted: dict[str, Any], source: str) -> StartingPoint:
    messages = posted.get("messages")
    state = posted.get("state")
    return StartingPoint(
        [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else [],
        {} if state is None else state,
        source,
    )


def projection_json(projection: Projection) -> bytes:
    return dump(projection.to_json())
