"""The one rule for the ids a client or a file gives (``threadId``, ``runId``).

An id is a non-empty string of printable text: no control character (a NUL no PostgreSQL
text column stores, the rest invisible in logs and terminals), no half of a surrogate
pair (no database stores it as UTF-8), and no ``/``: an id is a path segment of the API
(``/runs/{id}``) and of the web timeline, and a slash would make the recorded run one
that no URL reads back. For the same reason an id is not ``.`` or ``..``: a browser and
the HTTP clients resolve such a segment (encoded or not) before the request is sent.
"""

from __future__ import annotations

import re

from recorder.errors import InputError
from recorder.wire.jsontext import well_formed

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def id_problem(value: object) -> str | None:
    """Why ``value`` cannot be an id (a phrase), or None when it can."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if _CONTROL.search(value):
        return "must not contain control characters (NUL, newline, tab and the like)"
    if "/" in value:
        return "must not contain '/'"
    if value in (".", ".."):
        return "must not be '.' or '..' (a URL's path resolves them away)"
    if value != well_formed(value):
        return "must not hold half of a surrogate pair"
    return None


def check_id(value: object, name: str) -> str:
    """``value`` when it can be an id; else ``InputError`` naming ``name``."""
    problem = id_problem(value)
    if problem is not None:
        raise InputError(f"{name} {problem}")
    assert isinstance(value, str)
    return value
