"""The hash chains that make changes to the log evident (SHA-256, standard library).

Three links, each over exactly what is stored:

- a run's chain starts at ``run_genesis(thread, run)`` and takes one step per event,
  ``event_link(previous, seq, type, payload)``: the payload bytes as stored, the type as
  stored (None and "" differ), the seq. Binding the first link to the run's ids makes a
  run's events worthless in another run (swapping two runs' events breaks both chains);
  chaining seq makes a deleted and renumbered event break every link after it.
- a run's head is its last event's hash (its genesis when it has none), kept on the run
  row when it closes.
- a thread's chain starts at ``thread_genesis(thread)`` and takes one step per closed run,
  in the order they closed: ``run_link(previous, run, head)``.

Fields are length-prefixed (or fixed-size) so that no two different inputs share bytes.
Whoever can rewrite the database can also recompute every hash: a receipt kept elsewhere
(``recorder audit receipt``) is what proves the log unchanged since then.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence

_RUN = b"agui-recorder/run\x00"
_THREAD = b"agui-recorder/thread\x00"
_SEQ_TYPE = struct.Struct(">qi")
_LENGTH = struct.Struct(">I")
_sha256 = hashlib.sha256
HASH_BYTES = _sha256().digest_size  # an event's stored hash


def _text(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return _LENGTH.pack(len(data)) + data


# What a store computing these hashes in SQL needs (``recorder.store.writes``).
RUN_PREFIX = _RUN
THREAD_PREFIX = _THREAD
text = _text


def run_genesis(thread_id: str, run_id: str) -> bytes:
    return _sha256(_RUN + _text(thread_id) + _text(run_id)).digest()


def thread_genesis(thread_id: str) -> bytes:
    return _sha256(_THREAD + _text(thread_id)).digest()


def event_link(previous: bytes, seq: int, kind: str | None, payload: bytes) -> bytes:
    if kind is None:
        return _sha256(previous + _SEQ_TYPE.pack(seq, -1) + payload).digest()
    data = kind.encode("utf-8", "surrogatepass")
    return _sha256(previous + _SEQ_TYPE.pack(seq, len(data)) + data + payload).digest()


def event_links(
    previous: bytes, first_seq: int, events: Iterable[tuple[str | None, bytes]]
) -> list[bytes]:
    """The hashes of consecutive events from ``first_seq``, chained from ``previous``.

    The append path calls this for every event it records: the type's bytes (a few dozen
    distinct types) are encoded once, and each link is one concatenation and one digest.
    The bytes hashed are exactly ``event_link``'s."""
    hashes: list[bytes] = []
    append = hashes.append
    pack = _SEQ.pack
    tails = _TYPE_TAILS
    seq = first_seq
    for kind, payload in events:
        tail = tails.get(kind)
        if tail is None:
            tail = _type_tail(kind)
        previous = _sha256(previous + pack(seq) + tail + payload).digest()
        append(previous)
        seq += 1
    return hashes


_SEQ = struct.Struct(">q")
_TYPE_TAILS: dict[str | None, bytes] = {None: struct.pack(">i", -1)}
SEQ_BYTES = _SEQ.pack  # a seq as it is hashed
sha256 = _sha256


def stored_type(kind: str | None) -> tuple[str | None, bytes]:
    """The type as stored (a NUL character dropped) and as hashed after the seq: for a
    writer that chains events itself, one dict lookup per event (``STORED_TYPES``)."""
    found = STORED_TYPES.get(kind)
    if found is None:
        stored = kind if kind is None or "\x00" not in kind else kind.replace("\x00", "")
        found = (stored, _TYPE_TAILS.get(stored) or _type_tail(stored))
        if len(STORED_TYPES) < 4096:  # types come from agents: keep the cache bounded
            STORED_TYPES[kind] = found
    return found


STORED_TYPES: dict[str | None, tuple[str | None, bytes]] = {}


def _type_tail(kind: str | None) -> bytes:
    """The type as hashed after the seq: its length (-1 for None), then its UTF-8 bytes."""
    if kind is None:
        return _TYPE_TAILS[None]
    data = kind.encode("utf-8", "surrogatepass")
    tail = struct.pack(">i", len(data)) + data
    if len(_TYPE_TAILS) < 4096:  # types come from agents: keep the cache bounded
        _TYPE_TAILS[kind] = tail
    return tail


def run_link(previous: bytes, run_id: str, head: bytes) -> bytes:
    return _sha256(previous + _text(run_id) + head).digest()


def thread_head(thread_id: str, runs: Sequence[tuple[str, bytes]]) -> bytes:
    """The thread's chain over ``(run id, run head)`` pairs, in the order they closed."""
    head = thread_genesis(thread_id)
    for run_id, run_head in runs:
        head = run_link(head, run_id, run_head)
    return head
