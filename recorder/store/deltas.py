"""Posted inputs kept as deltas: the changes from an earlier input of their thread.

A run's input usually repeats an earlier run's (its parent's) with a little changed: a
message or two appended, the state touched. Kept as a delta from that input, a run costs
what changed plus a few bytes per unchanged stretch, instead of a new path of nodes from
each change up to a root. The delta is a list of operations, each either a copy of a
stretch of the base's bytes or bytes of its own; rebuilding an input rebuilds its base
(a tree, whole bytes, or again a delta) and applies it. A chain of deltas is at most
``CHAIN`` long: the next input is kept as a tree again, so rebuilding one never reads
more than ``CHAIN`` rows. Deltas are found by comparing bytes, nothing is parsed: any
bytes give a delta that rebuilds them exactly; how much it copies depends on how alike
the two are. A delta is kept compressed (zlib) when that makes it shorter: what it holds
of its own is new text, which compresses to about half, and to about 0.4 with the end of
its base (the latest of the conversation, in the same words) as the dictionary.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

CHAIN = 16  # an input is at most this many deltas away from a tree (or whole bytes)
_COPY = struct.Struct("<BII")  # 0, offset in the base, length
_OWN = struct.Struct("<BI")  # 1, length, then the bytes
_PACKED = 2  # the first byte of a compressed delta: the rest is zlib of the operations
_DICTIONARY = 4096  # the last bytes of the base, the dictionary a delta is compressed with
_ANCHOR = 32  # bytes of the base looked for in the new input
_MIN_COPY = 24  # a shorter stretch in common is not worth a copy
_DEPTH = 24  # how far a difference is split into smaller ones before it is kept as it is
_TRIES = 4  # places in the base looked for per difference
_NEAR = 4096  # bytes around where a piece is first looked for
_STEP = 64  # bytes compared first when looking for where two stretches differ
# Bytes of the base that looking for moved stretches may scan, per delta (a few ms): what
# is not found by then is kept as the new input's own. Bounds a delta of inputs that
# share little in order (about 1.8 s for 1 MB whose every message has its keys reordered).
_SCAN = 16 << 20


def delta(base: bytes, data: bytes, *, moves: bool = False) -> bytes | None:
    """``data`` as the changes from ``base`` (``patch(base, ...)`` gives it back), or None
    when it has too little in common with ``base`` to be worth it.

    The stretches in common are found in order: what ``data`` holds in another order than
    ``base`` is its own. ``moves``: what is left is then looked for anywhere in ``base``
    (a projector's checkpoint holds its run's input, in another order), at the cost of a
    few searches of the whole base per stretch."""
    ops: list[tuple[int, int, int]] = []  # (0, offset, length) copies; (1, start, end) own
    _diff(base, 0, len(base), data, 0, len(data), ops, 0)
    if moves:
        ops = _moved(base, data, ops)
    parts: list[bytes] = []
    own = 0
    for kind, a, b in ops:
        if kind == 0:
            parts.append(_COPY.pack(0, a, b))
        else:
            own += b - a
            parts.append(_OWN.pack(1, b - a))
            parts.append(data[a:b])
    if own > len(data) // 2:
        return None
    encoded = b"".join(parts)
    packing = zlib.compressobj(1, zdict=base[-_DICTIONARY:])
    packed = bytes((_PACKED,)) + packing.compress(encoded) + packing.flush()
    return packed if len(packed) < len(encoded) else encoded


def compressed(encoded: bytes) -> bool:
    """Whether the delta ``encoded`` is kept compressed."""
    return encoded[:1] == bytes((_PACKED,))


def operations(base: bytes, encoded: bytes) -> bytes:
    """A delta's operations, as ``patch`` reads them (a compressed one decompressed)."""
    if not compressed(encoded):
        return encoded
    unpacking = zlib.decompressobj(zdict=base[-_DICTIONARY:])
    return unpacking.decompress(encoded[1:]) + unpacking.flush()


def patch(base: bytes, encoded: bytes) -> bytes:
    """The bytes ``encoded`` (from ``delta``) makes of ``base``."""
    encoded = operations(base, encoded)
    view = memoryview(base)
    parts: list[bytes | memoryview] = []
    at = 0
    end = len(encoded)
    while at < end:
        if encoded[at] == 0:
            _, offset, length = _COPY.unpack_from(encoded, at)
            at += _COPY.size
            if offset + length > len(base):
                raise ValueError("a delta copies past the end of its base")
            parts.append(view[offset : offset + length])
        else:
            _, length = _OWN.unpack_from(encoded, at)
            at += _OWN.size
            parts.append(encoded[at : at + length])
            at += length
    return b"".join(parts)


