"""Links between jobs: the files one job wrote are the rows another read.

A capture that writes (`capture(write=...)`) records each file it wrote and which output
rows it holds (`Lineage.written`). A later job's source lists the files it read, each
with its first rid. A file is the same file in both when its path, size and modification
time agree (its identity): then the source's rids `[offset, offset + rows)` are the
writer's output rows `[written.offset, ...)`, in order. Identity, not the folder, is what
links: an append adds files of another job beside the earlier ones, which keep their own
links; an overwrite deletes the files it replaces, and with them their links.

Writers are found among the lineages given (`through=`), the lineages of this process
that wrote files, and catalogs: folders of saved stores and `ember run` folders, named by
`ember.catalog(path)`, `through=path` or the `EMBER_CATALOG` setting.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import numpy as np

from ember.errors import EmberError
from ember.plan.sources import Source, SourceFile, local_path, saved_file
from ember.store.files import MANIFEST

if TYPE_CHECKING:
    from ember.query.lineage import Lineage

FileId = tuple[str, int, int]  # (path, size, modification time in ns)
CATALOG = "EMBER_CATALOG"  # environment: folders of stores searched for writers (os.pathsep between)
_DEPTH = 3  # how deep under a catalog's folder stores are looked for (runs' entries are two down)


def file_id(f: SourceFile) -> FileId:
    """A file's identity: its path (local files unescaped), size and modification time.

    >>> file_id(SourceFile("file:/d/a%20b.parquet", 10, 7, 3, 0))
    ('/d/a b.parquet', 10, 7)
    """
    where = str(local_path(f.uri)) if urlparse(f.uri).scheme in ("", "file") else f.uri
    return where, f.size, f.mtime_ns


# The files written by this process's lineages (captured or loaded): a writer is found
# with no `through=` while it is alive.
_process: dict[FileId, tuple[weakref.ref[Lineage], SourceFile]] = {}


def remember(lineage: Lineage) -> None:
    """Notes the files `lineage` wrote, so later traces in this process find it (until it
    is gone: then its entries go too)."""
    if not lineage.written:
        return
    ref = weakref.ref(lineage)
    keys = [file_id(f) for f in lineage.written]
    for key, f in zip(keys, lineage.written, strict=True):
        _process[key] = (ref, f)
    weakref.finalize(lineage, _forget, ref, keys)


def _forget(ref: weakref.ref[Lineage], keys: list[FileId]) -> None:
    for key in keys:
        if key in _process and _process[key][0] is ref:
            del _process[key]


class Catalog:
    """The lineage stores under a folder, by the files their jobs wrote; each is opened
    (`ember.load`) when a trace first reaches it."""

    def __init__(self, root: str | os.PathLike[str], load: Callable[[str], Lineage]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise EmberError(f"catalog {str(root)!r}: no such folder")
        self._load = load
        self._opened: dict[str, Lineage] = {}
        self._files: dict[FileId, tuple[str, SourceFile]] = {}
        for store in _stores(self.root, _DEPTH):
            for f in _written(store):
                self._files[file_id(f)] = (str(store), f)

    @property
    def stores(self) -> list[str]:
        """The stores whose jobs wrote files."""
        return sorted({s for s, _ in self._files.values()})

    def writer(self, key: FileId) -> tuple[Lineage, SourceFile] | None:
        found = self._files.get(key)
        if found is None:
            return None
        store, f = found
        if store not in self._opened:
            self._opened[store] = self._load(store)
        return self._opened[store], f

    def __repr__(self) -> str:
        return f"<ember catalog {self.root}: {len(self.stores)} stores that wrote {len(self._files)} files>"


def _stores(folder: Path, depth: int) -> Iterable[Path]:
    """Folders under `folder` holding a store's manifest (not looked into further)."""
    if (folder / MANIFEST).is_file():
        yield folder
        return
    if depth == 0:
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    except OSError:
        return
    for child in children:
        yield from _stores(child, depth - 1)


