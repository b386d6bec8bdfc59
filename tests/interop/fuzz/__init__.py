"""Differential fuzzing of our fold and verify against the real ``@ag-ui/client`` 1.0.

Streams come from a state machine (``streams``), valid ones, of which most are then broken
(``mutations``); each is written as a JSON array, JSONL or an SSE capture, sometimes with a
posted input, then folded and verified by us and run through the reference client in Node
(``fuzz.mjs``, many streams per process), and the two compared by the interop rules
(``judge``). Case ``i`` of seed ``s`` is the same stream on every machine.

    .venv/bin/python -m tests.interop.fuzz --seed 7 --count 50000

runs a campaign outside the suite and minimizes what disagrees; ``tests/interop/test_fuzz.py``
runs a fixed sample inside it.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from tests.interop.fuzz.judge import Disagreement, Trial, compare, reference
from tests.interop.fuzz.mutations import encode, mutate, write
from tests.interop.fuzz.streams import Case, StreamMaker

FORMATS = ("array", "jsonl", "sse")


def make_case(seed: int, number: int) -> Case:
    rng = random.Random(f"{seed}/{number}")
    case = StreamMaker(rng).make()
    if rng.random() < 0.6:
        mutate(case, rng)
    case.format = rng.choice(FORMATS)
    case.features.add(f"format:{case.format}")
    return case


def trial_of(case: Case, seed: int = 0) -> Trial:
    rng = random.Random(seed)
    posted = None if case.input is None else write(case.input)
    return Trial(case.format, encode(case, rng), posted)


@dataclass
class Report:
    """What a batch of streams came to."""

    compared: int = 0
    failed_by_reference: int = 0
    features: Counter[str] = field(default_factory=Counter)
    stages: Counter[str] = field(default_factory=Counter)
    disagreements: list[tuple[int, Case, list[Disagreement]]] = field(default_factory=list)

    def by_kind(self) -> Counter[str]:
        return Counter(d.kind for _, _, found in self.disagreements for d in found)


def run_batch(seed: int, numbers: range, report: Report) -> None:
    """Compare cases ``numbers`` of ``seed``, adding to ``report``."""
    cases = [make_case(seed, n) for n in numbers]
    trials = [trial_of(case, n) for case, n in zip(cases, numbers, strict=True)]
    for number, case, trial, answer in zip(numbers, cases, trials, reference(trials), strict=True):
        report.compared += 1
        report.features.update(case.features)
        report.stages[answer["stage"] or ("unwritable" if answer["outcome"] is None else "ok")] += 1
        if answer["error"] is not None:
            report.failed_by_reference += 1
        found = compare(trial, answer)
        if found:
            report.disagreements.append((number, case, found))


def run(seed: int, count: int, batch: int = 1000) -> Report:
    report = Report()
    for start in range(0, count, batch):
        run_batch(seed, range(start, min(count, start + batch)), report)
    return report
