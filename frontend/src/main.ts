// The page: draws every view, sends brushes to the server (one request in flight, the
// latest brush next), redraws the tallies, and pages through the brushed rows.
// Each brush's time from the input event to the redrawn frame is kept in
// window.__ember.latencies (milliseconds) for the benchmark and the tests; `settled`
// counts brushes whose redraw and details panel are done, `busy` says one is under way,
// `failed` that the views could not be loaded (the status line says why).

import * as api from "./api";
import { barChart, type Chart, heatMap, label } from "./charts";

interface Brush {
  view: string;
  groups: Set<number>;
}

interface Probe {
  ready: boolean;
  latencies: number[];
  server: number[];
  brushes: number;
  details: number;
  settled: number;
  busy: boolean;
  failed: boolean;
}

const probe: Probe = {
  ready: false,
  latencies: [],
  server: [],
  brushes: 0,
  details: 0,
  settled: 0,
  busy: false,
  failed: false,
};
(window as unknown as { __ember: Probe }).__ember = probe;

const PAGE = 50;
const charts = new Map<string, Chart>();
const infos = new Map<string, api.ViewInfo>();
let current: Brush | null = null;
let inFlight = false;
let queued: { brush: Brush | null; t0: number } | null = null;
let page = 0;
const $ = (id: string) => document.getElementById(id)!;

function select(view: string, groups: number[], add: boolean) {
  const chosen = new Set(add && current?.view === view ? current.groups : []);
  for (const g of groups) {
    if (add && chosen.has(g) && groups.length === 1) chosen.delete(g);
    else chosen.add(g);
  }
  send(chosen.size ? { view, groups: chosen } : null, performance.now());
}

function send(brush: Brush | null, t0: number) {
  if (inFlight) {
    queued = { brush, t0 };
    return;
  }
  inFlight = true;
  probe.busy = true;
  current = brush;
  redraw(brush, t0).finally(() => {
    inFlight = false;
    const next = queued;
    queued = null;
    if (next) send(next.brush, next.t0);
    else probe.busy = false;
  });
}

async function redraw(brush: Brush | null, t0: number) {
  try {
    const result = brush ? await api.brush(brush.view, [...brush.groups]) : null;
    for (const [id, chart] of charts) {
      const linked = result?.views[id];
      chart.update(linked ?? null, id === brush?.view ? brush.groups : new Set());
    }
    await nextFrame();
    const ms = performance.now() - t0;
    if (result) {
      probe.latencies.push(ms);
      probe.server.push(result.server_ms);
    }
    probe.brushes += 1;
    status(result, ms);
    page = 0;
    await details();
  } catch (error) {
    $("status").textContent = `error: ${(error as Error).message}`;
  } finally {
    probe.settled += 1;
  }
}

/** Resolves after the browser has painted the frame holding the DOM changes made so far. */
const nextFrame = () => new Promise<void>((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

function status(result: api.BrushResult | null, ms: number) {
  ($("clear") as HTMLButtonElement).disabled = !result;
  if (!result) {
    $("status").textContent = summary();
    return;
  }
  const view = infos.get(result.view)!;
  const which = result.groups.length === 1 ? label(view.labels[result.groups[0]]) : `${result.groups.length} marks`;
  $("status").textContent =
    `${view.name}: ${which} · ${result.rows.toLocaleString()} source rows · ` +
    `redrawn in ${ms.toFixed(0)} ms (server ${result.server_ms.toFixed(1)} ms)`;
}

function summary() {
  const sources = new Map<string, number>();
  for (const v of infos.values()) sources.set(v.source, Math.max(sources.get(v.source) ?? 0, sum(v.count)));
  const parts = [...sources].map(([s, n]) => `${s} (${n.toLocaleString()} rows)`);
  return `${infos.size} views over ${parts.join(", ")}`;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

async function details() {
  const section = $("details");
  if (!current) {
    section.hidden = true;
    return;
  }
  const brush = current;
  const result = await api.rows(brush.view, [...brush.groups], page * PAGE, PAGE);
  if (brush !== current) return;
  section.hidden = false;
  const view = infos.get(brush.view)!;
  $("details-title").textContent = `Source rows behind the brush in “${view.name}”`;
  const last = Math.min(result.total, result.offset + result.rows.length);
  $("page").textContent = `rows ${(result.offset + 1).toLocaleString()}–${last.toLocaleString()} of ${result.total.toLocaleString()}`;
  ($("prev") as HTMLButtonElement).disabled = page === 0;
  ($("next") as HTMLButtonElement).disabled = last >= result.total;
  const table = $("rows") as HTMLTableElement;
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const c of result.columns) head.appendChild(document.createElement("th")).textContent = c;
  const body = table.createTBody();
  for (const row of result.rows) {
    const tr = body.insertRow();
    for (const value of row) tr.insertCell().textContent = value === null ? "" : String(value);
  }
  probe.details += 1;
}

function render(views: api.ViewInfo[]) {
  const root = $("views");
  root.replaceChildren();
  charts.clear();
  infos.clear();
  for (const view of views) {
    infos.set(view.id, view);
    const draw = view.kind === "heat" ? heatMap : barChart;
    charts.set(view.id, draw(root, view, select));
  }
  for (const chart of charts.values()) chart.update(null, new Set());
  $("status").textContent = summary();
}

/** The entries (or their sources) not shown, each with why, below the views. */
function leftOut(items: api.LeftOut[]) {
  const section = $("left-out") as HTMLDetailsElement;
  section.hidden = items.length === 0;
  section.querySelector("summary")!.textContent =
    `${items.length} ${items.length === 1 ? "entry" : "entries"} not shown`;
  const list = section.querySelector("ul")!;
  list.replaceChildren();
  for (const item of items) {
    const li = list.appendChild(document.createElement("li"));
    li.appendChild(document.createElement("strong")).textContent = item.name;
    li.append(`: ${item.why}`);
  }
}

/** The form that declares a view over the views.toml's table; the server captures it. */
function adder() {
  const form = $("add-view") as HTMLFormElement;
  form.hidden = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const field = (name: string) => (form.elements.namedItem(name) as HTMLInputElement).value.trim();
    const button = form.querySelector("button")!;
    button.disabled = true;
    $("add-status").textContent = "capturing with Spark…";
    try {
      const view = await api.addView(field("name"), [field("key1"), field("key2")].filter(Boolean), field("sum") || null);
      send(null, performance.now());
      render((await api.views()).views);
      $("add-status").textContent = `added “${view.name}”`;
      form.reset();
    } catch (error) {
      $("add-status").textContent = `error: ${(error as Error).message}`;
    } finally {
      button.disabled = false;
    }
  });
}

async function main() {
  let listed: api.Views;
  try {
    listed = await api.views();
  } catch (error) {
    const unauthorized = error instanceof api.ApiError && error.status === 401;
    $("status").textContent = unauthorized
      ? "error: this page needs its token: open the address `ember ui` printed (…/?token=…)"
      : `error: ${(error as Error).message}`;
    $("status").classList.add("error");
    probe.failed = true;
    return;
  }
  render(listed.views);
  leftOut(listed.left_out);
  if (listed.can_add) adder();
  $("clear").addEventListener("click", () => send(null, performance.now()));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") send(null, performance.now());
  });
  $("prev").addEventListener("click", () => {
    page = Math.max(0, page - 1);
    void details();
  });
  $("next").addEventListener("click", () => {
    page += 1;
    void details();
  });
  probe.ready = true;
}

void main();
