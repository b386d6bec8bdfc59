"""The search page, the jump to a hit, tag editing and the diff view, in headless Chromium
against a real recorder."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.api.test_web import (  # the browser fixtures and the demo conversation
    browser,
    conversation,
    page,
    recorder,
    screenshot,
    turn,
)
from tests.servers import eventually

try:
    from playwright.async_api import Page, expect
except ImportError:  # pragma: no cover - only where the dev extra is not installed
    Page = Any  # type: ignore[assignment,misc]

__all__ = ["browser", "page", "recorder"]


async def indexed(client: httpx.AsyncClient, runs: int) -> None:
    async def done() -> bool:
        hits = (await client.get("/search", params={"limit": 100})).json()["hits"]
        return len({h["runId"] for h in hits}) >= runs

    await eventually(done, "the runs indexed", timeout=30)


async def test_search_page_jumps_to_the_hit_with_the_match_marked(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    r1, r2, _r3 = await conversation(client, "t1")
    await conversation(client, "t2")
    await indexed(client, 6)
    found = (await client.get("/search", params={"q": "report.txt", "threadId": "t1"})).json()
    expected = next(h for h in found["hits"] if h["kind"] == "input")

    await page.goto(rec + "/")
    await page.click("#search-link")
    await expect(page).to_have_url(f"{rec}/#/search")
    await page.fill("#search-q", "report.txt")
    hits = page.locator("#hits .hit")
    await expect(hits.first).to_be_visible()
    await expect(page.locator("#hits .hit mark").first).to_have_text("report")
    await page.select_option("#search-kind", "input")
    await expect(hits).to_have_count(2)  # t1's and t2's posted "delete report.txt please"
    await screenshot(page, "search.png")

    hit = page.locator(f"#hits .hit[data-thread-id='t1'][data-run-id='{r2}']")
    await hit.locator("a.snippet").click()
    await expect(page).to_have_url(f"{rec}/#/threads/t1/runs/{r2}/events/-1?hl=report%0Atxt")
    point = page.locator("#point")
    await expect(point).to_have_attribute("data-shown-seq", "-1")
    await expect(point).to_have_attribute("data-shown-run", expected["runId"])
    marks = page.locator("#conversation mark.hit-mark")
    await expect(marks.first).to_have_text("report")
    await expect(page.locator("#slider")).to_have_value("-1")  # the scrubber at the hit

    # A message hit: the scrubber stops at the event that completed the message.
    words = (await client.get("/search", params={"kind": "message", "runId": r1})).json()
    message = words["hits"][0]
    await page.goto(f"{rec}/#/search?q={message['snippet'].split()[0]}&kind=message")
    target = page.locator(f"#hits .hit[data-run-id='{r1}'] a.snippet").first
    await target.click()
    await expect(point).to_have_attribute("data-shown-run", r1)
    await expect(point).to_have_attribute("data-shown-seq", str(message["seqTo"]))
    await expect(page.locator("#slider")).to_have_value(str(message["seqTo"]))
    await expect(page.locator("#conversation mark.hit-mark").first).to_be_visible()


async def test_tag_editing_and_the_diff_view(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    r1, _r2, r3 = await conversation(client, "t1")
    await page.goto(f"{rec}/#/threads/t1/runs/{r1}")
    await expect(page.locator("#annotations")).to_be_visible()
    await page.fill("#tag-key", "verdict")
    await page.fill("#tag-value", "good")
    await page.click("#tag-form button")
    await expect(page.locator("#tags .tag")).to_have_text(["verdict=good\u00d7"])
    saved = (await client.get("/threads/t1/annotations")).json()
    assert saved["tags"] == {"verdict": "good"}  # drawn from the answer: saved already
    # On the run instead, with a note and a score.
    await page.select_option("#annotate-target", "run")
    await expect(page.locator("#tags .tag")).to_have_count(0)
    await page.fill("#tag-key", "reviewed")
    await page.fill("#tag-value", "yes")
    await page.click("#tag-form button")
    await expect(page.locator("#tags .tag")).to_have_text(["reviewed=yes\u00d7"])
    await page.fill("#note-text", "the weather answer is right")
    await page.click("#note-form button")
    await expect(page.locator("#notes .note")).to_have_count(1)
    await page.fill("#score-value", "0.5")
    await page.click("#score-form button")
    await expect(page.locator("#notes .note")).to_have_count(1)

    async def saved_on_run() -> bool:
        run = (await client.get("/threads/t1/annotations")).json()["runs"].get(r1, {})
        return (
            run.get("tags") == {"reviewed": "yes"}
            and (run.get("score") or {}).get("value") == 0.5
            and [n["text"] for n in run.get("notes", [])] == ["the weather answer is right"]
        )

    await eventually(saved_on_run, "the run's tag, note and score saved")
    await page.locator("#tags .tag[data-key='reviewed'] button").click()
    await expect(page.locator("#tags .tag")).to_have_count(0)
    assert (await client.get("/threads/t1/annotations")).json()["runs"].get(r1, {}).get(
        "tags", {}
    ) == {}
    # The thread list filters by tag.
    await conversation(client, "t2")
    await page.goto(f"{rec}/#/threads")
    await expect(page.locator("#threads .thread-row")).to_have_count(2)
    await page.fill("#filter-tag", "verdict:good")
    await page.press("#filter-tag", "Enter")
    await expect(page.locator("#threads .thread-row")).to_have_count(1)
    await expect(page.locator("#threads .thread-row")).to_have_attribute("data-thread-id", "t1")

    # Diff: from the start of r1 to the end of r3, as the API answers it.
    await page.goto(f"{rec}/#/threads/t1/runs/{r1}/events/-1")
    await expect(page.locator("#point")).to_have_attribute("data-shown-seq", "-1")
    await page.select_option("#compare-run", r3)
    await page.click("#compare-form button")
    diff = (await client.get(f"/runs/{r1}/diff", params={"from": -1, "toRun": r3})).json()
    patch = page.locator("#compare-patch li")
    await expect(patch).to_have_count(max(1, len(diff["patch"])))
    added = page.locator("#compare-messages li.diff-add")
    await expect(added).to_have_count(len(diff["messages"]["added"]))
    await screenshot(page, "annotations-diff.png")


async def test_what_is_typed_before_the_annotations_arrive_is_kept(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    r1, _r2, _r3 = await conversation(client, "t1")
    arrived = asyncio.Event()
    held: list[Any] = []

    async def hold(route: Any) -> None:  # the annotations answer, held until typed
        held.append(route)
        await arrived.wait()
        await route.continue_()

    await page.route("**/annotations", hold)
    await page.goto(f"{rec}/#/threads/t1/runs/{r1}")
    await expect(page.locator("#tag-key")).to_be_visible()
    await eventually(lambda: _true(bool(held)), "the annotations asked for", timeout=30)
    await page.fill("#tag-key", "verdict")
    await page.fill("#tag-value", "good")
    arrived.set()
    await page.wait_for_load_state("networkidle")
    await expect(page.locator("#tag-key")).to_have_value("verdict")
    await page.click("#tag-form button")
    await expect(page.locator("#tags .tag")).to_have_text(["verdict=good\u00d7"])


async def _true(value: bool) -> bool:
    return value


async def test_marks_count_code_points_past_characters_outside_the_bmp(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    # The API's highlight offsets count code points; in JavaScript an emoji or a script X
    # (U+1D4B3) is two UTF-16 units, so the page converts the offsets to mark the right text.
    rec, client = recorder
    text = "😀😀😀😀 find banana here \U0001d4b3\U0001d4b3 and banana"
    await turn(client, "t-emoji", "t-emoji-r1", text, follow=False)
    await indexed(client, 1)
    found = await client.get("/search", params={"q": "banana", "kind": "input"})
    (hit,) = found.json()["hits"]
    assert hit["snippet"] == text
    assert hit["highlights"] == [[10, 16], [29, 35]]  # code points, as Python slices them
    assert [text[s:e] for s, e in hit["highlights"]] == ["banana", "banana"]

    await page.goto(f"{rec}/#/search?q=banana&kind=input")
    shown = page.locator("#hits .hit[data-thread-id='t-emoji']")
    await expect(shown).to_have_count(1)
    await expect(shown.locator("a.snippet")).to_have_text(text)
    await expect(shown.locator("a.snippet mark")).to_have_text(["banana", "banana"])
    await expect(shown.locator("a.hit-link")).to_have_attribute(
        "href", f"#/threads/t-emoji/runs/{hit['runId']}/events/-1?hl=banana"
    )

    await shown.locator("a.snippet").click()
    await expect(page).to_have_url(
        f"{rec}/#/threads/t-emoji/runs/{hit['runId']}/events/-1?hl=banana"
    )
    await expect(page.locator("#point")).to_have_attribute("data-shown-seq", "-1")
    marks = page.locator("#conversation mark.hit-mark")
    await expect(marks.first).to_have_text("banana")
    assert set(await marks.all_text_contents()) == {"banana"}
