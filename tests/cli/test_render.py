"""The CLI's tables line up in a terminal, whatever script their cells are in."""

from __future__ import annotations

from recorder.cli.render import shown_width, table


def test_columns_line_up_by_the_columns_a_terminal_gives_each_character() -> None:
    rows = [("中文线程", 1), ("abc", 22), ("😀x", 3), ("e\u0301", 4)]
    lines = table(("THREAD", "RUNS"), rows, right=(1,)).splitlines()
    # Every line ends where the header's does: the right-aligned column lines up.
    assert {shown_width(line) for line in lines} == {shown_width(lines[0])}
    assert lines[1] == "中文线程     1"
    assert (shown_width("😀"), shown_width("中"), shown_width("e\u0301"), shown_width("ab")) == (
        2,
        2,
        1,
        2,
    )
