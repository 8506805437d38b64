"""Where benchmark results go: one record per run, appended to a history file, a page
for the latest run, and the one-page summary, all written by `Run.write`.

The results folder (`--out`, docs/benchmarks/ by default) holds, per benchmark:

- `history/<bench>.jsonl`: one JSON object per run, oldest first (the schema below);
- `<bench>.md` (and a PNG where the benchmark draws one): the latest run's page, headed
  by its date, machine, command and commit;

and the summary of every benchmark's latest run is written beside the folder, as
`<folder>.md` (docs/benchmarks.md), by `bench.summary`.

A record: `bench`; `date` (ISO start time) and `seconds` (how long the run took);
`command` (the command line as typed); `commit` (HEAD) and `dirty` (uncommitted changes
to ember/, devkit/ or bench/ when it ran); `machine` (host, arch, cpus, cpu_model,
memory_gb, python, pyspark, java, load average at the start); `params` (the parsed
options); `headline` (the figures the summary shows: key, label, value, unit, digits,
note); `rows` (the per-query or per-case numbers the page shows, in seconds, bytes and
fractions as measured, not rounded); `extra` (other measured values, optional);
`complete` (false while a long run is still writing as it goes); `source` (for records
converted from the hand-kept pages, where they came from).

Nothing here imports Spark or ember: the summary and the tests read records without them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "benchmarks"

Row = dict[str, Any]


# --- headline figures -------------------------------------------------------------------


def figure(
    key: str, label: str, value: float | str | None, unit: str = "", digits: int = 0, note: str | None = None
) -> dict[str, Any]:
    """One headline figure of a run. `unit`: "%" (value is a fraction), "ms", "s", "x"
    (a ratio), "MB", or "" (a count or a text)."""
    if isinstance(value, float) and math.isfinite(value):
        value = float(f"{value:.6g}")  # what a summary can show, without float noise
    fig: dict[str, Any] = {"key": key, "label": label, "value": clean(value), "unit": unit, "digits": digits}
    if note:
        fig["note"] = note
    return fig


def show(value: float | str | None, unit: str = "", digits: int = 0) -> str:
    """A figure's value as the pages and the summary print it."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if unit == "%":
        return f"{value * 100:.{digits}f} %"
    if unit == "x":
        return f"{value:,.{digits}f}\u00d7"
    if unit:
        return f"{value:,.{digits}f} {unit}"
    return f"{value:,.{digits}f}"


def ms_text(value: float) -> str:
    """Milliseconds as a note prints them: a decimal under 10 ms."""
    return f"{value:.1f} ms" if abs(value) < 10 else f"{value:,.0f} ms"


def numbers(rows: Iterable[Row], key: str) -> list[float]:
    """The finite values of `key` over `rows` (absent, None and NaN left out)."""
    out = []
    for r in rows:
        v = r.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def median(rows: Iterable[Row], key: str) -> float | None:
    values = numbers(rows, key)
    return statistics.median(values) if values else None


def worst(rows: Sequence[Row], key: str, name: Callable[[Row], str] | None = None) -> tuple[float | None, str | None]:
    """The largest finite value of `key` and the row it comes from (`Q<n>` by default)."""
    found = [r for r in rows if numbers([r], key)]
    if not found:
        return None, None
    top = max(found, key=lambda r: float(r[key]))
    label = name(top) if name is not None else f"Q{top['n']}" if "n" in top else None
    return float(top[key]), label


def overhead_figures(rows: Sequence[Row], what: str) -> list[dict[str, Any]]:
    """The median and worst of the rows' "over" (a fraction over the plain job), each row
    named by its "job"; `what` says what is over what."""
    over, job = worst(rows, "over", lambda r: str(r["job"]))
    return [
        figure("over_median", f"{what}, median", median(rows, "over"), "%"),
        figure("over_worst", f"{what}, worst", over, "%", note=job),
    ]


# --- machine, commit, command -----------------------------------------------------------


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1).strip() if m else None


def _java_version() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return _first(r'version "([^"]+)"', done.stderr + done.stdout)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """Facts about the machine a run is on (Linux's /proc where it has them)."""
    info: dict[str, Any] = {"host": platform.node(), "arch": platform.machine(), "cpus": os.cpu_count()}
    try:
        info["cpu_model"] = _first(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text())
    except OSError:
        info["cpu_model"] = platform.processor() or None
    try:
        kb = _first(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text())
        info["memory_gb"] = round(int(kb) / 2**20, 1) if kb else None
    except OSError:
        info["memory_gb"] = None
    info |= {"python": platform.python_version(), "pyspark": _version("pyspark"), "java": _java_version()}
    with contextlib.suppress(OSError):
        info["load"] = [round(x, 2) for x in os.getloadavg()]
    return info


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit() -> tuple[str | None, bool]:
    """HEAD, and whether the code a benchmark measures has uncommitted changes."""
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "ember", "devkit", "bench")
    return _git("rev-parse", "HEAD"), bool(dirty)


