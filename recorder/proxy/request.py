"""What the proxy takes from the client's request: the RunAgentInput, the headers it forwards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from recorder.config import Settings
from recorder.errors import BodyTooLarge, InputError
from recorder.wire.jsontext import parse, well_formed

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host"}


def parse_run_input(body: bytes, max_bytes: int | None = None) -> dict[str, Any]:
    """The posted RunAgentInput as a dict, if it names a thread and a run; else InputError.

    Only ``threadId`` and ``runId`` are checked: every other field goes to the agent as
    posted (clients send ``protocolVersion`` and more)."""
    if max_bytes is not None and len(body) > max_bytes:
        raise BodyTooLarge(f"request body is {len(body)} bytes; the limit is {max_bytes}")
    try:
        obj = parse(body)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InputError("request body must be a JSON object (a RunAgentInput)")
    for key in ("threadId", "runId"):
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise InputError(f"RunAgentInput.{key} must be a non-empty string")
        if value != well_formed(value):  # half a surrogate pair: no database stores it
            raise InputError(f"RunAgentInput.{key} must not hold half of a surrogate pair")
    return obj


# The header a client may carry the recorder's own token in: never forwarded, whatever
# ``forward_headers`` and ``forward_header_prefixes`` allow.
RECORDER_TOKEN = "x-recorder-token"


def forwarded_headers(headers: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """Headers that pass to the upstream: an allow list plus prefixes; never stored."""
    allowed = {h.lower() for h in settings.forward_headers}
    prefixes = tuple(p.lower() for p in settings.forward_header_prefixes)
    out = {
        k: v
        for k, v in headers.items()
        if k.lower() not in _HOP_BY_HOP
        and k.lower() != RECORDER_TOKEN
        and (k.lower() in allowed or k.lower().startswith(prefixes))
    }
    out["content-type"] = "application/json"
    out["accept"] = "text/event-stream"  # the recorder records SSE; never ask for protobuf
    return out


def message_texts(posted: Mapping[str, Any]) -> list[str]:
    """The text of the posted messages, for searching threads by what was said."""
    texts: list[str] = []
    messages = posted.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content + "\n")
        elif isinstance(content, list):
            texts.extend(
                p["text"] + "\n"
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
    return texts
