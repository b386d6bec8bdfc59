"""Run a fuzzing campaign and minimize what disagrees.

.venv/bin/python -m tests.interop.fuzz --seed 7 --count 50000 [--batch 1000] [--show 5]
.venv/bin/python -m tests.interop.fuzz --seed 7 --case 1234       # one case, minimized
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from recorder.wire.jsontext import printable
from tests.interop.fuzz import Report, run_batch, trial_of
from tests.interop.fuzz.judge import Disagreement, compare, reference
from tests.interop.fuzz.streams import Case
from tests.interop.fuzz.values import Raw


def minimize(case: Case, kind: str, seed: int) -> Case:
    """A smaller case that still disagrees in the same ``kind``: events, fields, the input
    (``seed`` is the one its file was written with)."""
    while True:
        candidates = list(_smaller(case))
        if not candidates:
            return case
        trials = [trial_of(c, seed) for c in candidates]
        for candidate, trial, answer in zip(candidates, trials, reference(trials), strict=True):
            if any(d.kind == kind for d in compare(trial, answer)):
                case = candidate
                break
        else:
            return case


def _smaller(case: Case) -> Any:
    if case.input is not None:
        yield Case(case.events, None, case.format)
        messages = case.input.get("messages") or []
        for at in range(len(messages)):
            yield Case(case.events, {**case.input, "messages": _without(messages, at)}, case.format)
    for at in range(len(case.events)):
        yield Case(_without(case.events, at), case.input, case.format)
    for at, event in enumerate(case.events):
        if isinstance(event, dict):
            for name in sorted(set(event) - {"type"}):
                smaller = {k: v for k, v in event.items() if k != name}
                yield Case(
                    [*case.events[:at], smaller, *case.events[at + 1 :]], case.input, case.format
                )
    if case.format != "jsonl":
        yield Case(case.events, case.input, "jsonl")


def _without(items: list[Any], at: int) -> list[Any]:
    return [*items[:at], *items[at + 1 :]]


def shown(case: Case) -> str:
    def default(value: Any) -> Any:
        return f"<raw {value.text}>" if isinstance(value, Raw) else f"<{type(value).__name__}>"

    events = "\n    ".join(json.dumps(e, default=default) for e in case.events)
    posted = json.dumps(case.input, default=default)
    return f"  format: {case.format}\n  input: {posted}\n  events:\n    {events}"


def summary(report: Report) -> str:
    lines = [
        f"streams compared: {report.compared}",
        f"failed by the reference: {report.failed_by_reference}",
        "outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(report.stages.items())),
        "features: " + ", ".join(f"{k}={v}" for k, v in sorted(report.features.items())),
        "disagreements: "
        + (", ".join(f"{k}={v}" for k, v in sorted(report.by_kind().items())) or "none"),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="Differential fuzzing against @ag-ui/client.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--show", type=int, default=3, help="minimized cases to print per kind")
    parser.add_argument("--case", type=int, help="only this case of the seed")
    args = parser.parse_args()
    report = Report()
    began = time.monotonic()
    if args.case is not None:
        run_batch(args.seed, range(args.case, args.case + 1), report)
    else:
        for start in range(0, args.count, args.batch):
            run_batch(args.seed, range(start, min(args.count, start + args.batch)), report)
            print(
                f"... {report.compared} streams, {len(report.disagreements)} disagreeing "
                f"({time.monotonic() - began:.0f} s)",
                file=sys.stderr,
            )
    print(summary(report))
    shown_per_kind: dict[str, int] = {}
    for number, case, found in report.disagreements:
        kind = found[0].kind
        if shown_per_kind.get(kind, 0) >= args.show:
            continue
        shown_per_kind[kind] = shown_per_kind.get(kind, 0) + 1
        small = minimize(case, kind, number)
        again = compare(trial_of(small, number), reference([trial_of(small, number)])[0])
        print(printable(f"\n-- case {number} of seed {args.seed}: {_describe(found)}"))
        print(printable(f"minimized ({_describe(again)}):\n{shown(small)}"))
    return 1 if report.disagreements else 0


def _describe(found: list[Disagreement]) -> str:
    return "; ".join(f"{d.kind}: {d.detail}" for d in found)


if __name__ == "__main__":
    raise SystemExit(main())
