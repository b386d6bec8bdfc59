"""Our fold and verify against the reference client, case by case, by the interop rules.

The rules are those of ``tests/reference/test_projector_interop.py`` and
``test_verify_interop.py``:

- where the reference accepts a stream, our fold shows the same messages, state and pending
  interrupts (ids it mints, random UUIDs there and ours here, matched in order of first
  appearance; numbers compared as JSON numbers), and our check finds nothing wrong;
- where the reference fails the run, our fold reports a problem and our check a violation;
  where it fails in a stage whose texts we port word for word (frames, chunks, lifecycle),
  our first violation outside the reducer says the same;
- where the reference ends in a state or message it cannot write down (a cycle), our fold
  says so in a problem;
- a file the reference cannot read at all (not a JSON array) is one we refuse too.

Our fold is also run in two halves joined by a checkpoint, which must change nothing; and
our check is also given each frame as the recording proxy gives it (parsed already, where
it is an object), which must change nothing either.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from recorder.errors import InputError
from recorder.proxy.segments import parsed
from recorder.reference.check import verify_frames
from recorder.reference.inbound import NO_TYPE, NOT_JSON
from recorder.reference.projector import Projection, Projector, fold
from recorder.wire.events import read_event_file
from recorder.wire.jsontext import dump, parse, printable
from tests.conftest import INTEROP

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
EXACT_STAGES = ("frame", "chunks", "verify")


@dataclass(frozen=True)
class Trial:
    """One stream as both sides get it: the file's bytes and the posted input's text."""

    format: str
    file: bytes
    input: bytes | None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "file": base64.b64encode(self.file).decode(),
            "input": None if self.input is None else self.input.decode("utf-8", "replace"),
        }


@dataclass(frozen=True)
class Disagreement:
    kind: str
    detail: str


def reference(trials: list[Trial]) -> list[dict[str, Any]]:
    """Every trial through the real client, in one node process."""
    done = subprocess.run(
        ["node", "fuzz.mjs"],
        input=json.dumps([t.to_json() for t in trials]).encode(),
        cwd=INTEROP,
        capture_output=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"fuzz.mjs failed: {done.stderr.decode()[-2000:]}")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    assert len(answers) == len(trials)
    return answers


def compare(trial: Trial, answer: dict[str, Any]) -> list[Disagreement]:
    """How our fold and check disagree with the reference's ``answer`` for ``trial``."""
    try:
        return _compare(trial, answer)
    except Exception as exc:  # ours must never raise on any input
        return [Disagreement("crash", f"{type(exc).__name__}: {exc}")]


def _compare(trial: Trial, answer: dict[str, Any]) -> list[Disagreement]:
    error, stage = answer["error"], answer["stage"]
    try:
        frames = read_event_file(trial.file)
    except InputError as exc:
        if stage == "read":
            return []
        return [Disagreement("read", f"we refuse the file ({exc}); the reference {stage}")]
    if stage == "read":
        return [Disagreement("read", f"the reference cannot read the file: {error}")]
    messages, state = _starting_point(trial)
    ours = fold(frames, messages=messages, state=state)
    found: list[Disagreement] = []
    halves = _folded_in_halves(frames, messages, state)
    if _shown(halves) != _shown(ours):
        found.append(Disagreement("checkpoint", "a checkpoint in the middle changed the fold"))
    if stage == "input":
        if not ours.problems:
            found.append(Disagreement("fold-silent", f"the reference refuses the input: {error}"))
        return found
    violations = verify_frames(frames, state=state)
    recorded = verify_frames([parsed(f) or f for f in frames], state=state)
    if recorded != violations:
        found.append(
            Disagreement("verify-recorded", f"\n  bytes:  {violations}\n  parsed: {recorded}")
        )
    if error is None and answer["outcome"] is not None:
        theirs = _canonical(answer["outcome"])
        if _shown(ours) != theirs:
            found.append(Disagreement("fold", f"\n  ours:   {_shown(ours)}\n  theirs: {theirs}"))
    elif not ours.problems and stage != "verify":  # lifecycle rules are the check's
        reason = error if error is not None else "an outcome that cannot be written (a cycle)"
        found.append(Disagreement("fold-silent", f"the reference: {reason}"))
    if error is None and violations:
        found.append(Disagreement("verify-false-alarm", violations[0].message))
    if error is not None and not violations:
        found.append(Disagreement("verify-missed", f"{stage}: {error}"))
    if error is not None and stage in EXACT_STAGES and violations:
        mine = next(
            (v.message for v in violations if not v.message.startswith("Cannot apply")), None
        )
        theirs_text = printable(error)
        if stage == "frame" and error not in (NOT_JSON, NO_TYPE):
            theirs_text = NOT_JSON  # a SyntaxError's text is the engine's own
        if mine is None or _renamed(mine) != _renamed(theirs_text):
            found.append(
                Disagreement("verify-text", f"\n  ours:   {mine}\n  theirs: {theirs_text}")
            )
    return found


def _in_reducer(message: str) -> bool:
    """Our violations from the reducer's stage, which the reference reaches last."""
    return message.startswith("Cannot apply")


def _renamed(text: str) -> str:
    names: dict[str, str] = {}
    return UUID.sub(lambda m: names.setdefault(m.group(), f"minted-{len(names) + 1}"), text)


def _starting_point(trial: Trial) -> tuple[Any, Any]:
    if trial.input is None:
        return None, None
    posted = parse(trial.input)
    return posted.get("messages"), posted.get("state")


def _folded_in_halves(frames: list[bytes], messages: Any, state: Any) -> Projection:
    first = Projector(messages, state)
    half = len(frames) // 2
    for frame in frames[:half]:
        first.feed(frame)
    second = Projector.restore(first.checkpoint())
    for frame in frames[half:]:
        second.feed(frame)
    return second.result()


def _shown(projection: Projection) -> Any:
    written = dump([projection.messages, projection.state, projection.pending_interrupts])
    messages, state, interrupts = json.loads(written)
    return _canonical({"messages": messages, "state": state, "pendingInterrupts": interrupts})


def _canonical(value: Any) -> Any:
    """Minted ids renamed in order of first appearance; JSON types made explicit."""
    return canonical(value, UUID, {})


def canonical(value: Any, minted: re.Pattern[str], names: dict[str, str]) -> Any:
    """Minted ids renamed in order of first appearance; JSON types made explicit. The rule
    every interop comparison of a fold uses (``tests/reference/test_projector_interop.py``)."""
    if isinstance(value, dict):
        return {"{}": sorted((k, canonical(v, minted, names)) for k, v in value.items())}
    if isinstance(value, list):
        return [canonical(v, minted, names) for v in value]
    if isinstance(value, str):
        return minted.sub(lambda m: names.setdefault(m.group(), f"minted-{len(names) + 1}"), value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return ("number", float(value))  # JSON numbers: 1 and 1.0 are one value, true is not
    return value
