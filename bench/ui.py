"""Brush-to-redraw latency of the web page, measured in headless Chromium.

    .venv/bin/python -m bench.ui                  # TPC-H SF1 lineitem, four views
    .venv/bin/python -m bench.ui --scale 0.1 --gestures 100

Serves the four views of issue 8 (ship month, return flag by line status, ship mode,
discount) over lineitem, captured with ember on the first run and kept under
data/ui/sf<scale>/, then drives Debian's Chromium with Playwright through a seeded mix
of gestures, as a person brushes: clicks on single bars of each bar chart, drags across
ranges of ship months, clicks and shift-clicks on heat-map cells. The page measures
each brush itself (performance.now from the input event to the frame painted after
the redraw, fetch and JSON included); a drag sends a brush per mouse move, one request
in flight, so its later brushes also count the wait behind the earlier ones.
Writes the run's record and ui.md (`bench.results`).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from playwright.sync_api import Page
from rich.console import Console

from bench.common import ROOT, Run, figure, parser
from devkit import tpch
from devkit.browser import chromium
from ember.ui import build_app
from ember.ui.app import running

VIEWS = """\
# The four views of issue 8 over TPC-H lineitem (written by bench/ui.py).
[table]
name = "lineitem"
path = "../../tpch/sf{scale}/lineitem.parquet"

[[view]]
name = "ship month"
group_by = ["date_format(l_shipdate, 'yyyy-MM') AS ship_month"]

[[view]]
name = "return flag \u00d7 line status"
group_by = ["l_returnflag", "l_linestatus"]

[[view]]
name = "ship mode"
group_by = ["l_shipmode"]

[[view]]
name = "discount"
group_by = ["l_discount"]
"""
TARGET_MEDIAN, TARGET_P95 = 150.0, 300.0
HEAT = "return_flag_line_status"
# The views as the page reads them, with the token the page keeps for its tab.
VIEWS_JS = "fetch('/api/views', {headers: {authorization: 'Bearer ' + sessionStorage.getItem('ember-token')}}).then(r => r.json())"


def store(scale: float) -> Path:
    """data/ui/sf<scale>/ with the views file (the page captures the views on first start)."""
    tpch.ensure_data(ROOT / "data" / "tpch" / f"sf{scale:g}", scale)
    folder = ROOT / "data" / "ui" / f"sf{scale:g}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "views.toml").write_text(VIEWS.format(scale=f"{scale:g}"))
    return folder


def settle(page: Page, before: int) -> None:
    """Waits until the brushes after `before` are redrawn and their details loaded, and
    no brush waits to be sent."""
    page.wait_for_timeout(20)
    page.wait_for_function("b => window.__ember.settled > b && !window.__ember.busy", arg=before, timeout=60_000)
    status = page.inner_text("#status")
    if status.startswith("error"):
        raise RuntimeError(f"the page says: {status}")


def counters(page: Page) -> int:
    return int(page.evaluate("window.__ember.settled"))


def centre(page: Page, view: str, group: int) -> tuple[float, float]:
    box = page.locator(f'rect.mark[data-view="{view}"][data-group="{group}"]').bounding_box()
    assert box is not None
    # a bar's highlighted part may be short: aim at its foot, inside every bar
    return box["x"] + box["width"] / 2, box["y"] + box["height"] - 2


def drag(page: Page, view: str, first: int, last: int) -> None:
    x0, y = centre(page, view, first)
    x1, _ = centre(page, view, last)
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=8)
    page.mouse.up()


def click_cell(page: Page, group: int, shift: bool = False) -> None:
    if shift:
        page.keyboard.down("Shift")
    page.mouse.click(*centre(page, HEAT, group))
    if shift:
        page.keyboard.up("Shift")


def screenshots(page: Page, folder: Path) -> None:
    """The pictures of docs/guide/ui.md: the page at rest, a drag over ship
    months, and a heat-map cell with the details panel."""
    folder.mkdir(parents=True, exist_ok=True)
    before = counters(page)
    page.keyboard.press("Escape")
    settle(page, before)
    page.screenshot(path=str(folder / "ui-views.png"))
    labels = [label[0] for label in page.evaluate(VIEWS_JS)["views"][0]["labels"]]
    before = counters(page)
    drag(page, "ship_month", labels.index("1995-01"), labels.index("1995-12"))
    settle(page, before)
    page.screenshot(path=str(folder / "ui-brush-months.png"))
    before = counters(page)
    click_cell(page, 0)
    settle(page, before)
    page.screenshot(path=str(folder / "ui-details.png"), full_page=True)


def gestures(page: Page, count: int, seed: int) -> dict[str, list[float]]:
    """Runs `count` gestures; the page's latencies, grouped by kind of gesture."""
    page.set_viewport_size({"width": 1280, "height": 900})
    groups = {v["id"]: len(v["count"]) for v in page.evaluate(VIEWS_JS)["views"]}
    rng = random.Random(seed)
    by_kind: dict[str, list[float]] = {}
    for _ in range(count):
        kind = rng.choice(["click bar", "click bar", "drag months", "click cell", "shift-click cell"])
        before, seen = counters(page), len(page.evaluate("window.__ember.latencies"))
        if kind == "click bar":
            view = rng.choice(["ship_month", "ship_mode", "discount"])
            page.mouse.click(*centre(page, view, rng.randrange(groups[view])))
        elif kind == "drag months":
            width = rng.randint(2, 40)
            first = rng.randrange(groups["ship_month"] - width)
            drag(page, "ship_month", first, first + width)
        else:
            click_cell(page, rng.randrange(groups[HEAT]), kind.startswith("shift"))
        settle(page, before)
        by_kind.setdefault(kind, []).extend(page.evaluate(f"window.__ember.latencies.slice({seen})"))
    return by_kind


