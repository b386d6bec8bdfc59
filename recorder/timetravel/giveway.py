"""Background work's manners toward live traffic.

Work derived from the log after a run closes (its checkpoints, its search documents) is cut
into pieces, and between two pieces it awaits a ``GiveWay``: a turn of the loop, and, while
``busy()`` says runs are being recorded, a wait. The waits add up to ``max_lag`` seconds at
most, then the work goes on a piece at a time until the recorder is quiet again: a busy
recorder does it in the lulls, and one that is never quiet still keeps up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

PAUSE = 0.05  # seconds between two looks at ``busy()``


class GiveWay:
    def __init__(self, busy: Callable[[], bool] | None = None, max_lag: float = 10.0) -> None:
        self.busy = busy
        self.max_lag = max_lag
        self._waited = 0.0  # since the recorder was last seen quiet

    async def __call__(self) -> None:
        await asyncio.sleep(0)
        busy = self.busy
        if busy is None:
            return
        while busy() and self._waited < self.max_lag:
            await asyncio.sleep(PAUSE)
            self._waited += PAUSE
        if not busy():
            self._waited = 0.0
