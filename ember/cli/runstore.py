"""The folder `ember run` writes: a run manifest and one lineage store per captured action.

    DIR/ember-run.json      the script, its arguments, the mode, and one record per action
    DIR/<entry>/            an ember lineage store (`ember.load`) for an eager entry; for a
                            lazy entry only `output.parquet`, the rows the action computed

The manifest is rewritten (atomically) after every action, so a script that fails half
way leaves the entries captured before the failure.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ember.errors import EmberError

RUN_FILE = "ember-run.json"
RUN_FORMAT = "ember-run"
RUN_VERSION = 1
OUTPUT_FILE = "output.parquet"  # the output rows of a lazy entry (an eager entry's store has its own)


class CliError(EmberError):
    """A mistake in what the user asked for: printed as one line, exit code 1."""


@dataclass
class Entry:
    """One DataFrame (or RDD) action the script performed."""

    name: str  # `job.py-12-collect`, `-2`, `-3` ... for repeats of the same line
    action: str  # collect, show, write.parquet, rdd.count ...
    line: int  # the script line that triggered it
    seq: int  # its position among the run's actions (a lazy trace re-runs up to it)
    status: str  # "eager" (a store), "lazy" (re-run on trace) or "skipped" (see `reason`)
    reason: str = ""
    rows: int | None = None  # output rows of the captured DataFrame
    sources: list[str] = field(default_factory=list)
    target: str | None = None  # what a write action wrote to
    seconds: float = 0.0  # time ember spent capturing it (the action's own time excluded)
    time: str = ""  # when it was captured (ISO 8601, UTC)


@dataclass
class Run:
    """The manifest of a run store."""

    script: str
    args: list[str]
    mode: str
    script_sha256: str
    run_id: str
    started: str
    status: str = "running"  # running, ok, failed
    entries: list[Entry] = field(default_factory=list)

    def entry(self, name: str) -> Entry:
        for e in self.entries:
            if e.name == name:
                return e
        known = ", ".join(e.name for e in self.entries) or "none"
        raise CliError(f"no entry {name!r} in this store; entries: {known}")


def read_run(folder: Path) -> Run:
    """The manifest of the run store at `folder`."""
    path = folder / RUN_FILE
    if not folder.is_dir():
        raise CliError(f"no store at {folder} (run `ember run SCRIPT --store {folder}` first)")
    if not path.is_file():
        raise CliError(f"{folder} is not an ember run store (no {RUN_FILE})")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CliError(f"cannot read {path}: {e}") from None
    if doc.get("format") != RUN_FORMAT:
        raise CliError(f"{path} is not an ember run manifest")
    if doc.get("version", 0) > RUN_VERSION:
        raise CliError(f"{path} has format version {doc['version']}; this ember reads up to {RUN_VERSION}: upgrade ember")
    entries = [Entry(**e) for e in doc.pop("entries")]
    doc.pop("format"), doc.pop("version")
    return Run(**doc, entries=entries)


def write_run(folder: Path, run: Run) -> None:
    """Writes the manifest atomically (a temporary file renamed over the old one)."""
    doc: dict[str, Any] = {"format": RUN_FORMAT, "version": RUN_VERSION, **asdict(run)}
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ember-run-")
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out, indent=1)
    os.replace(tmp, folder / RUN_FILE)


def fresh_store(folder: Path) -> None:
    """Makes `folder` an empty run store: a new folder, or an old run store replaced.

    Any other non-empty folder is refused, so a typo cannot delete someone's data.
    """
    if folder.exists() and not folder.is_dir():
        raise CliError(f"--store {folder} is a file, not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        if not (folder / RUN_FILE).is_file():
            raise CliError(f"--store {folder} exists and is not an ember run store; choose a new folder")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)


def folder_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 if it does not exist)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def store_manifest(folder: Path, entry: Entry) -> dict[str, Any]:
    """The lineage store manifest of an eager entry (docs/design/store.md)."""
    try:
        doc: dict[str, Any] = json.loads((folder / entry.name / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        raise CliError(f"entry {entry.name!r} has no readable lineage store: {e}") from None
    return doc
