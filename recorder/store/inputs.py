"""Posted inputs kept as what is new: content-addressed chunks in a tree, shared by all runs.

A RunAgentInput carries the whole conversation so far, so storing each run's input whole
makes a thread's storage grow with the square of its length. Here an input is cut into
chunks at content-defined points, each chunk is stored once under the hash of its bytes
(``input_chunks``), and the chunks' hashes are grouped, again at content-defined points,
into nodes, level after level, up to one root: the run keeps only that root
(``run_inputs.root``). A run whose input repeats its parent's history plus one new message
shares every chunk and node with it but those at the end (and the few around what
changed); what it adds is its new content and a path of nodes up to its root.

Content-defined cuts make the sharing hold wherever the change is. A cut falls after
``},`` (the end of an object in a list: a message, a tool call, a to-do) when a hash of
the bytes just before it says so; the decision looks at those bytes only, not at where
the previous cut fell, so an edit in the middle of the history changes the chunks around
it and little further on. (Only where no candidate has been chosen for 4 KB, in a run of
look-alike objects, does the next one become a cut by position.) Nodes are cut the same
way, after a child whose hash says so.

The exact bytes come back by reading the tree from its root down and joining the leaves
in order (``reassemble``). Nothing is parsed: any bytes, JSON or not, round-trip.

A chunk row is ``(hash, level, data)``: level 0 holds bytes, level ``n`` the 16-byte
hashes of its children at level ``n - 1``. The level is part of the hash, so bytes that
happen to look like a list of hashes never stand for a node. A leaf whose bytes compress
well (text does, to about 0.4) is kept compressed (zlib), at level ``PACKED``: its hash is
still that of its bytes at level 0, so it stands for the same leaf and is shared as one.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

HASH_BYTES = 16
# Inputs smaller than this are kept whole in the run's row: a tree would cost more.
INLINE_BELOW = 1024
_CANDIDATE = re.compile(rb"\}\s*,")
_WINDOW = 24  # bytes before a candidate cut that decide whether it is one
_CUT_MASK = 3  # about one candidate in four is a cut
# Where every candidate looks alike (a list of identical objects), none would be chosen:
# past this many bytes the next candidate is a cut anyway.
_LONGEST = 4096
_NODE_MASK = 7  # about one child in eight ends a node
PACKED = -1  # the level of a row holding a leaf compressed
_PACK_FROM = 128  # a shorter leaf is kept as it is
_PACK_GAIN = 0.8  # a leaf is kept compressed when that takes at most this much of it


@dataclass(frozen=True, slots=True)
class Chunk:
    hash: bytes
    level: int
    data: bytes

    def children(self) -> list[bytes]:
        if self.level == 0:
            return []
        return [self.data[i : i + HASH_BYTES] for i in range(0, len(self.data), HASH_BYTES)]


@dataclass(frozen=True, slots=True)
class InputTree:
    """An input cut into chunks: its root and every chunk by hash (each listed once), the
    leaves ``pack`` compressed, by hash, and the leaves in order (a later ``build`` of
    bytes that begin alike takes those it shares from them)."""

    root: bytes
    chunks: dict[bytes, Chunk]
    packed: dict[bytes, bytes] = field(default_factory=dict)
    leaves: list[Chunk] = field(default_factory=list)
    # The leaves cut here rather than taken from an earlier tree (None: every leaf): the
    # only ones ``pack`` may have to compress.
    fresh: list[bytes] | None = None
    # Each level's hashes, the leaves' first, and from the nodes' level on where each node's
    # children end in the level below: a later ``build`` takes the nodes it shares.
    levels: list[tuple[list[bytes], list[int]]] = field(default_factory=list)

    def row(self, key: bytes) -> tuple[bytes, int, bytes]:
        """The chunk's row as it is kept: ``(hash, level, data)``."""
        packed = self.packed.get(key)
        if packed is not None:
            return key, PACKED, packed
        chunk = self.chunks[key]
        return key, chunk.level, chunk.data


