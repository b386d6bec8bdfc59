"""Search terms, for any text: a word of a document, asked for as it is written there, finds
that document on both databases; no query text is ever an error of the database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recorder.errors import InputError
from recorder.store import EventStore, NewRun, SearchDoc, SearchFilter, open_store, terms
from tests.conftest import create_pg_database, drop_pg_database, pg_available, require

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=80,
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    if request.param == "sqlite":
        opened = await open_store("sqlite+aiosqlite:///:memory:", migrate=True)
        url = None
    else:
        require(pg_available(), "PostgreSQL at 127.0.0.1:5432")
        url = await create_pg_database()
        opened = await open_store(url, migrate=True)
    try:
        await opened.create_run(NewRun("r", "t", "a"))
        yield opened
    finally:
        await opened.close()
        if url is not None:
            await drop_pg_database(url)


@given(text=TEXT, pick=st.integers(min_value=0))
@settings(max_examples=1200, deadline=None, suppress_health_check=list(HealthCheck))
async def test_any_word_finds_its_document(store: EventStore, text: str, pick: int) -> None:
    found = terms.tokens(text)
    doc = SearchDoc("t", "r", 0, 0, "message", text, 1.0, "a")
    await store.index_run("r", "t", [doc])
    if not found:
        return
    _word, start, end = found[pick % len(found)]
    written = text[start:end]
    page = await store.search(SearchFilter(text=written))
    assert [h.doc.text for h in page.items] == [text], (written, found)
    hit = page.items[0]
    assert hit.marks, "the match is marked in the snippet"


@given(query=TEXT, syntax=st.booleans())
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
async def test_no_query_is_a_database_error(store: EventStore, query: str, syntax: bool) -> None:
    try:
        await store.search(SearchFilter(text=query, syntax=syntax))
    except InputError:
        assert syntax or len(terms.words(query)) > terms.MAX_QUERY_WORDS


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(st.characters(max_codepoint=127), max_size=300)
    | st.lists(st.sampled_from(["Word", "x" * 120, "_", "a_b", "3.14", " ", "\n", "-"])).map(
        "".join
    )
)
def test_ascii_text_takes_a_short_way_to_the_same_words(text: str) -> None:
    assert terms.words(text) == [word for word, _start, _end in terms.tokens(text)]
