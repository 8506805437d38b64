"""The one-page summary of the benchmarks: each one's latest run, from its history file.

    .venv/bin/python -m bench.summary             # rewrites docs/benchmarks.md
    .venv/bin/python -m bench.summary --check     # exit 1 if docs/benchmarks.md is stale

Every benchmark also rewrites the summary when it writes its results. The page is made
from `<results>/history/*.jsonl` alone (see `bench.results`), so the same history always
gives the same page. Beside each latest figure: DESIGN.md's section 6 target, where the
benchmark measures it, judged only at the scale the target is set for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.results import RESULTS, read_history, show

TITLES = {
    "capture": "Capture overhead and traces, TPC-H",
    "scale": "Costs against TPC-H scale (SF 0.1 to 10)",
    "connect": "Capture over Spark Connect vs a classic session",
    "tpcds": "TPC-DS coverage and capture overhead",
    "store": "Lineage store size and traces from disk",
    "remote": "Side tables indexed by the executors",
    "memory": "Driver memory on lineage bigger than the driver",
    "phases": "Where a capture spends its time",
    "lazy": "Lazy lineage (`ember.infer`)",
    "grouped_map": "Grouped and partition maps",
    "workload": "Workload-aware capture",
    "rdd": "RDD lineage (Titian's workloads)",
    "arrays": "Cell lineage for numpy (`ember.arrays`)",
    "fd": "FD profiling",
    "ui": "Web page: brush-to-redraw latency",
}


@dataclass(frozen=True)
class Target:
    text: str
    met: Callable[[float], bool]
    scale: float | None = 1.0  # the scale factor the target is set for (None: any)


def at_most(bound: float) -> Callable[[float], bool]:
    return lambda v: v <= bound


# DESIGN.md, section 6 ("Targets"), by (benchmark, headline key).
TARGETS: dict[tuple[str, str], Target] = {
    ("capture", "inject_median"): Target("≤ 5 % (result overhead, median)", at_most(0.05)),
    ("capture", "inject_worst"): Target("≤ 30 % (result overhead, worst)", at_most(0.30)),
    ("capture", "defer_median"): Target("≤ 5 % (result overhead, median)", at_most(0.05)),
    ("capture", "defer_worst"): Target("≤ 30 % (result overhead, worst)", at_most(0.30)),
    ("capture", "ready"): Target("≤ 1.25\u00d7", at_most(1.25)),
    ("capture", "back"): Target("≤ 10 ms", at_most(10)),
    ("capture", "rows"): Target("≤ 100 ms", at_most(100)),
    ("capture", "rows_cold"): Target("≤ 100 ms", at_most(100)),
    ("tpcds", "inject_median"): Target("≤ 12 %", at_most(0.12)),
    ("tpcds", "ember_errors"): Target("0 (every Spark-runnable query)", at_most(0), None),
    ("tpcds", "trace"): Target("≤ 10 ms", at_most(10)),
    ("store", "back"): Target("≤ 10 ms (from a reloaded store)", at_most(10)),
    ("store", "rows"): Target("≤ 100 ms (from a reloaded store)", at_most(100)),
    ("remote", "trace"): Target("≤ 10 ms", at_most(10)),
    ("phases", "fixed"): Target("≤ 15 ms", at_most(15), None),
}


def summary_path(out: Path) -> Path:
    """The summary beside the results folder: docs/benchmarks.md for docs/benchmarks/."""
    return out.parent / f"{out.name}.md"


def histories(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every benchmark's records, in the summary's order (known ones first)."""
    found = {p.stem: read_history(p) for p in sorted((out / "history").glob("*.jsonl"))}
    order = [b for b in TITLES if b in found] + sorted(b for b in found if b not in TITLES)
    return {b: found[b] for b in order if found[b]}


