"""The web timeline in a real browser: headless Chromium driven by Playwright, against a real
recorder (uvicorn on a loopback port) with runs recorded from the demo agent.

What the page shows is compared with the API's own projection at the same point
(GET /runs/{id}/state?seq=). Screenshots of the main views go to test-artifacts/.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, require
from tests.servers import demo_upstream, recorder_at, run_recorded

try:
    from playwright.async_api import Browser, Page, async_playwright, expect
except ImportError:  # pragma: no cover - only where the dev extra is not installed
    async_playwright = None  # type: ignore[assignment]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"
TOKEN = "s3cret-token"

# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    require(
        async_playwright is not None and Path(CHROMIUM).is_file(),
        "Chromium (/usr/bin/chromium) and the playwright package",
    )
    # Generous: the suite runs the browser beside other tests on 2 cores.
    expect.set_options(timeout=30_000)
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        await context.close()
    assert errors == [], errors


@pytest.fixture
async def recorder(sqlite_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with demo_upstream() as upstream:
        agents = {"demo": upstream, "same": {"url": upstream, "fork": "same-thread"}}
        async with (
            recorder_at(sqlite_url, agents) as rec,
            httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client,
        ):
            yield rec, client


# -- driving the demo agent ----------------------------------------------------------------


async def post_run(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = []
    async with client.stream("POST", "/agents/demo", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
    return events


async def turn(
    client: httpx.AsyncClient, thread: str, run: str, text: str | None, **extra: Any
) -> list[dict[str, Any]]:
    """One run as a frontend posts it: the thread's current messages and state, plus a message."""
    now = (await client.get(f"/threads/{thread}/state")).json() if extra.pop("follow", True) else {}
    messages = list(now.get("messages", []))
    if text is not None:
        messages.append({"id": f"{run}-u", "role": "user", "content": text})
    body = {"threadId": thread, "runId": run, "messages": messages, "state": now.get("state", {})}
    return await post_run(client, {**body, **extra})


async def conversation(client: httpx.AsyncClient, thread: str) -> list[str]:
    """A chat turn, a request that ends in an interrupt, and its resume."""
    await turn(client, thread, f"{thread}-r1", "What's the weather?", follow=False)
    finished = await turn(client, thread, f"{thread}-r2", "delete report.txt please")
    interrupt = finished[-1]["outcome"]["interrupts"][0]
    resume = [{"interruptId": interrupt["id"], "status": "resolved"}]
    await turn(client, thread, f"{thread}-r3", None, resume=resume)
    return [f"{thread}-r1", f"{thread}-r2", f"{thread}-r3"]


# -- reading the page ----------------------------------------------------------------------

SHOWN = """() => {
  const text = (el) => (el ? el.textContent : null);
  const messages = [...document.querySelectorAll("#conversation [data-msg-id]")].map((el) => ({
    id: el.dataset.msgId,
    role: el.dataset.role,
    text: text(el.querySelector(":scope > .msg-text")),
    calls: [...el.querySelectorAll(":scope > .tool-call")].map((c) => ({
      id: c.dataset.toolCallId,
      name: text(c.querySelector(".tool-name")),
      args: text(c.querySelector(".tool-args")),
    })),
  }));
  const interrupts = [...document.querySelectorAll("#conversation [data-interrupt-id]")]
    .map((el) => el.dataset.interruptId);
  const diff = [...document.querySelectorAll("#state-diff li .mono")].map((el) => el.textContent);
  return { messages, interrupts, diff, state: text(document.querySelector("#state-json")) };
}"""


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def as_shown(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's messages in the shape the page is read back in."""
    out = []
    for m in messages:
        content = m.get("content")
        if m["role"] == "activity":
            text: Any = content
        elif isinstance(content, str) and (content or m["role"] != "assistant"):
            text = content
        else:
            text = None
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "args": c["function"]["arguments"]}
            for c in m.get("toolCalls") or []
        ]
        out.append({"id": m["id"], "role": m["role"], "text": text, "calls": calls})
    return out


