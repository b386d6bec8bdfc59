"""A fixed sample of the differential fuzzer (``tests/interop/fuzz``): zero disagreements.

2,000 generated streams, valid and broken, written as JSON arrays, JSONL and SSE captures,
some with a posted input, folded and verified by us and run through the real
``@ag-ui/client`` 1.0. Any other seed and count run outside the suite:
``.venv/bin/python -m tests.interop.fuzz --seed S --count N``, which also minimizes.
"""

from __future__ import annotations

import pytest

from recorder.wire.jsontext import printable
from tests.conftest import node_available, require
from tests.interop.fuzz import Report, run

SEED = 13
COUNT = 2000

# What the sample must exercise, besides valid streams and broken ones: every class of
# disagreement the fuzzer was built to find, in every file format.
FEATURES = [
    "format:array",
    "format:jsonl",
    "format:sse",
    "input",
    "lone-surrogate",
    "split-pair",
    "beyond-double",
    "big-integer",
    "big-integer-test",
    "root-move",
    "prototype-value",
    "test-own-hasOwnProperty",
    "thinking",
    "non-object-message",
    "chunks",
    "subagent",
    "interrupt",
    "activity-delta",
    "mutation:drop",
    "mutation:duplicate",
    "mutation:swap",
    "mutation:truncate",
    "mutation:retype",
    "mutation:null",
    "mutation:spoil",
    "mutation:garbage",
    "mutation:literal",
]

pytestmark = pytest.mark.node


@pytest.fixture(scope="module")
def report() -> Report:
    require(node_available(), "Node and @ag-ui/client")
    return run(SEED, COUNT)


def test_no_disagreement_with_the_reference(report: Report) -> None:
    assert report.compared == COUNT
    shown = [
        f"case {number} ({', '.join(d.kind for d in found)}): {found[0].detail}\n"
        f"  reproduce: .venv/bin/python -m tests.interop.fuzz --seed {SEED} --case {number}"
        for number, _case, found in report.disagreements[:5]
    ]
    assert not report.disagreements, printable(
        f"{len(report.disagreements)} of {COUNT} streams disagree:\n" + "\n".join(shown)
    )


def test_the_sample_is_varied(report: Report) -> None:
    accepted = report.stages["ok"]
    assert accepted >= COUNT // 4, "too few streams the reference accepts"
    assert report.failed_by_reference >= COUNT // 4, "too few streams the reference fails"
    for stage in ("frame", "enforce", "chunks", "verify", "apply", "input"):
        assert report.stages[stage] > 0, f"no stream fails at the {stage} stage"
    rare = {feature: report.features[feature] for feature in FEATURES}
    assert min(rare.values()) >= 10, f"features barely exercised: {rare}"
