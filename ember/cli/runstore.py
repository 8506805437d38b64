"""The folder `ember run` writes: a run manifest and one lineage store per captured action.

    DIR/ember-run.json      the script, its arguments, the mode, and one record per action
    DIR/<entry>/            an ember lineage store (`ember.load`) for an eager entry; for a
                            lazy entry only `output.parquet`, the rows the action computed

The manifest is rewritten (atomically) after every action, so a script that fails half
way leaves the entries captured before the failure. It carries a CRC-32 of its content, and
reading checks it and every field's type: a damaged manifest is refused in one line, never
read as other entries (another script, other arguments, another action to re-run).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zlib
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from ember.errors import EmberError

RUN_FILE = "ember-run.json"
RUN_FORMAT = "ember-run"
RUN_VERSION = 2  # 2: a checksum
CHECKSUM = "checksum"  # the manifest's CRC-32 over its other fields (`_checksum`)
STATUSES = ("eager", "lazy", "skipped")
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
    except (OSError, ValueError, RecursionError) as e:
        raise CliError(f"cannot read {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if not isinstance(doc, dict) or doc.get("format") != RUN_FORMAT:
        raise CliError(f"{path} is not an ember run manifest")
    version = doc.get("version")
    if isinstance(version, int) and version > RUN_VERSION:
        raise CliError(f"{path} has format version {version}; this ember reads up to {RUN_VERSION}: upgrade ember")
    if CHECKSUM in doc and doc[CHECKSUM] != _checksum(doc):
        raise CliError(f"{path} is damaged (its checksum is not the one saved)")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1 or (version >= 2 and CHECKSUM not in doc):
        raise CliError(f"{path} is damaged (format version {version!r}{'' if CHECKSUM in doc else ', no checksum'})")
    raw = doc.get("entries")
    if not isinstance(raw, list):
        raise CliError(f"{path} is damaged (no list of entries)")
    entries = [_entry(e, path) for e in raw]
    if len({e.name for e in entries}) != len(entries):
        raise CliError(f"{path} is damaged (two entries have one name)")
    rest = {k: v for k, v in doc.items() if k not in ("format", "version", CHECKSUM, "entries")}
    return Run(**_record(Run, rest, path, skip=("entries",)), entries=entries)


def _checksum(doc: dict[str, Any]) -> int:
    """The CRC-32 of a run manifest's fields other than its checksum, as canonical JSON."""
    rest = {k: v for k, v in doc.items() if k != CHECKSUM}
    return zlib.crc32(json.dumps(json.loads(json.dumps(rest)), sort_keys=True, separators=(",", ":")).encode())


def _record(cls: type[Any], doc: object, path: Path, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of an `Entry` or `Run` from its manifest record, each of the type the
    class declares (a damaged manifest must not read as other entries)."""
    if not isinstance(doc, dict):
        raise CliError(f"{path} is damaged (a record is {type(doc).__name__}, not an object)")
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if f.name not in skip}
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise CliError(f"{path} is damaged (unknown field {unknown[0]!r})")
    for name, f in known.items():
        if name not in doc and f.default is MISSING and f.default_factory is MISSING:
            raise CliError(f"{path} is damaged (no field {name!r})")
        if name in doc and not _typed(doc[name], hints[name]):
            raise CliError(f"{path} is damaged (field {name!r} is {doc[name]!r})")
    return doc


def _entry(doc: object, path: Path) -> Entry:
    entry = Entry(**_record(Entry, doc, path))
    if entry.status not in STATUSES or not _plain_name(entry.name):
        raise CliError(f"{path} is damaged (entry {entry.name!r}, status {entry.status!r})")
    return entry


def _typed(value: object, hint: Any) -> bool:
    """Whether a JSON value has the type a field declares (str, int, float, list[str], X | None)."""
    text = str(hint)
    if value is None:
        return "None" in text
    if isinstance(value, bool):
        return False
    if hint is str or text.startswith("str"):
        return isinstance(value, str)
    if hint is int or text.startswith("int"):
        return isinstance(value, int)
    if hint is float:
        return isinstance(value, int | float)
    if text.startswith("list"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False


def _plain_name(name: str) -> bool:
    """An entry's folder name: one path component, no way out of the store."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\x00")


def write_run(folder: Path, run: Run) -> None:
    """Writes the manifest atomically (a temporary file renamed over the old one)."""
    doc: dict[str, Any] = {"format": RUN_FORMAT, "version": RUN_VERSION, **asdict(run)}
    doc[CHECKSUM] = _checksum(doc)
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