def normalized(shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in shown:
        text = m["text"]
        if m["role"] == "activity" and text is not None:
            text = json.loads(text)
        calls = [{**c, "args": _json_or_text(c["args"])} for c in m["calls"]]
        out.append({**m, "text": text, "calls": calls})
    return out


def expected(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**m, "calls": [{**c, "args": _json_or_text(c["args"])} for c in m["calls"]]}
        for m in as_shown(messages)
    ]


def state_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """JSON Pointer paths that differ (added, removed or replaced), as the page lists them."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        keys = list(before) + [k for k in after if k not in before]
        return [
            p
            for k in keys
            for p in state_paths(before.get(k, _GONE), after.get(k, _GONE), f"{path}/{k}")
        ]
    if isinstance(before, list) and isinstance(after, list):
        n = max(len(before), len(after))
        pad = [_GONE] * n
        return [
            p
            for i in range(n)
            for p in state_paths((before + pad)[i], (after + pad)[i], f"{path}/{i}")
        ]
    return [path or "(whole state)"]


_GONE = object()


async def wait_for_point(page: Page, run_id: str, seq: int) -> None:
    point = page.locator(f'#point[data-shown-run="{run_id}"][data-shown-seq="{seq}"]')
    await expect(point).to_have_count(1)
    await expect(page.locator("#point[data-loading]")).to_have_count(0)


async def assert_point(page: Page, client: httpx.AsyncClient, run_id: str, seq: int) -> None:
    """The conversation, state, interrupts and state diff shown equal the API's at the point."""
    await wait_for_point(page, run_id, seq)
    if not await page.locator("#state-json").count():
        await page.click("#state-json-toggle")  # the state as raw JSON text, to compare
    api = (await client.get(f"/runs/{run_id}/state", params={"seq": seq})).json()
    shown = await page.evaluate(SHOWN)
    assert normalized(shown["messages"]) == expected(api["messages"]), seq
    assert json.loads(shown["state"]) == api["state"], seq
    assert shown["interrupts"] == [i["id"] for i in api["pendingInterrupts"]], seq
    if seq >= 0:
        before = (await client.get(f"/runs/{run_id}/state", params={"seq": seq - 1})).json()
        assert shown["diff"] == state_paths(before["state"], api["state"]), seq


async def click_event(page: Page, seq: int) -> None:
    """Scroll the virtualized timeline to an event's row and click it."""
    await page.eval_on_selector("#timeline", "(el, seq) => { el.scrollTop = (seq - 3) * 28 }", seq)
    await page.locator(f"#ev-{seq}").click()


async def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / name))


# -- tests ---------------------------------------------------------------------------------


async def test_the_page_is_served_without_a_token(sqlite_url: str) -> None:
    async with (
        demo_upstream() as upstream,
        recorder_at(sqlite_url, {"demo": upstream}, api_token=TOKEN) as rec,
    ):
        async with httpx.AsyncClient(base_url=rec, trust_env=False) as client:
            page = await client.get("/")
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert "web/app.js" in page.text
            script = await client.get("/web/app.js")
            assert script.status_code == 200
            assert script.headers["content-type"].startswith("text/javascript")
            for name in ("style.css", "api.js", "thread.js", "timeline.js", "icon.svg"):
                assert (await client.get(f"/web/{name}")).status_code == 200, name
            for missing in ("/web/nope.js", "/web/..%2Fapi%2Fweb.py", "/web/.hidden.js"):
                assert (await client.get(missing)).status_code == 404, missing
            assert (await client.get("/threads")).status_code == 401


