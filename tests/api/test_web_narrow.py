"""The web timeline on a phone's screen (390 x 844) in headless Chromium: the thread's panes
stack in one column and nothing lies off screen, on the threads list and in a thread."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api.test_web import (
    assert_point,
    browser,  # noqa: F401  (a fixture)
    click_event,
    conversation,
    recorder,  # noqa: F401  (a fixture)
    screenshot,
)

with contextlib.suppress(ImportError):  # (the fixtures skip where it is not installed)
    from playwright.async_api import Browser, Page, expect

PHONE = {"width": 390, "height": 844}

OFF_SCREEN = """() => {
  const width = document.documentElement.clientWidth;
  const outside = (r) => r.left < -1 || r.right > width + 1;
  const off = [];
  // (The skip link waits off screen until it is focused, as skip links do.)
  for (const el of document.querySelectorAll("body *:not(.skip)")) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || !outside(r)) continue;
    // Clipped by a box of its own (an ellipsis, a scroller) that is itself on screen: fine.
    let clipped = false;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== "visible" && !outside(a.getBoundingClientRect())) {
        clipped = true;
        break;
      }
    }
    if (!clipped) off.push(`${el.tagName.toLowerCase()}.${el.className}`);
  }
  const sideways = [...document.querySelectorAll("main, .pane, .messages, .state-pane")]
    .filter((el) => el.scrollWidth > el.clientWidth + 1)
    .map((el) => el.className);
  return { width, page: document.documentElement.scrollWidth, off, sideways };
}"""

BOXES = """() => Object.fromEntries(
  [".left-pane", ".timeline-pane", ".main-pane"].map((s) => {
    const r = document.querySelector(s).getBoundingClientRect();
    return [s, { top: r.top, bottom: r.bottom, left: r.left, width: r.width }];
  }))"""


@pytest.fixture
async def phone(browser: Browser) -> AsyncIterator[Page]:  # noqa: F811
    context = await browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    context.set_default_timeout(30_000)
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        await context.close()
    assert errors == [], errors


async def nothing_off_screen(page: Page) -> None:
    found: dict[str, Any] = await page.evaluate(OFF_SCREEN)
    assert found["width"] == PHONE["width"]
    assert found["page"] <= found["width"], found
    assert found["off"] == [] and found["sideways"] == [], found


async def test_a_phone_gets_one_column_with_nothing_off_screen(
    phone: Page,
    recorder: tuple[str, httpx.AsyncClient],  # noqa: F811
) -> None:
    rec, client = recorder
    long_thread = "a-thread-id-long-enough-to-break-any-narrow-layout-" + "x" * 40
    runs = await conversation(client, "t1")
    await conversation(client, long_thread)

    await phone.goto(rec + "/")
    await expect(phone.locator("#threads .thread-row")).to_have_count(2)
    await nothing_off_screen(phone)
    await screenshot(phone, "phone-threads.png")

    await phone.click("#threads a:text('t1')")
    last = (await client.get(f"/runs/{runs[-1]}")).json()["eventCount"] - 1
    await assert_point(phone, client, runs[-1], last)
    boxes = await phone.evaluate(BOXES)
    left, timeline, point = boxes[".left-pane"], boxes[".timeline-pane"], boxes[".main-pane"]
    for box in (left, timeline, point):
        assert box["left"] == 0 and box["width"] == PHONE["width"], boxes
    assert left["bottom"] <= timeline["top"] + 1 and timeline["bottom"] <= point["top"] + 1, boxes
    await nothing_off_screen(phone)
    await screenshot(phone, "phone-thread.png")

    # The panes below the first screen are reached by scrolling the page, and still work.
    await phone.locator(f".run-node[data-run-id='{runs[0]}']").click()
    await phone.locator("#timeline").scroll_into_view_if_needed()
    await click_event(phone, 3)
    await assert_point(phone, client, runs[0], 3)
    await nothing_off_screen(phone)

    await phone.goto(f"{rec}/#/threads/{long_thread}/runs/{long_thread}-r2/events/16")
    await assert_point(phone, client, f"{long_thread}-r2", 16)
    await nothing_off_screen(phone)
    await screenshot(phone, "phone-interrupt.png")
