// Bar charts for one-key views and heat maps for two-key views. Each mark shows the
// group's total in grey and, over it, what the current brush contributes.

import { axisBottom, axisLeft } from "d3-axis";
import { format } from "d3-format";
import { scaleBand, scaleLinear, scaleSequential } from "d3-scale";
import { interpolateBlues } from "d3-scale-chromatic";
import { select } from "d3-selection";
import type { Label, Tally, ViewInfo } from "./api";

export type OnSelect = (view: string, groups: number[], add: boolean) => void;

export interface Chart {
  /** Redraws what the brush contributes to each group (null: no brush) and marks the brushed groups. */
  update(tally: Tally | null, selected: Set<number>): void;
}

const WIDTH = 560;
const HEIGHT = 230;
const MARGIN = { top: 10, right: 12, bottom: 42, left: 58 };
const short = format(".3~s");

export const label = (values: Label[]) => values.map(String).join(" · ");

function frame(parent: HTMLElement, view: ViewInfo) {
  const card = select(parent).append("figure").attr("class", "view").attr("data-view", view.id);
  const caption = card.append("figcaption").text(view.name);
  caption.append("span").attr("class", "keys").text(` by ${view.keys.join(" × ")}`);
  const svg = card
    .append("svg")
    .attr("viewBox", `0 0 ${WIDTH} ${HEIGHT}`)
    .attr("role", "img")
    .attr("aria-label", view.name);
  const plot = svg.append("g").attr("transform", `translate(${MARGIN.left},${MARGIN.top})`);
  return { caption, svg, plot, w: WIDTH - MARGIN.left - MARGIN.right, h: HEIGHT - MARGIN.top - MARGIN.bottom };
}

export function barChart(parent: HTMLElement, view: ViewInfo, onSelect: OnSelect): Chart {
  const { caption, svg, plot, w, h } = frame(parent, view);
  const groups = view.count.map((_, i) => i);
  const x = scaleBand<number>().domain(groups).range([0, w]).padding(groups.length > 40 ? 0.05 : 0.15);
  const y = scaleLinear().range([h, 0]);
  // A view with a declared sum can chart it instead of the row count.
  let metric: "count" | "sum" = "count";
  let last: { tally: Tally | null; selected: Set<number> } = { tally: null, selected: new Set() };
  const totals = () => (metric === "sum" && view.sum ? view.sum : view.count);
  const every = Math.ceil(groups.length / 10);
  plot
    .append("g")
    .attr("class", "axis")
    .attr("transform", `translate(0,${h})`)
    .call(axisBottom(x).tickValues(groups.filter((g) => g % every === 0)).tickFormat((g) => label(view.labels[g])));
  const yAxis = plot.append("g").attr("class", "axis");
  const bars = plot.append("g");
  const whole = bars
    .selectAll("rect.total")
    .data(groups)
    .join("rect")
    .attr("class", "total")
    .attr("x", (g) => x(g)!)
    .attr("width", x.bandwidth());
  whole.append("title").text((g) => `${label(view.labels[g])}: ${view.count[g]} rows`);
  const marks = bars
    .selectAll<SVGRectElement, number>("rect.mark")
    .data(groups)
    .join("rect")
    .attr("class", "mark")
    .attr("data-view", view.id)
    .attr("data-group", (g) => g)
    .attr("x", (g) => x(g)!)
    .attr("width", x.bandwidth())
    .style("pointer-events", "none");
  const band = plot.append("rect").attr("class", "band").attr("y", 0).attr("height", h).attr("visibility", "hidden");

  // Dragging across bars brushes the range; a click without a drag picks one bar.
  const at = (event: MouseEvent) => {
    const box = (svg.node() as SVGSVGElement).getBoundingClientRect();
    return ((event.clientX - box.left) * WIDTH) / box.width - MARGIN.left;
  };
  const covered = (a: number, b: number) => {
    const [lo, hi] = a < b ? [a, b] : [b, a];
    return groups.filter((g) => x(g)! + x.bandwidth() >= lo && x(g)! <= hi);
  };
  let start: number | null = null;
  let add = false;
  plot
    .insert("rect", ":first-child")
    .attr("class", "catch")
    .attr("width", w)
    .attr("height", h)
    .attr("fill", "transparent");
  svg.on("mousedown", (event: MouseEvent) => {
    start = at(event);
    add = event.shiftKey;
    event.preventDefault();
  });
  const move = (event: MouseEvent, done: boolean) => {
    if (start === null) return;
    const now = at(event);
    const dragged = Math.abs(now - start) >= 3;
    band
      .attr("x", Math.max(0, Math.min(start, now)))
      .attr("width", Math.abs(now - start))
      .attr("visibility", dragged && !done ? "visible" : "hidden");
    const range = covered(dragged ? start : now, now);
    if (done) start = null;
    if (range.length && (dragged || done)) onSelect(view.id, range, add);
  };
  select(window)
    .on(`mousemove.${view.id}`, (event: MouseEvent) => move(event, false))
    .on(`mouseup.${view.id}`, (event: MouseEvent) => move(event, true));

  const scale = () => {
    y.domain([0, Math.max(1, ...totals())]).nice();
    yAxis.call(axisLeft(y).ticks(5).tickFormat(short));
    whole.attr("y", (g) => y(totals()[g])).attr("height", (g) => h - y(totals()[g]));
  };
  scale();
  const chart: Chart = {
    update(tally, selected) {
      last = { tally, selected };
      const shown = (tally && (metric === "sum" ? tally.sum : tally.count)) ?? totals();
      marks
        .attr("y", (g) => y(shown[g]))
        .attr("height", (g) => h - y(shown[g]))
        .attr("data-highlight", (g) => shown[g])
        .classed("selected", (g) => selected.has(g));
    },
  };
  if (view.sum) {
    const choice = caption.append("select").attr("class", "metric");
    choice.append("option").attr("value", "count").text("rows");
    choice.append("option").attr("value", "sum").text(`sum of ${view.measure}`);
    choice.on("change", (event: Event) => {
      metric = (event.target as HTMLSelectElement).value as "count" | "sum";
      scale();
      chart.update(last.tally, last.selected);
    });
  }
  return chart;
}

