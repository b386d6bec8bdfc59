"""The served recorder's collector: start-up frozen, young collections spaced out."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import gc, json
from recorder.cli.serve import YOUNG_COLLECTION, settle_heap

def young_collections(events):
    # A streamed batch as the proxy holds it until its commit: a tuple per event.
    runs = []
    def seen(phase, info):
        if phase == "stop":
            runs.append(info["generation"])
    gc.callbacks.append(seen)
    batch = [(b"%d" % i, "TEXT_MESSAGE_CONTENT", "upstream", None, None) for i in range(events)]
    gc.callbacks.clear()
    del batch
    return runs.count(0)

before = gc.get_threshold()
unsettled = young_collections(5000)
settle_heap()
print(json.dumps({
    "before": before,
    "after": gc.get_threshold(),
    "young": YOUNG_COLLECTION,
    "frozen": gc.get_freeze_count(),
    "unsettled": unsettled,
    "settled": young_collections(5000),
}))
"""


def test_start_up_is_frozen_and_young_collections_are_spaced_out() -> None:
    # In a process of its own: the collector's settings are the whole process's.
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    found = json.loads(done.stdout)
    assert found["after"] == [found["young"], *found["before"][1:]]
    assert found["young"] > 10 * found["before"][0]
    assert found["frozen"] > 10_000  # the modules and objects start-up made
    # A batch of 5,000 events held for its commit: several young collections with
    # Python's threshold, none once settled.
    assert found["unsettled"] >= 5 and found["settled"] == 0
