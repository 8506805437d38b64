"""The linked-brushing web page (`ember ui DIR`): group-by views over one table, where
brushing marks in one view highlights what their source rows contribute to the others.

    from ember.ui import serve
    serve("stores/")                 # the entries and views.toml in that folder (docs/ui.md)
"""

from __future__ import annotations

import sys

from ember.ui.app import build_app, make_app, page_url
from ember.ui.views import Crossfilter, View, build_view


def serve(store_dir: str, host: str = "127.0.0.1", port: int = 8765, token: str | None = None, no_token: bool = False) -> None:
    """Serves the page for the views of `store_dir` until interrupted, on 127.0.0.1
    unless `host` says otherwise; prints its address with the token the API asks for
    (`token`, or a random one), or none with `no_token` (docs/guide/security.md)."""
    import uvicorn

    app = build_app(store_dir, token=token, no_token=no_token, hosts=[host])
    if no_token:
        print(
            f"ember ui: warning: --no-token: any program, and any web page open in a browser, that can reach "
            f"{host}:{port} can read these views and their source rows and add views",
            file=sys.stderr,
            flush=True,
        )
    url = page_url(host, port, app.state.token)
    print(f"ember ui: {url}  ({len(app.state.board.views)} views; Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", proxy_headers=False)


__all__ = ["Crossfilter", "View", "build_app", "build_view", "make_app", "serve"]
