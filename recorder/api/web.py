"""The web timeline: a static page at ``/`` and its assets under ``/web/``.

The page is plain HTML, CSS and ES modules shipped in ``recorder/web/`` (no build step). It
talks only to the public HTTP API, so it is served without a token: the page asks for the
token itself when the API answers 401. Assets are looked up by name in that one folder, never
by a path the request builds.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

WEB = Path(__file__).resolve().parent.parent / "web"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

# Agent output is shown as text only (never as markup); the policy makes that a rule.
_HEADERS = {
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'"
    ),
}

router = APIRouter(tags=["web"], include_in_schema=False)


def _asset(name: str) -> FileResponse:
    media_type = _TYPES.get(Path(name).suffix)
    path = WEB / name
    if media_type is None or "/" in name or name.startswith(".") or not path.is_file():
        raise HTTPException(404, f"no asset {name!r}")
    return FileResponse(path, media_type=media_type, headers=_HEADERS)


@router.get("/")
async def page() -> FileResponse:
    return _asset("index.html")


@router.get("/web/{name}")
async def asset(name: str) -> FileResponse:
    return _asset(name)
