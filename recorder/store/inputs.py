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


CHUNK_CACHE_BYTES = 64 * 1024 * 1024  # a process's chunk cache, by default


class ChunkCache:
    """Chunks read or written lately, by hash, up to about ``budget`` bytes.

    A hash names the same bytes forever, so a cached chunk is never stale, whatever the
    database did since (even a rolled-back insert cached its chunks' true bytes); only a
    root found in a committed row is ever looked up.

    Two generations, each up to half the budget: what is put goes to the young one; when
    it is full it becomes the old one and the old one is dropped; what is found in the old
    one is put in the young one again. What was used since the last turn-over survives it,
    so a full cache sheds what nobody asked for lately instead of everything at once.
    Shared by the reader threads: each operation on a dict, and each swap of the two, is
    atomic; a lost update costs a read, or a count a little off (two threads turning it
    over at once may drop both generations; its size may be undercounted by an entry).

    It also keeps, for each node it was asked to join, the bytes under it as spans: for a
    level-1 node its leaves joined in order, one span; for a node above, its level-1
    descendants' spans in order (references, not copies). A tree is then joined from one
    lookup per node it does not share with a tree joined before, rather than one per leaf.
    """

    def __init__(self, budget: int = CHUNK_CACHE_BYTES) -> None:
        self._young = _Generation()
        self._old = _Generation()
        self._budget = budget

    @property
    def budget(self) -> int:
        return self._budget

    @property
    def size(self) -> int:
        """About how many bytes it keeps: each chunk's and span's, and 100 for each entry."""
        return self._young.size + self._old.size

    def clear(self) -> None:
        """Keep nothing (until more is put)."""
        self._young, self._old = _Generation(), _Generation()

    def get(self, key: bytes) -> Chunk | None:
        found = self._young.chunks.get(key)
        if found is None:
            found = self._old.chunks.get(key)
            if found is not None:
                self._put_chunk(found)
        return found

    def put(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            self._put_chunk(chunk)

    def spans(self, key: bytes) -> tuple[bytes, ...] | None:
        """The bytes under node ``key`` in spans, when they were joined before."""
        found = self._young.spans.get(key)
        if found is None:
            found = self._old.spans.get(key)
            if found is not None:
                # Moved alone, it keeps its descendants' bytes alive after their own
                # entries age out: counted with every byte it holds.
                self._put_spans(key, found, sum(map(len, found)))
        return found

    def keep_spans(self, key: bytes, spans: tuple[bytes, ...], *, level: int) -> None:
        # A level-1 node's span is new bytes; above, the spans are its descendants', kept
        # here as references: counted once, in their own entries of this generation.
        self._put_spans(key, spans, len(spans[0]) if level == 1 else 8 * len(spans))

    def _put_chunk(self, chunk: Chunk) -> None:
        if chunk.hash not in self._young.chunks and self._room(len(chunk.data) + 100):
            self._young.chunks[chunk.hash] = chunk

    def _put_spans(self, key: bytes, spans: tuple[bytes, ...], cost: int) -> None:
        if key not in self._young.spans and self._room(cost + 100):
            self._young.spans[key] = spans

    def _room(self, cost: int) -> bool:
        """Whether ``cost`` more bytes are kept (counted in the young generation), which
        turns over first when they would not fit; more than a generation holds is not."""
        half = self._budget // 2
        if cost > half:
            return False
        if self._young.size + cost > half:
            self._old, self._young = self._young, _Generation()
        self._young.size += cost
        return True


@dataclass
class _Generation:
    chunks: dict[bytes, Chunk] = field(default_factory=dict)
    spans: dict[bytes, tuple[bytes, ...]] = field(default_factory=dict)
    size: int = 0


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
