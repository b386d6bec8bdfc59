"""The port of the reference client, ``@ag-ui/client`` 1.0: what a frontend makes of a stream.

Every frame goes through the stages the client runs it through, in its order::

    parse -> compat -> enforce -> chunks -> reducer     (the fold: messages, state, interrupts)
                                        \\-> verifier    (the check: where the client fails)

- parse (``recorder.wire.jsontext``): the frame's JSON text, read as ``JSON.parse`` reads it;
  the frame must be an object with a non-empty string ``type``.
- compat (``compat.py``): the compatibility boundary turns retired shapes into 1.0 ones.
- enforce (``enforce.py``): unknown event types are dropped, known ones validated and
  stripped of what the schema does not describe.
- chunks (``chunks.py``): ``*_CHUNK`` events become start/content/end events.
- reducer (``reducer.py`` over ``messages.py``, driven by ``projector.py``):
  ``defaultApplyEvents``, quirks included; state patches are fast-json-patch's (``patch.py``
  with ``edits.py``; ``state.py``, which the check shares to find where the run fails).
- verifier (``verify.py`` with ``verify_fields.py``, driven by ``check.py``): ``verifyEvents``,
  with its error texts.

``inbound.py`` runs the first four stages for both consumers. What JavaScript makes of JSON
values (truthiness, ``===``, Map keys, printing, property reads, numbers as doubles) is in
``jsvalues.py``, the built-ins those reads meet in ``jsprototypes.py``, its copies (through
JSON, structured clones) in ``jsclone.py``. Everything here is pure: no I/O, no clock, no
randomness.

The JSON names used across the port are ``JSONValue`` (any JSON value) and ``JSONObject``
(an object: an event, a message, an input); a ``Frame`` is what a stage is fed: the raw
bytes or text of one frame, or a value already parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recorder.wire.jsontext import JSONObject, JSONValue

Frame = bytes | str | Mapping[str, Any]
"""One frame: its JSON text, or a JSON object already parsed from it."""

__all__ = ["Frame", "JSONObject", "JSONValue"]
