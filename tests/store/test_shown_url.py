"""A database URL as logs and messages show it: never a password, wherever it is given."""

from __future__ import annotations

import pytest

from recorder.store import shown_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+asyncpg://u:s3cret@h:5432/db", "postgresql+asyncpg://u:***@h:5432/db"),
        ("postgresql+asyncpg://u@h/db?password=s3cret", "postgresql+asyncpg://u@h/db?password=***"),
        (
            "postgresql+asyncpg://u@h/db?ssl=require&sslpassword=s3cret",
            "postgresql+asyncpg://u@h/db?ssl=require&sslpassword=***",
        ),
        ("sqlite+aiosqlite:///recorder.db", "sqlite+aiosqlite:///recorder.db"),
        ("not a url", "not a url"),
    ],
)
def test_no_password_is_shown(url: str, shown: str) -> None:
    assert shown_url(url) == shown
