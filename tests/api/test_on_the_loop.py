"""Every API request is answered on the event loop: FastAPI runs an endpoint or a
dependency that is a plain function on a worker thread, two hops (and, under load, a
wait for the GIL each way) per call, for work that is a lookup or a check."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from fastapi.routing import APIRoute

import recorder.api

# Every router of the API's modules.
ROUTERS: list[APIRouter] = [
    router
    for info in pkgutil.iter_modules(recorder.api.__path__)
    if isinstance(
        router := getattr(importlib.import_module(f"recorder.api.{info.name}"), "router", None),
        APIRouter,
    )
]


def _calls(dependant: Dependant) -> Iterator[Any]:
    if dependant.call is not None:
        yield dependant.call
    for inner in dependant.dependencies:
        yield from _calls(inner)


def _plain(call: Any) -> bool:
    """Whether FastAPI would call ``call`` on a worker thread (a class is built inline)."""
    if inspect.isclass(call):
        return False
    target = call if inspect.isroutine(call) else getattr(call, "__call__", call)  # noqa: B004
    return not (inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target))


def test_no_endpoint_or_dependency_runs_on_a_worker_thread() -> None:
    dependants = [
        (route.path, route.dependant)
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute)
    ]
    assert len(ROUTERS) >= 10 and len(dependants) > 30
    # A router's own dependencies (its scope, say) apply to each of its routes.
    dependants += [
        ("(router)", get_dependant(path="", call=depends.dependency))
        for router in ROUTERS
        for depends in router.dependencies
        if depends.dependency is not None
    ]
    plain = sorted(
        {
            f"{path} {getattr(call, '__name__', call)}"
            for path, dependant in dependants
            for call in _calls(dependant)
            if _plain(call)
        }
    )
    assert plain == []