export function heatMap(parent: HTMLElement, view: ViewInfo, onSelect: OnSelect): Chart {
  const { plot, w, h } = frame(parent, view);
  const distinct = (k: number) => [...new Set(view.labels.map((l) => String(l[k])))].sort();
  const x = scaleBand<string>().domain(distinct(0)).range([0, w]).padding(0.06);
  const y = scaleBand<string>().domain(distinct(1)).range([0, h]).padding(0.06);
  const color = scaleSequential(interpolateBlues).domain([0, Math.max(1, ...view.count)]);
  plot.append("g").attr("class", "axis").attr("transform", `translate(0,${h})`).call(axisBottom(x));
  plot.append("g").attr("class", "axis").call(axisLeft(y));
  plot.append("text").attr("class", "axis-title").attr("x", w / 2).attr("y", h + 34).text(view.keys[0]);
  plot
    .append("text")
    .attr("class", "axis-title")
    .attr("transform", `translate(-40,${h / 2}) rotate(-90)`)
    .text(view.keys[1]);
  const groups = view.count.map((_, i) => i);
  const cells = plot
    .selectAll<SVGGElement, number>("g.cell")
    .data(groups)
    .join("g")
    .attr("class", "cell")
    .attr("transform", (g) => `translate(${x(String(view.labels[g][0]))},${y(String(view.labels[g][1]))})`)
    .on("click", (event: MouseEvent, g) => onSelect(view.id, [g], event.shiftKey));
  const marks = cells
    .append("rect")
    .attr("class", "mark heat")
    .attr("data-view", view.id)
    .attr("data-group", (g) => g)
    .attr("width", x.bandwidth())
    .attr("height", y.bandwidth());
  marks.append("title").text((g) => `${label(view.labels[g])}: ${view.count[g]} rows`);
  const text = cells
    .append("text")
    .attr("x", x.bandwidth() / 2)
    .attr("y", y.bandwidth() / 2)
    .attr("dy", "0.35em");

  return {
    update(tally, selected) {
      const highlight = tally?.count ?? null;
      const shown = highlight ?? view.count;
      marks
        .style("fill", (g) => color(shown[g]))
        .attr("data-highlight", (g) => shown[g])
        .classed("selected", (g) => selected.has(g));
      text
        .text((g) => (highlight ? `${short(shown[g])} of ${short(view.count[g])}` : short(view.count[g])))
        .classed("light", (g) => shown[g] > 0.55 * color.domain()[1]);
    },
  };
}