async def test_threads_list_searches_filters_and_pages(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    await turn(client, "t-weather", "t-weather-r1", "What's the weather in Rome?", follow=False)
    await turn(client, "t-delete", "t-delete-r1", "please delete report.txt", follow=False)

    await page.goto(rec + "/")
    rows = page.locator("#threads .thread-row")
    await expect(rows).to_have_count(2)
    first = rows.filter(has_text="t-delete")
    await expect(first.locator(".summary")).to_contain_text("Deleting needs your confirmation.")
    await expect(first.locator(".cell-runs")).to_have_text("1")
    await expect(first.locator(".status")).to_have_text("interrupted")
    await screenshot(page, "threads.png")

    await page.fill("#filter-q", "Rome")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("t-weather")
    await expect(page).to_have_url(f"{rec}/#/threads?q=Rome")

    await page.click("text=Clear")
    await expect(rows).to_have_count(2)
    await page.select_option("#filter-status", "interrupted")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("t-delete")

    await page.goto(rec + "/#/threads?since=2999-01-01T00:00:00.000Z")
    await expect(page.locator("#threads")).to_contain_text("No threads match")

    await page.goto(rec + "/#/threads?limit=1")
    await expect(rows).to_have_count(1)
    page_one = await rows.first.get_attribute("data-thread-id")
    await page.click("#next-page")
    await expect(rows).to_have_count(1)
    await expect(rows.first).not_to_have_attribute("data-thread-id", page_one or "")
    await expect(page.locator("#next-page")).to_be_disabled()
    await page.click("#prev-page")
    await expect(rows.first).to_have_attribute("data-thread-id", page_one or "")


async def test_scrubbing_shows_the_projection_at_each_point(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    r1, r2, r3 = await conversation(client, "t1")
    count = (await client.get(f"/runs/{r1}")).json()["eventCount"]
    last_of_r3 = (await client.get(f"/runs/{r3}")).json()["eventCount"] - 1

    await page.goto(rec + "/")
    await page.click("#threads a:text('t1')")
    # the thread opens on its latest run, at its end
    await expect(page).to_have_url(f"{rec}/#/threads/t1/runs/{r3}")
    await expect(page.locator(".json-tree")).to_contain_text("turns")  # a tree at first
    await assert_point(page, client, r3, last_of_r3)
    await expect(page.locator(".run-node")).to_have_count(3)
    await expect(page.locator(".lineage-inferred")).to_have_count(2)

    await page.click(f".run-node[data-run-id='{r1}']")
    await expect(page).to_have_url(f"{rec}/#/threads/t1/runs/{r1}")
    await assert_point(page, client, r1, count - 1)
    await expect(page.locator("#run-status")).to_have_text("finished")

    timeline = page.locator("#timeline")
    await timeline.focus()
    await page.keyboard.press("Home")
    await assert_point(page, client, r1, -1)
    for _ in range(4):
        await page.keyboard.press("ArrowDown")
    await assert_point(page, client, r1, 3)
    await expect(page).to_have_url(f"{rec}/#/threads/t1/runs/{r1}/events/3")

    # dragging the slider: intermediate values are debounced, the last one is shown
    for value in (5, 9, 12, 16):
        await page.locator("#slider").fill(str(value))
    await assert_point(page, client, r1, 16)
    assistant = page.locator(f"#conversation [data-msg-id='{r1}-a1']")
    await expect(assistant).to_have_class("msg msg-assistant is-changed")
    await screenshot(page, "thread-scrub.png")

    await click_event(page, 24)
    await assert_point(page, client, r1, 24)
    await click_event(page, count - 2)  # the STATE_DELTA: turns replaced, todo added
    await assert_point(page, client, r1, count - 2)
    await expect(page.locator("#state-diff")).to_contain_text("/todo/0")

    await page.goto(f"{rec}/#/threads/t1/runs/{r2}/events/16")
    await assert_point(page, client, r2, 16)  # ends waiting for a confirmation
    await expect(page.locator("#conversation .interrupt")).to_contain_text("Delete report.txt?")
    await screenshot(page, "thread-interrupt.png")


async def test_fork_into_a_new_thread_with_lineage_both_ways(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    r1, _r2, _r3 = await conversation(client, "t2")

    await page.goto(f"{rec}/#/threads/t2/runs/{r1}/events/16")
    await wait_for_point(page, r1, 16)
    # The agent's strategy is said beside the buttons: the demo agent has the default.
    await expect(page.locator("#agent-strategy")).to_have_text("new-thread")
    await expect(page.locator("#fork-strategy")).to_contain_text('"Fork here" forks into a new')
    await page.fill("#fork-text", "Actually, what about Rome?")
    await page.click("text=Preview input")  # the dry run: the input the fork would post
    preview = page.locator("dialog.preview")
    await expect(preview.locator("#preview-where")).to_contain_text("new-thread: thread thread-")
    await expect(preview).to_contain_text("Actually, what about Rome?")
    await expect(preview).not_to_contain_text('"parentRunId"')
    await page.keyboard.press("Escape")
    await expect(preview).to_be_hidden()
    await page.click("#fork-button")

    # The page moves to the new thread, which says where it came from and how it got there.
    await expect(page.locator("#forked-from")).to_contain_text(f"forked from t2 · {r1} at #16")
    await expect(page.locator("#fork-notice")).to_contain_text("Forked into a new thread")
    selected = page.locator(".run-node[aria-current='page']")
    fork_id = await selected.get_attribute("data-run-id")
    forked = (await client.get(f"/runs/{fork_id}")).json()
    assert (forked["parentRunId"], forked["parentSeq"]) == (r1, 16)
    assert forked["threadId"] not in ("t2", None)
    await expect(page).to_have_url(f"{rec}/#/threads/{forked['threadId']}/runs/{fork_id}")
    await expect(page.locator("#run-status")).to_have_text("finished")
    await assert_point(page, client, fork_id or "", forked["eventCount"] - 1)
    user = page.locator("#conversation [data-role='user']").last
    await expect(user).to_contain_text("Actually, what about Rome?")
    await screenshot(page, "fork.png")

    # Back to the origin through the link; there the run lists the thread forked from it.
    await page.click("#forked-from a")
    await expect(page).to_have_url(f"{rec}/#/threads/t2/runs/{r1}/events/16")
    await wait_for_point(page, r1, 16)
    link = page.locator(f".thread-fork[data-thread-id='{forked['threadId']}']")
    await expect(link).to_contain_text("at #16")
    await expect(page.locator(".run-node")).to_have_count(3)  # the original thread is unchanged
    await expect(page.locator("#ev-16 .tl-fork")).to_have_count(1)
    await screenshot(page, "fork-origin.png")
    await link.click()
    await expect(page.locator("#forked-from")).to_contain_text("forked from t2")
    # The threads list says so too.
    await page.goto(rec + "/#/threads")
    row = page.locator(f"#threads .thread-row[data-thread-id='{forked['threadId']}']")
    await expect(row.locator(".forked-tag")).to_have_text(" · forked from t2")


async def test_fork_here_follows_the_agents_strategy(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    body = {"threadId": "s1", "runId": "s1-r1", "messages": [{"id": "u", "role": "user",
            "content": "What's the weather?"}]}  # fmt: skip
    async with client.stream("POST", "/agents/same", json=body) as response:
        assert response.status_code == 200
        await response.aread()

    await page.goto(f"{rec}/#/threads/s1/runs/s1-r1")
    await wait_for_point(page, "s1-r1", 35)
    await expect(page.locator("#agent-strategy")).to_have_text("same-thread")
    await page.fill("#fork-text", "And in Rome?")
    await page.click("#fork-button")
    nodes = page.locator(".run-node")
    await expect(nodes).to_have_count(2)
    await expect(page.locator("#fork-notice")).to_contain_text(
        "Forked on this thread (same-thread)"
    )
    await expect(page.locator("#run-status")).to_have_text("finished")
    here = await page.locator(".run-node[aria-current='page']").get_attribute("data-run-id")
    assert (await client.get(f"/runs/{here}")).json()["input"]["parentRunId"] == "s1-r1"

    # "Fork into a new thread" starts one, whatever the agent's strategy.
    await page.goto(f"{rec}/#/threads/s1/runs/s1-r1")
    await wait_for_point(page, "s1-r1", 35)
    await page.click("#fork-new-thread")
    await expect(page.locator("#forked-from")).to_contain_text("forked from s1 · s1-r1 at #35")
    await expect(page.locator("#fork-notice")).to_contain_text("(new-thread)")
    await expect(page.locator("#run-status")).to_have_text("finished")


async def test_edit_a_message_and_regenerate_an_answer(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    r1, r2, _r3 = await conversation(client, "t3")

    # Edit run 2's question: its turn runs again with the new text, in a new thread.
    await page.goto(f"{rec}/#/threads/t3/runs/{r2}")
    await wait_for_point(page, r2, 16)
    await page.locator(f"#conversation [data-msg-id='{r2}-u'] .edit-msg").click()
    await expect(page.locator(".composer-where")).to_contain_text("Editing message")
    await expect(page.locator("#fork-text")).to_have_value("delete report.txt please")
    await page.fill("#fork-text", "What about tomorrow?")
    await page.click("text=Preview input")
    preview = page.locator("dialog.preview")
    await expect(preview.locator("#preview-where")).to_contain_text("at its start")
    await page.keyboard.press("Escape")
    await page.click("#fork-button")
    await expect(page.locator("#forked-from")).to_contain_text(
        f"forked from t3 · {r2} at its start"
    )
    await expect(page.locator("#run-status")).to_have_text("finished")
    edited_id = await page.locator(".run-node[aria-current='page']").get_attribute("data-run-id")
    edited = (await client.get(f"/runs/{edited_id}")).json()
    assert (edited["parentRunId"], edited["parentSeq"]) == (r2, -1)
    texts = [m.get("content") for m in edited["input"]["messages"] if m["role"] == "user"]
    assert texts == ["What's the weather?", "What about tomorrow?"]

    # Regenerate run 1's answer: the same input again.
    await page.goto(f"{rec}/#/threads/t3/runs/{r1}")
    await wait_for_point(page, r1, 35)
    await page.locator(f"#conversation [data-msg-id='{r1}-a2'] .regenerate-msg").click()
    await expect(page.locator("#forked-from")).to_contain_text(
        f"forked from t3 · {r1} at its start"
    )
    await expect(page.locator("#run-status")).to_have_text("finished")
    again_id = await page.locator(".run-node[aria-current='page']").get_attribute("data-run-id")
    again = (await client.get(f"/runs/{again_id}")).json()
    first = (await client.get(f"/runs/{r1}")).json()
    assert again["input"]["messages"] == first["input"]["messages"]
    assert (again["parentRunId"], again["parentSeq"]) == (r1, -1)


async def test_a_live_run_grows_on_screen(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    await conversation(client, "t3")
    live = "t3-live"
    slow = {"demo": {"delay": 0.05, "extra": 40}}
    task = asyncio.create_task(
        turn(client, "t3", live, "Tell me a long story", forwardedProps=slow)
    )
    try:
        await run_recorded(client, "", live)
        await page.goto(f"{rec}/#/threads/t3/runs/{live}")
        await page.evaluate("window.sameDocument = true")
        await expect(page.locator("#run-status")).to_have_text("running")
        await expect(page.locator(".live-tag")).to_have_count(1)
        first = int(await page.locator("#run-events").inner_text())
        await expect(page.locator("#run-events")).not_to_have_text(str(first))
        await expect(page.locator(f"#conversation [data-msg-id='{live}-a1']")).to_contain_text(
            "token"
        )
        await screenshot(page, "live.png")
        await task
    finally:
        if not task.done():
            task.cancel()
    final = (await client.get(f"/runs/{live}")).json()
    await expect(page.locator("#run-status")).to_have_text("finished")
    await expect(page.locator("#run-events")).to_have_text(str(final["eventCount"]))
    await expect(page.locator(f".run-node[data-run-id='{live}'] .dot-finished")).to_have_count(1)
    await assert_point(page, client, live, final["eventCount"] - 1)
    assert await page.evaluate("window.sameDocument") is True  # no reload on the way
    assert live in page.url and "/events/" not in page.url  # still following the end


async def test_a_large_run_is_virtualized_and_paged(
    page: Page, recorder: tuple[str, httpx.AsyncClient]
) -> None:
    rec, client = recorder
    big = {"demo": {"extra": 10_000}}
    await turn(client, "t4", "t4-big", "Count to ten thousand", follow=False, forwardedProps=big)
    count = (await client.get("/runs/t4-big")).json()["eventCount"]
    assert count > 10_000
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/events" in r.url else None)

    await page.goto(f"{rec}/#/threads/t4/runs/t4-big/events/5000")
    await wait_for_point(page, "t4-big", 5000)
    await expect(page.locator("#ev-5000")).to_have_attribute("aria-selected", "true")
    assert await page.locator(".tl-row").count() < 120  # only the rows in view exist
    await page.locator("#timeline").focus()
    await page.keyboard.press("End")
    await wait_for_point(page, "t4-big", count - 1)
    await expect(page.locator(f"#ev-{count - 1}")).to_contain_text("RUN_FINISHED")
    await page.keyboard.press("PageUp")
    await page.keyboard.press("ArrowUp")
    assert await page.locator(".tl-row").count() < 120
    assert len(requests) <= 6, requests  # pages of events near what is shown, not all 10,000


async def test_errors_are_shown_as_messages(page: Page, sqlite_url: str) -> None:
    async with AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(demo_upstream())
        rec = await stack.enter_async_context(recorder_at(sqlite_url, {"demo": upstream}))
        await page.goto(f"{rec}/#/threads/no-such-thread")
        alert = page.locator("[role=alert]")
        await expect(alert).to_contain_text("Not found")
        await expect(alert).to_contain_text('There is no thread "no-such-thread"')
        await screenshot(page, "error-not-found.png")
        await page.goto(f"{rec}/#/threads/x/runs/y/events/zz")
        await expect(alert).to_contain_text("No such page")
        async with httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as client:
            await turn(client, "t6", "t6-r1", "Hello", follow=False)
        await page.goto(f"{rec}/#/threads/t6/runs/no-such-run")
        await expect(alert).to_contain_text('There is no run "no-such-run"')
        await expect(page.locator(".run-node")).to_have_count(1)  # the thread is still there
    # the recorder is gone now: the page says so instead of going blank
    await page.evaluate("location.hash = '#/threads'")
    await expect(page.locator("[role=alert]")).to_contain_text("cannot be reached")
    await expect(page.locator("[role=alert] button")).to_have_text("Try again")


async def test_with_an_api_token_the_page_asks_for_it(page: Page, sqlite_url: str) -> None:
    async with (
        demo_upstream() as upstream,
        recorder_at(sqlite_url, {"demo": upstream}, api_token=TOKEN) as rec,
    ):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            base_url=rec, timeout=60, trust_env=False, headers=auth
        ) as client:
            await turn(client, "t5", "t5-r1", "What's the weather?", follow=False)
            await page.goto(rec + "/")
            form = page.locator("#token-form")
            await expect(form).to_contain_text("needs an API token")
            await screenshot(page, "token.png")
            await page.fill("#token-input", "wrong")
            await page.click("#token-form button[type=submit]")
            await expect(form).to_contain_text("not accepted")
            await page.fill("#token-input", TOKEN)
            await page.click("#token-form button[type=submit]")
            await expect(page.locator("#threads .thread-row")).to_have_count(1)
            stored = await page.evaluate("sessionStorage.getItem('agui-recorder.token')")
            assert stored == TOKEN

            # a live run, followed by fetch streaming (EventSource cannot send the token)
            slow = {"demo": {"delay": 0.03, "extra": 20}}
            task = asyncio.create_task(turn(client, "t5", "t5-r2", "again", forwardedProps=slow))
            await run_recorded(client, "", "t5-r2")
            await page.goto(f"{rec}/#/threads/t5/runs/t5-r2")
            await expect(page.locator("#run-status")).to_have_text("running")
            await task
            final = (await client.get("/runs/t5-r2")).json()
            await expect(page.locator("#run-status")).to_have_text("finished")
            await expect(page.locator("#run-events")).to_have_text(str(final["eventCount"]))
            await assert_point(page, client, "t5-r2", final["eventCount"] - 1)