def pack(tree: InputTree, known: Callable[[bytes], object] | None = None) -> InputTree:
    """``tree`` with its leaves compressed where that pays, but those ``known`` finds (a
    chunk stored already is not inserted again: compressing it would be wasted)."""
    for key in tree.chunks if tree.fresh is None else tree.fresh:
        chunk = tree.chunks[key]
        if chunk.level or len(chunk.data) < _PACK_FROM or key in tree.packed:
            continue
        if known and known(key) is not None:
            continue
        packed = zlib.compress(chunk.data, 1)
        if len(packed) <= len(chunk.data) * _PACK_GAIN:
            tree.packed[key] = packed
    return tree


def unpacked(key: bytes, level: int, data: bytes) -> Chunk:
    """The chunk a row ``(hash, level, data)`` holds."""
    if level == PACKED:
        return Chunk(key, 0, zlib.decompress(data))
    return Chunk(key, level, data)


def _hash(level: int, data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=HASH_BYTES, person=b"rec-in%d" % level).digest()


def leaves(data: bytes) -> list[bytes]:
    """``data`` cut at content-defined points (joined back, the exact bytes)."""
    return [part for part in _cut(data, ()) if isinstance(part, bytes)]  # (all are)


_KEY = 16  # the first bytes of a leaf, by which a leaf taken again is looked for
_BLOCK = 64  # leaves taken again compared at once: one comparison of their joined bytes


def _cut(data: bytes, after: Sequence[Chunk]) -> list[bytes | range]:
    """``data`` cut as ``leaves`` cuts it: each new leaf's bytes, and where it holds leaves
    of ``after`` (the leaves of earlier bytes, in order) at the same cuts, the range of
    their indexes there.

    Whether a candidate is a cut depends on the ``_WINDOW`` bytes before it and on where
    the cut before it fell. So a leaf of ``after`` (not its last: that one ended with its
    bytes, not at a cut) found again right after a cut here, with the same window of bytes
    before it, would be cut again exactly as it was: it is taken as it is, and so is each
    of the leaves after it that follows here too. Bytes that begin like ``after`` take its
    leaves from the first; bytes that changed in a stretch (a run's next checkpoint: the
    end of its messages, of their index, the state) are cut there and take ``after``'s
    leaves again from the first cut past the change that finds one. Leaves taken again are
    compared ``_BLOCK`` at a time (a run's checkpoint shares thousands with the one before).
    """
    datas = [leaf.data for leaf in after[:-1]]
    count = len(datas)
    starts: dict[bytes, int] | None = None
    parts: list[bytes | range] = []
    start = j = 0
    search = _CANDIDATE.search
    while True:
        taken = j
        while taken < count:
            block = datas[taken : taken + _BLOCK]
            joined = b"".join(block)
            if data.startswith(joined, start):
                start += len(joined)
                taken += len(block)
                continue
            for leaf in block:  # they stop in this block: which leaf is the last
                if not data.startswith(leaf, start):
                    break
                start += len(leaf)
                taken += 1
            break
        if taken > j:
            parts.append(range(j, taken))
        j = count  # (until a cut finds a leaf to take again)
        pos = start
        while (match := search(data, pos)) is not None:
            pos = match.end()
            if (
                zlib.crc32(data[max(0, pos - _WINDOW) : pos]) & _CUT_MASK == 0
                or pos - start >= _LONGEST
            ):
                parts.append(data[start:pos])
                start = pos
                if starts is None:
                    # The leaves past those taken so far, by their first bytes (the first
                    # with those bytes wins): bytes that changed in a stretch take up again
                    # with leaves after it. (Any leaf found is checked: which ones are
                    # looked for changes how much is taken again, never the cuts.)
                    starts = {
                        datas[k][:_KEY]: k
                        for k in range(count - 1, max(taken, 1) - 1, -1)
                        if len(datas[k - 1]) >= _WINDOW
                    }
                found = starts.get(data[start : start + _KEY])
                if (
                    found is not None
                    and start >= _WINDOW
                    and data.startswith(datas[found - 1][-_WINDOW:], start - _WINDOW)
                    and data.startswith(datas[found], start)
                ):
                    j = found
                    break
        else:
            break
    if start < len(data) or not parts:
        parts.append(data[start:])
    return parts


