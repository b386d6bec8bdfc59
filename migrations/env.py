"""Alembic environment: async engines, the project's metadata, batch mode on SQLite.

Two ways in: the ``alembic`` command (builds its own async engine from RECORDER_DB or
``-x db=URL``), and ``recorder.store.migrations.upgrade`` (hands over an open connection
in ``config.attributes["connection"]``, so migrations run inside the caller's event loop).
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from recorder.store.schema import described, metadata

config = context.config


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("db")
        or os.environ.get("RECORDER_DB")
        or "sqlite+aiosqlite:///recorder.db"
    )


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=described,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(_url())
    async with engine.connect() as conn:
        await conn.run_sync(_run)
        await conn.commit()
    await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_async())


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
