"""Apply the Alembic migrations from code, inside the caller's event loop."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine


def script_location() -> Path:
    """The migrations folder: in the source tree, or shipped as ``recorder._migrations``."""
    source = Path(__file__).resolve().parents[2] / "migrations"
    if (source / "env.py").is_file():
        return source
    return Path(str(resources.files("recorder._migrations")))


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    async with engine.begin() as conn:
        await conn.run_sync(lambda sync: command.upgrade(alembic_config(sync), revision))


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    async with engine.begin() as conn:
        await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), revision))
