"""`ember run`'s capture of each action, and how a trace gets an entry's lineage back.

Eager entries are lineage stores (`ember.capture`, then `Lineage.save`); a write action
is made by its capture (`capture(write=...)`), so its store lists the files it wrote and
a later run's trace that reads them goes on into it. A lazy entry
stores no lineage, because `ember.infer` keeps none: it stores the rows the action
computed, and a trace re-runs the script (same file, same arguments) up to that action
and calls `ember.infer` on the DataFrame it reaches there. The re-run must compute the
same rows as the recorded run, else the data or the script changed and the trace is
refused.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections import Counter
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from rich.console import Console

import ember
from ember.cli.record import Action, Script, Stop
from ember.cli.runstore import OUTPUT_FILE, CliError, Entry, Run, write_run
from ember.plan.sources import OID
from ember.query.lineage import Lineage

if TYPE_CHECKING:  # inference (and capture) are imported on use: the store-only commands need neither
    from ember.infer.lineage import InferredLineage


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Recorder:
    """Captures every action of a run into the store, never breaking the script."""

    def __init__(self, folder: Path, run: Run, script: Script, err: Console):
        self.folder = folder
        self.run = run
        self.stem = Path(script.path).name
        self.err = err
        self._names: Counter[str] = Counter()

    def __call__(self, action: Action) -> None:
        base = f"{self.stem}-{action.line}-{action.name}"
        self._names[base] += 1
        name = base if self._names[base] == 1 else f"{base}-{self._names[base]}"
        entry = Entry(name, action.name, action.line, len(self.run.entries), "skipped", action.reason, target=action.target, time=now())
        if action.df is not None:
            start = time.perf_counter()
            try:
                with self.err.status(f"capturing {name} ({self.run.mode})…"):
                    self._capture(entry, action)
            except Exception as e:  # whatever capture meets, the script must go on
                entry.status, entry.reason = "skipped", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            entry.seconds = round(time.perf_counter() - start, 3)
        if entry.status == "skipped":
            self.err.print(f"[yellow]ember: not captured: {name}: {entry.reason}[/]", highlight=False)
        self.run.entries.append(entry)
        write_run(self.folder, self.run)

    def _capture(self, entry: Entry, action: Action) -> None:
        assert action.df is not None
        path = self.folder / entry.name
        lin: Lineage | InferredLineage
        if self.run.mode == "eager":  # in this thread: the script waits for it
            lin = ember.capture(action.df, strategy="inject", write=action.write)  # a write is made by the capture
            lin.save(str(path))
        else:
            lin = ember.infer(action.df)
            path.mkdir()
            pq.write_table(lin.output().drop_columns([OID]), path / OUTPUT_FILE)
        entry.status, entry.rows, entry.sources = self.run.mode, lin.output().num_rows, lin.sources


def open_entry(folder: Path, run: Run, entry: Entry, err: Console) -> Lineage | InferredLineage:
    """The lineage of an entry: loaded from its store, or (lazy) inferred on a re-run."""
    if entry.status == "skipped":
        raise CliError(f"entry {entry.name!r} was not captured: {entry.reason}")
    if entry.status == "eager":
        return ember.load(str(folder / entry.name), _session)  # Spark starts only to read counted sources' rows
    return _replay(folder, run, entry, err)


def _replay(folder: Path, run: Run, entry: Entry, err: Console) -> InferredLineage:
    script = Path(run.script)
    if not script.is_file():
        raise CliError(f"lazy entry {entry.name!r} re-runs {script}, which is gone")
    if sha256(script) != run.script_sha256:
        raise CliError(f"{script} changed since `ember run`; a lazy entry needs the same script: run it again")
    seen = 0

    def stop_at_entry(action: Action) -> None:
        nonlocal seen
        seen += 1
        if seen - 1 < entry.seq:
            return
        if (action.name, action.line) != (entry.action, entry.line) or action.df is None:
            raise Stop(CliError(f"the re-run of {script.name} took another path (reached {action.name} at line {action.line})"))
        try:
            raise Stop(ember.infer(action.df))
        except ember.EmberError as e:
            raise Stop(CliError(f"ember.infer on the re-run failed: {e}")) from None

    with err.status(f"re-running {script.name} up to line {entry.line} (lazy entry)…"), redirect_stdout(sys.stderr):
        try:  # the script's own prints go to stderr: stdout is the trace's
            outcome = Script(script, run.args).run(stop_at_entry)
        except Stop as stop:
            found = stop.found
        else:
            why = f" (it failed: {outcome.error!r})" if outcome.error else ""
            raise CliError(f"the re-run of {script.name} ended before reaching {entry.name}{why}")
    if isinstance(found, CliError):
        raise found
    lin: InferredLineage = found
    recorded = pq.read_table(folder / entry.name / OUTPUT_FILE)
    if not lin.output().drop_columns([OID]).equals(recorded):
        raise CliError(f"the re-run computed other rows for {entry.name} than `ember run` did: the data changed; run again")
    return lin


def _session() -> SparkSession:
    """The active SparkSession, else a quiet local one (Spark reads counted sources' rows)."""
    from ember.engines.spark.session import local_spark

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    try:
        return local_spark("ember")
    except Exception as e:  # pyspark's launcher errors share no base class worth naming
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CliError(f"showing rows of a CSV, JSON, XML, text or ORC source starts Spark, which failed ({first}); --ids-only needs none") from None
