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
happen to look like a list of hashes never stand for a node.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    """An input cut into chunks: its root and every chunk by hash (each listed once)."""

    root: bytes
    chunks: dict[bytes, Chunk]


def _hash(level: int, data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=HASH_BYTES, person=b"rec-in%d" % level).digest()


def leaves(data: bytes) -> list[bytes]:
    """``data`` cut at content-defined points (joined back, the exact bytes)."""
    parts: list[bytes] = []
    start = 0
    for match in _CANDIDATE.finditer(data):
        end = match.end()
        if (
            zlib.crc32(data[max(0, end - _WINDOW) : end]) & _CUT_MASK == 0
            or end - start >= _LONGEST
        ):
            parts.append(data[start:end])
            start = end
    if start < len(data) or not parts:
        parts.append(data[start:])
    return parts


def build(data: bytes) -> InputTree:
    """The tree of ``data``: leaves of its bytes, nodes of hashes, one root."""
    chunks: dict[bytes, Chunk] = {}
    level = 0
    hashes: list[bytes] = []
    for part in leaves(data):
        key = _hash(0, part)
        chunks.setdefault(key, Chunk(key, 0, part))
        hashes.append(key)
    while len(hashes) > 1:
        level += 1
        groups: list[bytes] = []
        group: list[bytes] = []
        for key in hashes:
            group.append(key)
            if key[0] & _NODE_MASK == 0:
                groups.append(_node(level, group, chunks))
                group = []
        if group:
            groups.append(_node(level, group, chunks))
        if len(groups) == len(hashes):  # no child ended a node: take them all in one
            groups = [_node(level, hashes, chunks)]
        hashes = groups
    return InputTree(hashes[0], chunks)


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
    """

    def __init__(self, budget: int = 64 * 1024 * 1024) -> None:
        self._chunks: dict[bytes, Chunk] = {}
        self._size = 0
        self._budget = budget

    def get(self, key: bytes) -> Chunk | None:
        return self._chunks.get(key)

    def put(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            if chunk.hash not in self._chunks:
                self._chunks[chunk.hash] = chunk
                self._size += len(chunk.data) + 100
        if self._size > self._budget:
            self._chunks = {}
            self._size = 0


def batches(items: Iterable[bytes], size: int = 500) -> list[list[bytes]]:
    """``items`` in lists of at most ``size`` (statements take a bounded number of values)."""
    listed = list(items)
    return [listed[i : i + size] for i in range(0, len(listed), size)]
