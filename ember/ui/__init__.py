"""The linked-brushing web page (`ember ui DIR`): group-by views over one table, where
brushing marks in one view highlights what their source rows contribute to the others.

    from ember.ui import serve
    serve("stores/")                 # the entries and views.toml in that folder (docs/ui.md)
"""

from __future__ import annotations

from ember.ui.app import build_app, make_app
from ember.ui.views import Crossfilter, View, build_view


def serve(store_dir: str, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serves the page for the views of `store_dir` until interrupted."""
    import uvicorn

    app = build_app(store_dir)
    print(f"ember ui: http://{host}:{port}/  ({len(app.state.board.views)} views; Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


__all__ = ["Crossfilter", "View", "build_app", "build_view", "make_app", "serve"]