def build(data: bytes, after: InputTree | None = None) -> InputTree:
    """The tree of ``data``: leaves of its bytes, nodes of hashes, one root.

    ``after``: the tree of earlier bytes much like ``data`` (a run's previous checkpoint:
    the same messages, more at their end). Its leaves that ``data`` holds at the same
    cuts are taken as they are, hashed and compressed already (``_cut``): the tree is the
    very one ``build(data)`` makes, and a checkpoint every few hundred events of a long
    run costs what changed since the one before, not the whole run again."""
    chunks: dict[bytes, Chunk] = {}
    packed: dict[bytes, bytes] = {}
    ordered: list[Chunk] = []
    fresh: list[bytes] = []
    known = after.leaves if after is not None else []
    for part in _cut(data, known):
        if isinstance(part, bytes):
            key = _hash(0, part)
            ordered.append(chunks.setdefault(key, Chunk(key, 0, part)))
            fresh.append(key)
        else:  # leaves of ``after``, hashed and compressed already (a hash: the same bytes)
            taken = known[part.start : part.stop]
            ordered += taken
            keys = [leaf.hash for leaf in taken]
            chunks.update(zip(keys, taken, strict=True))
            was = after.packed if after is not None else {}
            packed.update({key: was[key] for key in was.keys() & set(keys)})
    level = 0
    hashes = [leaf.hash for leaf in ordered]
    levels: list[tuple[list[bytes], list[int]]] = [(hashes, [])]
    earlier = after.levels if after is not None else []
    while len(hashes) > 1:
        level += 1
        groups: list[bytes] = []
        ends: list[int] = []  # where each node's children end in ``hashes``
        done = 0
        if after is not None and level < len(earlier):
            # The earlier tree's nodes over the stretch of this level it shares, but its
            # last (which may have ended with its hashes rather than at a child that ends
            # a node): where ``hashes`` begin alike, the nodes are alike.
            nodes, node_ends = earlier[level]
            shared = _shared(hashes, earlier[level - 1][0])
            count = bisect.bisect_right(node_ends, shared, 0, len(node_ends) - 1)
            if count:
                groups, ends, done = nodes[:count], node_ends[:count], node_ends[count - 1]
                chunks.update((key, after.chunks[key]) for key in groups)
        group: list[bytes] = []
        for i in range(done, len(hashes)):
            key = hashes[i]
            group.append(key)
            if key[0] & _NODE_MASK == 0:
                groups.append(_node(level, group, chunks))
                ends.append(i + 1)
                group = []
        if group:
            groups.append(_node(level, group, chunks))
            ends.append(len(hashes))
        if len(groups) == len(hashes):  # no child ended a node: take them all in one
            groups, ends = [_node(level, hashes, chunks)], [len(hashes)]
        levels.append((groups, ends))
        hashes = groups
    fresh_only = fresh if after is not None else None
    return InputTree(hashes[0], chunks, packed, ordered, fresh_only, levels)


