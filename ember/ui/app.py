"""The web page's server: a Starlette app answering brushes from in-process arrays."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ember.errors import EmberError
from ember.ui.catalog import declare, load_views
from ember.ui.guard import Guard, new_token
from ember.ui.views import Crossfilter, View, plain

STATIC = Path(__file__).with_name("static")
PAGE_LIMIT = 500  # most rows one details page returns

Handler = Callable[[Request], Awaitable[Response]]
Declare = Callable[[str, list[str], str | None], View]  # name, group-by expressions, sum → a captured view


def build_app(
    store_dir: str | Path,
    spark: SparkSession | None = None,
    *,
    token: str | None = None,
    no_token: bool = False,
    hosts: Sequence[str] = (),
) -> Starlette:
    """The app for the views of `store_dir` (built now, so a bad folder fails at start);
    `token`, `no_token` and `hosts` as for `make_app`."""
    folder = Path(store_dir)
    board = Crossfilter(*load_views(folder, spark))
    can_declare = (folder / "views.toml").exists()
    return make_app(
        board, partial(declare, folder, spark=spark) if can_declare else None, token=token, no_token=no_token, hosts=hosts
    )


def make_app(
    board: Crossfilter,
    declare: Declare | None = None,
    *,
    token: str | None = None,
    no_token: bool = False,
    hosts: Sequence[str] = (),
) -> Starlette:
    """The routes over an already built crossfilter (docs/ui.md lists them); with
    `declare`, the page can add views.

    Its API answers only requests with `Authorization: Bearer <token>` (`token`, or a
    random one; `app.state.token` holds it), unless `no_token`; requests whose Host is
    not the address they came in on (or localhost, or one of `hosts`), cross-origin
    POSTs and bodies over 64 KiB are refused (`ember.ui.guard`)."""
    if not (STATIC / "index.html").exists():
        raise EmberError(f"the page's files are missing from {STATIC}: rebuild them with `make ui`")
    if no_token and token is not None:
        raise EmberError("give a token or no_token, not both")
    if token is not None and not token.strip():
        raise EmberError("the token must not be empty")
    token = None if no_token else (token.strip() if token is not None else new_token())
    adding = threading.Lock()  # one capture at a time; brushes go on meanwhile

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def views(request: Request) -> Response:
        board = request.app.state.board
        left_out = [{"name": x.name, "why": x.why} for x in board.left_out]
        return JSONResponse(
            {"views": [v.describe() for v in board.views.values()], "left_out": left_out, "can_add": declare is not None}
        )

    async def add(request: Request) -> Response:
        if declare is None:
            raise EmberError("views can be added only over the table of a views.toml in the store folder")
        body = await _body(request)
        measure = body.get("sum") or None
        if measure is not None and not isinstance(measure, str):
            raise EmberError("'sum' must be a column name")
        name, group_by = _text(body, "name"), _texts(body, "group_by")

        def capture() -> dict[str, Any]:
            with adding:
                view = declare(name, group_by, measure)
                board = request.app.state.board
                request.app.state.board = Crossfilter([*board.views.values(), view], board.left_out)
                return view.describe()

        return JSONResponse(await run_in_threadpool(capture))

    async def brush(request: Request) -> Response:
        body = await _body(request)
        start = time.perf_counter()
        result = request.app.state.board.brush(_text(body, "view"), _ints(body, "groups"))
        result["server_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return JSONResponse(result)

    async def rows(request: Request) -> Response:
        body = await _body(request)
        view, groups = _text(body, "view"), _ints(body, "groups")
        offset, limit = int(body.get("offset", 0)), min(int(body.get("limit", 50)), PAGE_LIMIT)
        if offset < 0 or limit < 0:
            raise EmberError("offset and limit must not be negative")
        board = request.app.state.board
        page = await run_in_threadpool(board.details, view, groups, offset, limit)
        total = int(board.view(view).counts[sorted(set(groups))].sum()) if groups else 0
        return JSONResponse(
            {
                "total": total,
                "offset": offset,
                "columns": page.column_names,
                "rows": [[plain(v) for v in row.values()] for row in page.to_pylist()],
            }
        )

    app = Starlette(
        routes=[
            Route("/", _errors(page)),
            Route("/api/views", _errors(views)),
            Route("/api/views", _errors(add), methods=["POST"]),
            Route("/api/brush", _errors(brush), methods=["POST"]),
            Route("/api/rows", _errors(rows), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(Guard, token=token, hosts=hosts)],
    )
    app.state.board = board
    app.state.token = token
    return app


def page_url(host: str, port: int, token: str | None) -> str:
    """The page's address, with its token for the page to read (and drop from the address bar)."""
    netloc = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{netloc}:{port}/" + (f"?token={token}" if token else "")


def _errors(handler: Handler) -> Handler:
    """Bad requests answer 400 with the one-line message, as JSON."""

    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except (EmberError, ValueError, TypeError) as e:
            return JSONResponse({"error": str(e)}, status_code=400)

    return guarded


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        raise EmberError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise EmberError("the request body must be a JSON object")
    return body


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise EmberError(f"{key!r} must be a string")
    return value


def _texts(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EmberError(f"{key!r} must be a list of strings")
    return value


def _ints(body: dict[str, Any], key: str) -> list[int]:
    value = body.get(key)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise EmberError(f"{key!r} must be a list of integers")
    return value


@contextmanager
def running(app: Starlette, host: str = "127.0.0.1") -> Iterator[str]:
    """Serves `app` from a background thread on a free port, for tests, benchmarks and
    notebooks; yields the page's address (with the app's token, as `ember ui` prints it)
    and stops it on exit."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", proxy_headers=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise EmberError(f"the server did not start on {host}:{port}")
            time.sleep(0.02)
        yield page_url(host, port, getattr(app.state, "token", None))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