def latest(records: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The latest complete run, and a partial run after it if there is one."""
    done = [r for r in records if r.get("complete", True)]
    last = done[-1] if done else records[-1]
    after = records[-1] if records[-1] is not last else None
    return last, after


def status(bench: str, record: dict[str, Any], fig: dict[str, Any]) -> str:
    target = TARGETS.get((bench, fig["key"]))
    if target is None:
        return ""
    value = fig.get("value")
    scale = (record.get("params") or {}).get("scale")
    if target.scale is not None and scale is not None and float(scale) != target.scale:
        return f"{target.text}: set for SF{target.scale:g}"
    if not isinstance(value, int | float):
        return target.text
    return f"{target.text}: {'met' if target.met(value) else 'not yet'}"


def section(bench: str, records: list[dict[str, Any]], folder: str) -> list[str]:
    record, partial = latest(records)
    m = record.get("machine") or {}
    box = ", ".join(
        p for p in (f"{m['cpus']} CPUs" if m.get("cpus") else None, f"{m['memory_gb']:g} GB" if m.get("memory_gb") else None) if p
    )
    sha = (record.get("commit") or "")[:7] or "unknown commit"
    lines = [
        f"## [{TITLES.get(bench, bench)}]({folder}/{bench}.md)",
        "",
        f"{record['date'][:16].replace('T', ' ')}, commit `{sha}`{' (uncommitted changes)' if record.get('dirty') else ''}"
        + (f", {box}" if box else "")
        + f": `{record['command']}`. {len(records)} run{'s' if len(records) != 1 else ''} recorded "
        f"since {records[0]['date'][:10]} ([history]({folder}/history/{bench}.jsonl)).",
    ]
    if partial is not None:
        lines[-1] += f" A later run ({partial['date'][:16].replace('T', ' ')}) is partial: its page shows it."
    figs = record.get("headline") or []
    if not figs:
        return [*lines, ""]
    targets = any((bench, f["key"]) in TARGETS for f in figs)
    lines += ["", "| measure | latest |" + (" target |" if targets else ""), "|---|---|" + ("---|" if targets else "")]
    for f in figs:
        value = show(f.get("value"), f.get("unit", ""), f.get("digits", 0))
        if f.get("note"):
            value += f" ({f['note']})"
        lines.append(f"| {f['label']} | {value} |" + (f" {status(bench, record, f)} |" if targets else ""))
    return [*lines, ""]


def render(out: Path = RESULTS) -> str:
    folder = out.name
    lines = [
        "# Benchmarks",
        "",
        f"The latest run of each benchmark under `bench/`, made by `python -m bench.summary` from the run "
        f"records in [{folder}/history/]({folder}/history/) (one JSON object per run: date, machine, command, "
        f"commit and every figure of its page). Each benchmark writes its record, its page in [{folder}/]({folder}/) "
        "and this summary when it runs; do not edit them by hand. Targets are DESIGN.md's (section 6), judged "
        "only at the scale they are set for. The machines are shared and noisy: read ratios, not single "
        f"milliseconds. What past measurements taught, and the dead ends: [{folder}/notes.md]({folder}/notes.md).",
        "",
    ]
    found = histories(out)
    for bench, records in found.items():
        lines += section(bench, records, folder)
    missing = [b for b in TITLES if b not in found]
    if missing:
        lines += ["No run recorded yet: " + ", ".join(f"`bench.{b}`" for b in missing) + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def write(out: Path = RESULTS) -> Path:
    path = summary_path(out)
    path.write_text(render(out))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=RESULTS, help="the results folder (its summary is written beside it)")
    p.add_argument("--check", action="store_true", help="only check that the summary is what the history gives")
    args = p.parse_args(argv)
    path = summary_path(args.out)
    if args.check:
        if not path.exists() or path.read_text() != render(args.out):
            print(f"{path} is not what {args.out / 'history'} gives: run python -m bench.summary", file=sys.stderr)
            return 1
        return 0
    print(f"wrote {write(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