def row(name: str, ms: list[float]) -> str:
    return f"| {name} | {len(ms)} | {np.median(ms):.0f} | {np.percentile(ms, 95):.0f} | {max(ms):.0f} |"


def stats(name: str, ms: list[float]) -> dict[str, Any]:
    return {"gesture": name, "brushes": len(ms), "median": float(np.median(ms)),
            "p95": float(np.percentile(ms, 95)), "max": float(max(ms))}


def headline(rows: list[dict[str, Any]], server: float | None, startup: float | None) -> list[dict[str, Any]]:
    """The figures the summary shows (`server`: the server side's median ms)."""
    every = next(r for r in rows if r["gesture"] == "all")
    return [
        figure("median", "Brush to every view redrawn, median", every["median"], "ms"),
        figure("p95", "Brush to every view redrawn, p95", every["p95"], "ms"),
        figure("server", "Server side of a brush, median", server, "ms", 1),
        figure("startup", "Start-up on captured views", startup, "s", 1),
    ]


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.set_defaults(scale=1.0)
    p.add_argument("--gestures", type=int, default=300)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--screenshots", type=Path, help="also save the docs' screenshots here (docs/img)")
    args = p.parse_args(argv)
    run = Run("ui", args.out, argv)
    console = Console()
    folder = store(args.scale)
    cached = (folder / ".ui-views").exists()
    start = time.perf_counter()
    with console.status("building the views (captured with Spark on the first run)"):
        app = build_app(folder)
    startup = time.perf_counter() - start
    board = app.state.board
    rows = {v.source: int(v.counts.sum()) for v in board.views.values()}
    with running(app) as url, chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_function("window.__ember && window.__ember.ready")
        with console.status(f"{args.gestures} gestures in Chromium"):
            by_kind = gestures(page, args.gestures, args.seed)
        server = [float(x) for x in page.evaluate("window.__ember.server")]
        if args.screenshots is not None:
            screenshots(page, args.screenshots)
    every = [ms for kind in by_kind.values() for ms in kind]
    median, p95 = float(np.median(every)), float(np.percentile(every, 95))
    load = os.getloadavg()
    lines = [
        f"Load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end (other sessions share the machine). "
        "Headless Debian Chromium driven by Playwright; "
        f"lineitem at SF{args.scale:g} ({', '.join(f'{n:,} rows' for n in rows.values())}), four views: "
        + ", ".join(f"{v.name} ({v.groups} groups)" for v in board.views.values())
        + f"; {args.gestures} gestures (seed {args.seed}).",
        "",
        "Each latency is measured by the page: `performance.now()` from the input event to the frame painted "
        "after every view is redrawn (the brush request, its JSON and the SVG update included; the details "
        "panel's rows load after that and are not counted). A drag sends one brush per mouse move with one "
        "request in flight, so its brushes also count the wait behind the one before.",
        "",
        "| gesture | brushes | median ms | p95 ms | max ms |",
        "|---|---|---|---|---|",
        *[row(kind, ms) for kind, ms in sorted(by_kind.items())],
        row("**all**", every),
        "",
        f"Server side of those brushes (one `bincount` per linked view over the brushed rows): median "
        f"{np.median(server):.1f} ms, p95 {np.percentile(server, 95):.1f} ms.",
        "",
        f"Target (issue 8): median ≤ {TARGET_MEDIAN:.0f} ms, p95 ≤ {TARGET_P95:.0f} ms. Measured: median "
        f"{median:.0f} ms, p95 {p95:.0f} ms — "
        f"{'met' if median <= TARGET_MEDIAN and p95 <= TARGET_P95 else 'missed'}.",
        "",
        f"Start-up ({'views already captured' if cached else 'first run: views captured with Spark'}): "
        f"{startup:.1f} s to read the four stores into rid arrays and build the forward arrays.",
    ]
    table = [stats(kind, ms) for kind, ms in sorted(by_kind.items())] + [stats("all", every)]
    out = run.write(
        "Web page: brush-to-redraw latency (`bench/ui.py`)",
        lines,
        table,
        headline(table, float(np.median(server)) if server else None, startup),
        args,
        extra={"server_median": float(np.median(server)) if server else None,
               "server_p95": float(np.percentile(server, 95)) if server else None,
               "startup": startup, "cached": cached, "rows": rows},
    )
    console.print("\n".join(lines))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
