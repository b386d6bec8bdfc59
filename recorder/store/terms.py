"""Search terms: one tokenizer for what is indexed and what is asked, on both databases.

DESIGN. Neither database's own text parser is trusted with the words: SQLite's unicode61
treats a run of CJK characters as one word and drops emoji, PostgreSQL's parser depends on
the server's locale. So the words are made here, the same way for the index and the query:
Unicode compatibility forms folded (NFKD), combining marks dropped (``café`` is ``cafe``),
case folded; a word is a run of letters and digits; every CJK character and every symbol
(emoji) is a word of its own, a symbol spelled ``u<hex>`` so both databases keep it. A CJK
query is then a phrase of its characters, which finds it inside a longer run. The index
gets the words joined by spaces (SQLite FTS5, whose unicode61 tokenizer splits them back
as they are) or a ``tsvector`` literal with positions (PostgreSQL, cast without parsing).

A query is literal by default: its words must all occur, anything else in it (quotes,
``*``, ``-``, ``OR``, parentheses) is just a separator. With ``syntax``, a small language
common to both databases: ``"a phrase"``, ``OR`` between alternatives, ``-word`` to
exclude, ``prefix*``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from recorder.errors import InputError

MAX_TOKENS = 10_000  # per document (PostgreSQL keeps positions up to 16383)
MAX_TOKEN_CHARS = 100  # longer words are cut (a tsvector lexeme holds at most 2 KiB)
MAX_QUERY_WORDS = 32


def _is_cjk(code: int) -> bool:
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )


def _fold(char: str) -> str:
    """The character's letters as they are compared: no marks, folded case."""
    if char.isascii():
        return char.lower()
    decomposed = unicodedata.normalize("NFKD", char).casefold()
    return "".join(c for c in decomposed if c.isalnum() and not unicodedata.combining(c))


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
# A word (letters and digits, as str.isalnum has them, but no CJK), a CJK character, or any
# other character outside ASCII (a symbol, if its category says so).
_TOKEN = re.compile(f"((?:(?![{_CJK}])[^\\W_])+)|([{_CJK}])|([^\\x00-\\x7f])")


def tokens(text: str) -> list[tuple[str, int, int]]:
    """The words of ``text`` with where each stands in it: ``(word, start, end)``."""
    found: list[tuple[str, int, int]] = []
    for match in _TOKEN.finditer(text):
        word, cjk, other = match.groups()
        start, end = match.span()
        if word is not None:
            folded = word.lower() if word.isascii() else "".join(map(_fold, word))
            if folded:  # a word of marks only (folded away) is no word
                found.append((folded[:MAX_TOKEN_CHARS], start, end))
        elif cjk is not None:
            found.append((_fold(cjk) or cjk, start, end))
        elif unicodedata.category(other) == "So":
            found.append((f"u{ord(other):x}", start, end))
    return found


_ASCII_WORD = re.compile("[a-z0-9]+")


def words(text: str) -> list[str]:
    """The words of ``text``, as ``tokens`` has them. ASCII text (most of it) takes a
    short way to the same words: runs of letters and digits, lower-cased; no character of
    it is CJK or a symbol outside ASCII, and none folds to anything else."""
    if text.isascii():
        return [word[:MAX_TOKEN_CHARS] for word in _ASCII_WORD.findall(text.lower())]
    return [word for word, _start, _end in tokens(text)]


def fts5_document(text: str) -> str:
    """What SQLite's FTS5 table indexes for ``text``."""
    return " ".join(words(text)[:MAX_TOKENS])


def tsvector_document(text: str) -> str:
    """A ``tsvector`` literal for ``text``: each word with its positions (from 1)."""
    positions: dict[str, list[str]] = {}
    for number, word in enumerate(words(text)[:MAX_TOKENS], 1):
        positions.setdefault(word, []).append(str(number))
    return " ".join(f"{_quote(word)}:{','.join(at)}" for word, at in positions.items())