def _diff(
    old: bytes,
    olo: int,
    ohi: int,
    new: bytes,
    nlo: int,
    nhi: int,
    ops: list[tuple[int, int, int]],
    depth: int,
) -> None:
    """Operations making ``new[nlo:nhi]`` from ``old[olo:ohi]``, appended to ``ops``."""
    if nlo >= nhi:
        return
    head = _prefix(old, olo, ohi, new, nlo, nhi)
    tail = _suffix(old, olo + head, ohi, new, nlo + head, nhi)
    if head >= _MIN_COPY:
        _copy(ops, olo, head)
        olo, nlo = olo + head, nlo + head
    if tail >= _MIN_COPY:
        ohi, nhi = ohi - tail, nhi - tail
    else:
        tail = 0
    found = None
    if depth < _DEPTH and ohi - olo >= _ANCHOR and nhi - nlo >= _ANCHOR:
        found = _anchor(old, olo, ohi, new, nlo, nhi)
    if found is None:
        _own(ops, nlo, nhi)
    else:
        start, at, length = found  # old[start:start+length] == new[at:at+length]
        _diff(old, olo, start, new, nlo, at, ops, depth + 1)
        _copy(ops, start, length)
        _diff(old, start + length, ohi, new, at + length, nhi, ops, depth + 1)
    if tail:
        _copy(ops, ohi, tail)


