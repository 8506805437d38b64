"""The page in headless Chromium (Debian's, driven by Playwright): opened at the
address `ember ui` prints (with its token), brushing a bar and heat-map cells redraws
the other views with the counts DuckDB computes, the details panel lists the brushed
rows; without the token it shows an error and no data. A screenshot and the measured
latencies are kept under test-artifacts/ui/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from playwright.sync_api import BrowserContext, Page
from starlette.applications import Starlette

from devkit.browser import chromium
from ember.ui.app import running
from tests.ui.conftest import group_key, tally

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"


# The API as the page calls it, with the token the page keeps for the tab.
VIEWS = "fetch('/api/views', {headers: {authorization: 'Bearer ' + sessionStorage.getItem('ember-token')}}).then(r => r.json())"


@pytest.fixture(scope="module")
def url(ui_app: Starlette) -> Iterator[str]:
    """The page's address as `ember ui` prints it: http://127.0.0.1:PORT/?token=..."""
    with running(ui_app) as address:
        yield address


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserContext]:
    with chromium() as context:
        yield context


@pytest.fixture(scope="module")
def page(url: str, browser: BrowserContext) -> Iterator[Page]:
    tab = browser.new_page()
    tab.goto(url)
    tab.wait_for_function("window.__ember && window.__ember.ready")
    yield tab
    tab.close()


def click_mark(page: Page, view: str, group: int, shift: bool = False) -> None:
    """Clicks the middle of a mark the way a person does, and waits for the redraw and details."""
    before = page.evaluate("[window.__ember.brushes, window.__ember.details]")
    box = page.locator(f'rect.mark[data-view="{view}"][data-group="{group}"]').bounding_box()
    assert box is not None
    if shift:
        page.keyboard.down("Shift")
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    if shift:
        page.keyboard.up("Shift")
    page.wait_for_function(
        "([b, d]) => window.__ember.brushes > b && window.__ember.details > d", arg=before
    )


def views(page: Page) -> dict[str, dict]:
    return {v["id"]: v for v in page.evaluate(VIEWS)["views"]}


def highlighted(page: Page) -> dict[str, dict[str, int]]:
    """Per view, the brushed amount each mark shows, keyed like the DuckDB tally."""
    described = views(page)
    marks = page.eval_on_selector_all(
        "rect.mark", "ms => ms.map(m => [m.dataset.view, +m.dataset.group, +m.dataset.highlight])"
    )
    shown: dict[str, dict[str, int]] = {v: {} for v in described}
    for view, group, n in marks:
        if n:
            shown[view][group_key(view, described[view]["labels"][group])] = n
    return shown


def test_brushing_a_bar_and_cells_redraws_every_view(page: Page, duck: duckdb.DuckDBPyConnection) -> None:
    labels = {v: d["labels"] for v, d in views(page).items()}
    click_mark(page, "ship_mode", 0)
    mode = labels["ship_mode"][0][0]
    shown = highlighted(page)
    for view in shown:
        assert shown[view] == tally(duck, "ship_mode", [mode], view), view

    rids = [r for (r,) in duck.execute("SELECT ember_rid FROM li WHERE l_shipmode = ? ORDER BY 1", [mode]).fetchall()]
    assert page.inner_text("#page") == f"rows 1\u201350 of {len(rids):,}"
    columns = page.eval_on_selector_all("#rows th", "hs => hs.map(h => h.textContent)")
    cells = page.eval_on_selector_all(
        "#rows tbody tr", f"rs => rs.map(r => r.cells[{columns.index('ember_rid')}].textContent)"
    )
    assert [int(c) for c in cells] == rids[:50]
    page.click("#next")
    page.wait_for_function("window.__ember.details > 1 && document.querySelector('#page').textContent.startsWith('rows 51')")

    click_mark(page, "flags", 0)
    click_mark(page, "flags", 3, shift=True)
    brushed = [group_key("flags", labels["flags"][g]) for g in (0, 3)]
    shown = highlighted(page)
    for view in shown:
        assert shown[view] == tally(duck, "flags", brushed, view), view

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)
    probe = page.evaluate("window.__ember")
    (ARTIFACTS / "latency.json").write_text(json.dumps({"ms": probe["latencies"], "server_ms": probe["server"]}))
    assert len(probe["latencies"]) == 3


def test_escape_clears_the_brush(page: Page) -> None:
    click_mark(page, "discount", 2)
    before = page.evaluate("window.__ember.brushes")
    page.keyboard.press("Escape")
    page.wait_for_function("b => window.__ember.brushes > b", arg=before)
    assert page.is_hidden("#details")
    totals = page.eval_on_selector_all('rect.mark[data-view="discount"]', "ms => ms.map(m => +m.dataset.highlight)")
    assert totals == views(page)["discount"]["count"]


def test_a_declared_sum_is_charted_on_request(page: Page, duck: duckdb.DuckDBPyConnection) -> None:
    click_mark(page, "flags", 0)
    page.select_option('figure[data-view="discount"] select.metric', "sum")
    flag = views(page)["flags"]["labels"][0]
    expected = dict(
        duck.execute(
            "SELECT l_discount::DOUBLE, sum(l_quantity)::DOUBLE FROM li "
            "WHERE l_returnflag = ? AND l_linestatus = ? GROUP BY 1",
            flag,
        ).fetchall()
    )
    shown = page.eval_on_selector_all('rect.mark[data-view="discount"]', "ms => ms.map(m => +m.dataset.highlight)")
    discounts = [labels[0] for labels in views(page)["discount"]["labels"]]
    assert dict(zip(discounts, shown, strict=True)) == pytest.approx(expected)


def test_the_token_leaves_the_address_bar_and_a_reload_keeps_working(url: str, browser: BrowserContext, ui_app: Starlette) -> None:
    assert url.startswith("http://127.0.0.1:") and url.endswith(f"/?token={ui_app.state.token}")
    tab = browser.new_page()
    try:
        tab.goto(url)
        tab.wait_for_function("window.__ember && window.__ember.ready")
        assert tab.evaluate("location.search") == ""  # nor in the history
        assert tab.locator("rect.mark").count() > 0
        tab.reload()
        tab.wait_for_function("window.__ember && window.__ember.ready")
        assert tab.locator("rect.mark").count() > 0
    finally:
        tab.close()


@pytest.mark.parametrize("query", ["", "?token=wrong"])
def test_without_the_token_the_page_shows_an_error_and_no_data(url: str, browser: BrowserContext, query: str) -> None:
    tab = browser.new_page()  # a tab of its own: the token kept by another tab is not shared
    try:
        tab.goto(url.split("?")[0] + query)
        tab.wait_for_function("window.__ember && window.__ember.failed")
        assert "needs its token" in tab.inner_text("#status")
        assert tab.locator("rect.mark").count() == 0 and tab.locator("figure.view").count() == 0
        assert tab.evaluate("fetch('/api/views').then(r => r.status)") == 401
    finally:
        tab.close()