def _shared(new: list[bytes], old: list[bytes]) -> int:
    """How many hashes ``new`` and ``old`` begin with in common (found by halving: a
    slice's comparison runs in C, and hashes taken again are the very same objects)."""
    low, high = 0, min(len(new), len(old))
    while low < high:
        mid = (low + high + 1) // 2
        if new[:mid] == old[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _node(level: int, children: list[bytes], chunks: dict[bytes, Chunk]) -> bytes:
    data = b"".join(children)
    key = _hash(level, data)
    chunks.setdefault(key, Chunk(key, level, data))
    return key


def reassemble(root: bytes, chunks: Mapping[bytes, Chunk]) -> bytes:
    """The bytes under ``root``, from ``chunks`` (which must hold the whole tree)."""
    out: list[bytes] = []
    stack = [root]
    while stack:
        chunk = chunks[stack.pop()]
        if chunk.level == 0:
            out.append(chunk.data)
        else:
            stack.extend(reversed(chunk.children()))
    return b"".join(out)


class ChunkCache:
    """Chunks read or written lately, by hash, up to about ``budget`` bytes.

    A hash names the same bytes forever, so a cached chunk is never stale, whatever the
    database did since (even a rolled-back insert cached its chunks' true bytes); only a
    root found in a committed row is ever looked up. When full, it starts over. Shared by
    the reader threads: each operation on the dict is atomic, and a lost update costs
    only a read.

    It also keeps the bytes under each level-1 node it was asked to join (its leaves,
    joined in order): a tree is then joined from a few lookups per node rather than one
    per leaf.
    """

    def __init__(self, budget: int = 64 * 1024 * 1024) -> None:
        self._chunks: dict[bytes, Chunk] = {}
        self._joined: dict[bytes, bytes] = {}
        self._size = 0
        self._budget = budget

    def get(self, key: bytes) -> Chunk | None:
        return self._chunks.get(key)

    def put(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            if chunk.hash not in self._chunks:
                self._chunks[chunk.hash] = chunk
                self._size += len(chunk.data) + 100
        self._bound()

    def joined(self, key: bytes) -> bytes | None:
        """The bytes under level-1 node ``key``, when they were joined before."""
        return self._joined.get(key)

    def keep_joined(self, key: bytes, data: bytes) -> None:
        self._joined[key] = data
        self._size += len(data) + 100
        self._bound()

    def _bound(self) -> None:
        if self._size > self._budget:
            self._chunks = {}
            self._joined = {}
            self._size = 0


class LastTrees:
    """The tree built last under each of a few keys (a thread's latest checkpoint), for the
    next ``build`` under that key to start from. Bounded: a new key drops the oldest.
    Nothing here can be stale: a tree holds the true hashes of its bytes whatever the
    database did since; it only spares cutting and hashing them again."""

    def __init__(self, size: int = 4) -> None:
        self._trees: dict[str, InputTree] = {}
        self._size = size

    def get(self, key: str) -> InputTree | None:
        return self._trees.get(key)

    def put(self, key: str, tree: InputTree) -> None:
        self._trees.pop(key, None)
        self._trees[key] = tree
        while len(self._trees) > self._size:
            del self._trees[next(iter(self._trees))]


def batches(items: Iterable[bytes], size: int = 500) -> list[list[bytes]]:
    """``items`` in lists of at most ``size`` (statements take a bounded number of values)."""
    listed = list(items)
    return [listed[i : i + size] for i in range(0, len(listed), size)]


# -- deltas: an input kept as the changes from an earlier input of its thread -----------------
#
# A run's input usually repeats an earlier run's (its parent's) with a little changed: a
# message or two appended, the state touched. Kept as a delta from that input, a run costs
# what changed plus a few bytes per unchanged stretch, instead of a new path of nodes from
# each change up to a root. The delta is a list of operations, each either a copy of a
# stretch of the base's bytes or bytes of its own; rebuilding an input rebuilds its base
# (a tree, whole bytes, or again a delta) and applies it. A chain of deltas is at most
# ``CHAIN`` long: the next input is kept as a tree again, so rebuilding one never reads
# more than ``CHAIN`` rows. Deltas are found by comparing bytes, nothing is parsed: any
# bytes give a delta that rebuilds them exactly; how much it copies depends on how alike
# the two are. A delta is kept compressed (zlib) when that makes it shorter: what it holds
# of its own is new text, which compresses to about half, and to about 0.4 with the end of
# its base (the latest of the conversation, in the same words) as the dictionary.

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