def command_line(argv: Sequence[str] | None, module: str) -> str:
    """The command as typed (`sys.orig_argv`), or `python -m <module> <argv>` when a
    benchmark's `main(argv)` was called with its arguments."""
    if argv is None:
        words = list(getattr(sys, "orig_argv", sys.argv))
        if words and Path(words[0]).name.startswith("python"):
            words[0] = "python"
        return shlex.join(words)
    return shlex.join(["python", "-m", module, *argv])


def clean(value: Any) -> Any:
    """`value` as plain JSON: NaN and infinities as null, numpy scalars as numbers,
    paths as text, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, str | bytes):
        value = value.item()  # numpy scalar
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value


def params(args: argparse.Namespace | dict[str, Any] | None) -> dict[str, Any]:
    """A run's options, without where it wrote."""
    found = vars(args) if isinstance(args, argparse.Namespace) else dict(args or {})
    return clean({k: v for k, v in found.items() if k not in ("out",)})


# --- writing ------------------------------------------------------------------------------


def history_path(out: Path, bench: str) -> Path:
    return out / "history" / f"{bench}.jsonl"


def read_history(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def save_record(path: Path, record: dict[str, Any]) -> None:
    """Appends `record`, or replaces the last one where it is the same run written
    again (a long run writes its record as it goes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.exists() else []
    if lines:
        last = json.loads(lines[-1])
        if (last.get("date"), last.get("command")) == (record["date"], record["command"]):
            lines.pop()
    lines.append(dump(record))
    path.write_text("\n".join(lines) + "\n")


def heading(record: dict[str, Any]) -> list[str]:
    """The lines that head a run's page: when, on what, how, at which commit."""
    m = record.get("machine") or {}
    when = record["date"][:16].replace("T", " ")
    took = record.get("seconds")
    if took:
        when += f" ({took / 60:.0f} min)" if took >= 90 else f" ({took:.0f} s)"
    box = ", ".join(
        part
        for part in (
            m.get("host"),
            m.get("arch"),
            f"{m['cpus']} CPUs" if m.get("cpus") else None,
            m.get("cpu_model"),
            f"{m['memory_gb']:g} GB" if m.get("memory_gb") else None,
        )
        if part
    )
    soft = ", ".join(
        f"{name} {m[key]}" for name, key in (("Python", "python"), ("PySpark", "pyspark"), ("Java", "java")) if m.get(key)
    )
    if m.get("load"):
        soft += f"; load average {' / '.join(f'{x:.1f}' for x in m['load'])} at the start"
    sha = record.get("commit")
    code = f"`{sha[:7]}`" + (" with uncommitted changes" if record.get("dirty") else "") if sha else "unknown"
    lines = [
        f"- Run: {when}" + ("" if record.get("complete", True) else " — partial, still running or stopped"),
        f"- Machine: {box}" + (f"; {soft}" if soft else ""),
        f"- Command: `{record['command']}`",
        f"- Commit: {code}",
    ]
    if record.get("source"):
        lines.append(f"- Converted: {record['source']}")
    return lines


def page(record: dict[str, Any], title: str, body: Sequence[str]) -> str:
    return "\n".join([f"# {title}", "", *heading(record), "", *body]).rstrip() + "\n"


class Run:
    """One benchmark run: started when made (the date, command, machine and commit it
    records), written by `write`, as often as the benchmark likes (a long run writes as
    it goes; each write replaces the run's page and its record)."""

    def __init__(self, bench: str, out: Path | None = None, argv: Sequence[str] | None = None) -> None:
        self.bench = bench
        self.out = Path(out) if out is not None else RESULTS
        self.started = time.time()
        self.date = datetime.now().astimezone().isoformat(timespec="seconds")
        self.command = command_line(argv, f"bench.{bench}")
        self.commit, self.dirty = commit()
        self.machine = machine()

    def record(
        self,
        rows: Sequence[Row],
        headline: Sequence[dict[str, Any]],
        args: argparse.Namespace | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        final: bool = True,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "bench": self.bench,
            "date": self.date,
            "seconds": round(time.time() - self.started, 1),
            "command": self.command,
            "commit": self.commit,
            "dirty": self.dirty,
            "machine": self.machine,
            "params": params(args),
            "headline": clean(list(headline)),
            "rows": clean(list(rows)),
        }
        if extra:
            record["extra"] = clean(extra)
        if not final:
            record["complete"] = False
        return record

    def write(
        self,
        title: str,
        body: Sequence[str],
        rows: Sequence[Row],
        headline: Sequence[dict[str, Any]],
        args: argparse.Namespace | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        png: Any = None,
        final: bool = True,
    ) -> Path:
        """Writes the run's page (`<bench>.md`, and `png`, a matplotlib figure, as
        `<bench>.png`), its record in `history/<bench>.jsonl`, and the summary beside
        the results folder. Returns the page's path."""
        from bench import summary

        record = self.record(rows, headline, args, extra, final)
        self.out.mkdir(parents=True, exist_ok=True)
        save_record(history_path(self.out, self.bench), record)
        target = self.out / f"{self.bench}.md"
        target.write_text(page(record, title, body))
        if png is not None:
            png.savefig(self.out / f"{self.bench}.png", dpi=110)
        summary.write(self.out)
        return target
