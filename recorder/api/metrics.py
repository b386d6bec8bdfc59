"""``GET /metrics``: the Prometheus metrics, behind the API token like the rest.

Absent (404) when metrics are off or served at an address of their own
(``metrics_address``).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from recorder.api.access import PrincipalDep, ReadDep, check_unlimited
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS
from recorder.telemetry.metrics import CONTENT_TYPE

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    dependencies=[ReadDep],
    response_class=Response,
    responses={
        **ERRORS,
        200: {
            "description": "the metrics in Prometheus' text format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
    },
)
async def metrics(runtime: RuntimeDep, principal: PrincipalDep) -> Response:
    check_unlimited(principal, "the metrics of every agent")
    if runtime.metrics is None or runtime.settings.metrics_address:
        raise HTTPException(404, "metrics are not served here")
    return Response(runtime.metrics.exposition(), media_type=CONTENT_TYPE)