def _moved(old: bytes, new: bytes, ops: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``ops`` with each long stretch of ``new``'s own looked for anywhere in ``old``."""
    out: list[tuple[int, int, int]] = []
    budget = [_SCAN]
    for op in ops:
        if op[0] == 1 and op[2] - op[1] >= _ANCHOR:
            _found_anywhere(old, new, op[1], op[2], out, 0, budget)
        elif op[0] == 0:
            _copy(out, op[1], op[2])
        else:
            _own(out, op[1], op[2])
    return out


def _found_anywhere(
    old: bytes,
    new: bytes,
    nlo: int,
    nhi: int,
    ops: list[tuple[int, int, int]],
    depth: int,
    budget: list[int],
) -> None:
    """Operations making ``new[nlo:nhi]`` from stretches anywhere in ``old``: the longest
    of a few grown from pieces of ``new`` found in ``old``, then what is left either side;
    ``budget``: the bytes of ``old`` the searches may still scan."""
    best: tuple[int, int, int] | None = None
    if depth < _DEPTH and nhi - nlo >= _ANCHOR:
        span = nhi - nlo - _ANCHOR
        for i in range(_TRIES):
            if budget[0] <= 0:
                break
            q = nlo + span * (2 * i + 1) // (2 * _TRIES)
            a = old.find(new[q : q + _ANCHOR])
            budget[0] -= len(old) if a < 0 else a + _ANCHOR
            if a < 0:
                continue
            left = _suffix(old, 0, a, new, nlo, q)
            right = _ANCHOR + _prefix(old, a + _ANCHOR, len(old), new, q + _ANCHOR, nhi)
            if best is None or left + right > best[2]:
                best = (a - left, q - left, left + right)
    if best is None:
        _own(ops, nlo, nhi)
        return
    start, at, length = best  # old[start:start+length] == new[at:at+length]
    _found_anywhere(old, new, nlo, at, ops, depth + 1, budget)
    _copy(ops, start, length)
    _found_anywhere(old, new, at + length, nhi, ops, depth + 1, budget)


def _anchor(
    old: bytes, olo: int, ohi: int, new: bytes, nlo: int, nhi: int
) -> tuple[int, int, int] | None:
    """The longest of a few stretches that ``old[olo:ohi]`` and ``new[nlo:nhi]`` have in
    common, grown from short pieces of ``old`` found in ``new``: its start in each and
    its length. A piece is looked for first about where it would be if only the ends had
    changed (text repeats: the first place it occurs may be the wrong one)."""
    span = ohi - olo - _ANCHOR
    best: tuple[int, int, int] | None = None
    for i in range(_TRIES):
        a = olo + span * (2 * i + 1) // (2 * _TRIES)
        piece = old[a : a + _ANCHOR]
        expected = nlo + (a - olo)
        q = new.find(piece, max(nlo, expected - _NEAR), min(nhi, expected + _NEAR + _ANCHOR))
        if q < 0:
            q = new.find(piece, nlo, nhi)
        if q < 0:
            continue
        left = _suffix(old, olo, a, new, nlo, q)
        right = _ANCHOR + _prefix(old, a + _ANCHOR, ohi, new, q + _ANCHOR, nhi)
        if best is None or left + right > best[2]:
            best = (a - left, q - left, left + right)
            if 2 * best[2] >= ohi - olo:  # most of what is left: no better one to find
                break
    return best


def _prefix(old: bytes, olo: int, ohi: int, new: bytes, nlo: int, nhi: int) -> int:
    """How many bytes ``old[olo:ohi]`` and ``new[nlo:nhi]`` start with in common.

    Compared in growing steps, then halving ones: what is compared (and copied) is about
    twice what they have in common, however long the two are."""
    most = min(ohi - olo, nhi - nlo)
    if most <= 0 or old[olo] != new[nlo]:
        return 0
    view = memoryview(old)  # (compared where they lie: a slice of bytes is a copy)
    low, step = 1, _STEP  # old[olo:olo+low] matches
    while True:
        high = min(most, low + step)
        if not new.startswith(view[olo + low : olo + high], nlo + low):
            break
        if high == most:
            return most
        low, step = high, 2 * step
    while high - low > 1:  # the first difference is in old[olo+low:olo+high]
        mid = (low + high) // 2
        if new.startswith(view[olo + low : olo + mid], nlo + low):
            low = mid
        else:
            high = mid
    return low


def _suffix(old: bytes, olo: int, ohi: int, new: bytes, nlo: int, nhi: int) -> int:
    """How many bytes ``old[olo:ohi]`` and ``new[nlo:nhi]`` end with in common (as
    ``_prefix``, from the end)."""
    most = min(ohi - olo, nhi - nlo)
    if most <= 0 or old[ohi - 1] != new[nhi - 1]:
        return 0
    view = memoryview(old)
    low, step = 1, _STEP
    while True:
        high = min(most, low + step)
        if not new.endswith(view[ohi - high : ohi - low], nhi - high, nhi - low):
            break
        if high == most:
            return most
        low, step = high, 2 * step
    while high - low > 1:
        mid = (low + high) // 2
        if new.endswith(view[ohi - mid : ohi - low], nhi - mid, nhi - low):
            low = mid
        else:
            high = mid
    return low


def _copy(ops: list[tuple[int, int, int]], offset: int, length: int) -> None:
    if length <= 0:
        return
    if ops and ops[-1][0] == 0 and ops[-1][1] + ops[-1][2] == offset:
        ops[-1] = (0, ops[-1][1], ops[-1][2] + length)
    else:
        ops.append((0, offset, length))


def _own(ops: list[tuple[int, int, int]], start: int, end: int) -> None:
    if end <= start:
        return
    if ops and ops[-1][0] == 1 and ops[-1][2] == start:
        ops[-1] = (1, ops[-1][1], end)
    else:
        ops.append((1, start, end))


@dataclass(frozen=True, slots=True)
class Recent:
    """An input this store wrote lately: its run's thread, how many deltas from a tree."""

    run_id: str
    thread_id: str
    created_at: float
    depth: int
    data: bytes


class RecentInputs:
    """The latest input this store wrote in each thread, up to about ``budget`` bytes in all
    (the threads written longest ago are forgotten first): the bases of the next runs'
    deltas. Only inputs whose run was committed are kept. An entry may be stale: a purge
    may have deleted its run since, or a redaction rewritten its input (in this process,
    ``forget``; in another, the database marks it): ``create_run`` checks that the base is
    still there, the same run of the same thread, never rewritten."""

    def __init__(self, budget: int = 32 * 1024 * 1024) -> None:
        self._latest: dict[str, Recent] = {}
        self._size = 0
        self._budget = budget

    def base(self, thread_id: str) -> Recent | None:
        """The input to keep a new run's as a delta from: the latest of its thread known
        here (its parent's, as a rule; any input of the thread will do, a fork from an
        earlier run shares most of it too); None for none, or a chain too long."""
        found = self._latest.get(thread_id)
        if found is None or found.depth + 1 >= CHAIN:
            return None
        return found

    def latest(self, thread_id: str) -> Recent | None:
        """The latest input of the thread known here, however long its chain."""
        return self._latest.get(thread_id)

    def forget(self, thread_id: str) -> None:
        """Hold no input of the thread any more (its inputs were rewritten or purged)."""
        gone = self._latest.pop(thread_id, None)
        if gone is not None:
            self._size -= len(gone.data)

    def put(self, recent: Recent) -> None:
        gone = self._latest.pop(recent.thread_id, None)
        if gone is not None:
            self._size -= len(gone.data)
        self._latest[recent.thread_id] = recent  # last in the dict: written most lately
        self._size += len(recent.data)
        while self._size > self._budget and self._latest:
            oldest = next(iter(self._latest))
            self._size -= len(self._latest.pop(oldest).data)
