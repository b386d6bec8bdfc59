"""What the proxy takes from the client's request: the RunAgentInput, the headers it forwards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from recorder.config import Settings
from recorder.errors import BodyTooLarge, InputError
from recorder.wire.ids import check_id
from recorder.wire.jsontext import MAX_DEPTH, nested_too_deeply, parse

# Hop-by-hop headers (RFC 9110, 7.6.1), and those a client's ``Connection`` names too.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "proxy-authorization",
        "proxy-authenticate",
    }
)


def parse_run_input(
    body: bytes, max_bytes: int | None = None, ids: tuple[str, ...] = ("threadId", "runId")
) -> dict[str, Any]:
    """The posted RunAgentInput as a dict, if it names a thread and a run (``ids``); else
    InputError.

    Only those ids are checked: every other field goes to the agent as posted (clients
    send ``protocolVersion`` and more)."""
    if max_bytes is not None and len(body) > max_bytes:
        raise BodyTooLarge(f"request body is {len(body)} bytes; the limit is {max_bytes}")
    try:
        obj = parse(body)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InputError("request body must be a JSON object (a RunAgentInput)")
    if nested_too_deeply(body, obj):
        raise InputError(f"request body nests arrays and objects past {MAX_DEPTH} levels")
    for key in ids:
        check_id(obj.get(key), f"RunAgentInput.{key}")
    return obj


# The header a client may carry the recorder's own token in: never forwarded, whatever
# ``forward_headers`` and ``forward_header_prefixes`` allow.
RECORDER_TOKEN = "x-recorder-token"


def forwarded_headers(headers: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """Headers that pass to the upstream: an allow list plus prefixes; never stored.

    Never passed: hop-by-hop headers, those the client's ``Connection`` header names, and
    any that carries the recorder's own API token (a client sending it to the proxy means
    it for the recorder, not for the agent)."""
    allowed = {h.lower() for h in settings.forward_headers}
    prefixes = tuple(p.lower() for p in settings.forward_header_prefixes)
    dropped: frozenset[str] | set[str] = _HOP_BY_HOP
    named = headers.get("connection")
    if named:
        dropped = _HOP_BY_HOP | {n.strip().lower() for n in named.split(",")}
    out = {
        k: v
        for k, v in headers.items()
        if k.lower() not in dropped
        and k.lower() != RECORDER_TOKEN
        and (k.lower() in allowed or k.lower().startswith(prefixes))
    }
    token = settings.api_token
    if token:
        out = {k: v for k, v in out.items() if token not in v}
    out["content-type"] = "application/json"
    out["accept"] = "text/event-stream"  # the recorder records SSE; never ask for protobuf
    return out