def _quote(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class Phrase:
    words: tuple[str, ...]
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Clause:
    """Every ``include`` phrase and none of the ``exclude`` ones."""

    include: tuple[Phrase, ...]
    exclude: tuple[Phrase, ...] = ()


@dataclass(frozen=True, slots=True)
class Query:
    """Any of the clauses (OR); empty: no text condition."""

    clauses: tuple[Clause, ...]

    @property
    def words(self) -> list[tuple[str, bool]]:
        """The words looked for (``(word, prefix)``), to mark in snippets."""
        marked: list[tuple[str, bool]] = []
        for clause in self.clauses:
            for phrase in clause.include:
                last = len(phrase.words) - 1
                marked += [(w, phrase.prefix and i == last) for i, w in enumerate(phrase.words)]
        return marked


def _phrases(text: str, prefix: bool = False) -> list[Phrase]:
    """Literal text as phrases: words with no space between them (``refund_order``,
    ``東京``, ``v1.2``) form a phrase, words apart are looked for apart."""
    found: list[list[str]] = []
    previous_end = -1
    for word, start, end in tokens(text):
        if found and not any(c.isspace() for c in text[previous_end:start]):
            found[-1].append(word)
        else:
            found.append([word])
        previous_end = end
    phrases = [Phrase(tuple(words)) for words in found]
    if prefix and phrases:
        phrases[-1] = Phrase(phrases[-1].words, prefix=True)
    return phrases


_SYNTAX = re.compile(r'(-?)"([^"]*)"?|(\S+)')


def parse(text: str, *, syntax: bool = False) -> Query:
    """The query ``text`` asks (literal words unless ``syntax``); raises ``InputError`` for
    a query with too many words or, with syntax, one that only excludes."""
    if not syntax:
        phrases = _phrases(text)
        query = Query((Clause(tuple(phrases)),) if phrases else ())
    else:
        query = _parse_syntax(text)
    if len(query.words) > MAX_QUERY_WORDS:
        raise InputError(f"a search may look for at most {MAX_QUERY_WORDS} words")
    return query


def _parse_syntax(text: str) -> Query:
    clauses: list[Clause] = []
    include: list[Phrase] = []
    exclude: list[Phrase] = []

    def close() -> None:
        if include:
            clauses.append(Clause(tuple(include), tuple(exclude)))
        elif exclude:
            raise InputError("a search that excludes words needs a word to look for")
        include.clear()
        exclude.clear()

    for match in _SYNTAX.finditer(text):
        negated, quoted, bare = match.group(1), match.group(2), match.group(3)
        if bare == "OR":
            close()
            continue
        if quoted is not None:
            found = _phrases(quoted)
            phrase = [Phrase(tuple(w for p in found for w in p.words))] if found else []
            (exclude if negated else include).extend(phrase)
            continue
        assert bare is not None
        excluded = bare.startswith("-") and len(bare) > 1
        body = bare[1:] if excluded else bare
        prefix = body.endswith("*")
        (exclude if excluded else include).extend(_phrases(body.rstrip("*"), prefix))
    close()
    return Query(tuple(clauses))


def fts5_match(query: Query) -> str:
    """The FTS5 MATCH expression for ``query`` (every word quoted: taken literally)."""
    return " OR ".join(f"({_fts5_clause(clause)})" for clause in query.clauses)


def _fts5_clause(clause: Clause) -> str:
    text = " AND ".join(_fts5_phrase(p) for p in clause.include)
    for phrase in clause.exclude:
        text = f"({text}) NOT {_fts5_phrase(phrase)}"
    return text


def _fts5_phrase(phrase: Phrase) -> str:
    quoted = '"' + " ".join(phrase.words).replace('"', '""') + '"'
    return f"{quoted} *" if phrase.prefix else quoted


def tsquery(query: Query) -> str:
    """A ``tsquery`` literal for ``query``."""
    return " | ".join(f"({_ts_clause(clause)})" for clause in query.clauses)


def _ts_clause(clause: Clause) -> str:
    parts = [_ts_phrase(p) for p in clause.include]
    parts += [f"!({_ts_phrase(p)})" for p in clause.exclude]
    return " & ".join(parts)


def _ts_phrase(phrase: Phrase) -> str:
    last = len(phrase.words) - 1
    quoted = [
        _quote(word) + (":*" if phrase.prefix and i == last else "")
        for i, word in enumerate(phrase.words)
    ]
    return "(" + " <-> ".join(quoted) + ")"


SNIPPET_CHARS = 160


def snippet(text: str, query: Query) -> tuple[str, list[tuple[int, int]]]:
    """A piece of ``text`` around its first match, and where in that piece the words
    looked for stand (``(start, end)`` offsets)."""
    wanted = query.words
    exact = {word for word, prefix in wanted if not prefix}
    prefixes = [word for word, prefix in wanted if prefix]
    hits = [
        (start, end)
        for word, start, end in tokens(text)
        if word in exact or any(word.startswith(p) for p in prefixes)
    ]
    begin = max(0, hits[0][0] - SNIPPET_CHARS // 3) if hits else 0
    if len(text) <= SNIPPET_CHARS:
        begin = 0
    finish = min(len(text), begin + SNIPPET_CHARS)
    piece = text[begin:finish]
    marks = [(s - begin, e - begin) for s, e in hits if s >= begin and e <= finish]
    if begin > 0:
        piece = "…" + piece
        marks = [(s + 1, e + 1) for s, e in marks]
    if finish < len(text):
        piece += "…"
    return piece, marks