def _written(store: Path) -> list[SourceFile]:
    """The files a store's job wrote, from its manifest alone (`ember.load` checks the rest)."""
    try:
        manifest = json.loads((store / MANIFEST).read_text())
        return [saved_file(f) for f in manifest.get("info", {}).get("written", [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return []  # not a store this ember reads: `ember.load` would say why, if asked


@dataclass(frozen=True)
class Link:
    """Rows of a source that an upstream lineage wrote: the source's rids `down[i] + k`
    are that lineage's oids `up[i] + k`, for `k < rows[i]`."""

    upstream: Lineage
    down: np.ndarray
    up: np.ndarray
    rows: np.ndarray

    def oids(self, rids: np.ndarray) -> np.ndarray:
        """The upstream oids of those of `rids` this link covers."""
        return _shift(rids, self.down, self.up, self.rows)

    def rids(self, oids: np.ndarray) -> np.ndarray:
        """The source rids of those upstream `oids` this link covers."""
        order = np.argsort(self.up, kind="stable")
        return _shift(oids, self.up[order], self.down[order], self.rows[order])


def _shift(ids: np.ndarray, starts: np.ndarray, to: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`ids` inside runs `[starts[i], starts[i] + rows[i])` moved to `to[i] + (id - starts[i])`
    (runs sorted by start, not overlapping), sorted; ids in no run are left out.

    >>> _shift(np.array([0, 4, 5, 9]), np.array([0, 4]), np.array([100, 10]), np.array([2, 2])).tolist()
    [10, 11, 100]
    """
    ids = np.asarray(ids, np.int64)
    at = np.searchsorted(starts, ids, side="right") - 1
    inside = (at >= 0) & (ids < starts[np.maximum(at, 0)] + rows[np.maximum(at, 0)])
    at, ids = at[inside], ids[inside]
    return np.unique(to[at] + (ids - starts[at]))


class Links:
    """Finds the writers of a lineage's sources: among the lineages given, this process's,
    and the catalogs'. `given`: whether the caller named any (then finding none says so)."""

    def __init__(self, lineages: Iterable[Lineage], catalogs: Iterable[Catalog], given: bool) -> None:
        self._files: dict[FileId, tuple[Lineage, SourceFile]] = {}
        for lin in lineages:
            for f in lin.written:
                self._files[file_id(f)] = (lin, f)
        self._catalogs = list(catalogs)
        self.given = given
        self._of: dict[tuple[int, str], list[Link]] = {}
        self.found = False  # whether any source was linked

    def __call__(self, owner: Lineage, src: Source) -> list[Link]:
        """The links of `src` (a source of `owner`), by upstream lineage."""
        key = (id(owner), src.key)
        if key not in self._of:
            self._of[key] = self._find(owner, src)
            self.found = self.found or bool(self._of[key])
        return self._of[key]

    def _find(self, owner: Lineage, src: Source) -> list[Link]:
        runs: dict[int, tuple[Lineage, list[tuple[int, int, int]]]] = {}
        for f in src.files:
            hit = self._writer(file_id(f))
            if hit is None or hit[0] is owner:
                continue
            lin, written = hit
            if written.rows != f.rows:
                raise EmberError(
                    f"{f.uri}: {lin} wrote {written.rows} rows to this file, and this job read {f.rows} from it"
                )
            runs.setdefault(id(lin), (lin, []))[1].append((f.offset, written.offset, f.rows))
        links = []
        for lin, spans in runs.values():
            down, up, rows = (np.array(c, np.int64) for c in zip(*sorted(spans), strict=True))
            links.append(Link(lin, down, up, rows))
        return links

    def _writer(self, key: FileId) -> tuple[Lineage, SourceFile] | None:
        if key in self._files:
            return self._files[key]
        mine = _process.get(key)
        if mine is not None and (lin := mine[0]()) is not None:
            return lin, mine[1]
        for catalog in self._catalogs:
            found = catalog.writer(key)
            if found is not None:
                return found
        return None


def catalog_folders() -> list[str]:
    """The folders `EMBER_CATALOG` names (os.pathsep between them)."""
    return [p for p in os.environ.get(CATALOG, "").split(os.pathsep) if p]
