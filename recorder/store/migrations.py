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


# Any fixed number: the key of the advisory lock that migrating recorders take.
_MIGRATION_LOCK = 0x5245_434F_5244


def apply_migrations(connection: Connection, revision: str = "head") -> None:
    """Upgrade the database behind ``connection``, inside its transaction."""
    command.upgrade(alembic_config(connection), revision)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Several recorders starting at once on one database would otherwise race to
            # create the same tables; the lock is held until this transaction commits.
            await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        await conn.run_sync(apply_migrations, revision)
