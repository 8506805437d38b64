"""The lineage store on disk: a manifest and Parquet files, written atomically, read lazily.

A store is a folder:

    manifest.json                 format version, plan, sources (files, sizes, mtimes),
                                  levels and their columns, every file's size
    output.parquet                the job's output rows
    index/<level>.<column>.parquet   one encoded column each (`store.columns`)
    index/<level>/<part>.<column>.parquet   a level the executors wrote, a part per task
                                  (`store.spark_index`)
    sources/<n>.parquet           rows of in-memory sources (nothing could fetch them later)
    sources/<n>.keys.parquet      a keyed source's keys, in rid order
    kept/<n>.parquet              a copy of the rows the lineage reaches in Parquet source n,
                                  when they are a small share of it (`store.kept`)
    groups/<n>.parquet            groupings made at capture (`query.grouped`): per output
    groups/<n>.rids.parquet       row, its groups' columns and rid ranges; their rids

It is written into a temporary sibling folder and renamed into place, so a crash
mid-save leaves nothing that loads. Reading checks the format version, the manifest's own
checksum, that every file the manifest names is there with its recorded size, row count
and CRC-32 (each file's whole bytes, checked when the file is first opened: damage in a
Parquet footer or page header, which Parquet's page checksums do not cover, could
otherwise read as other rids), and Parquet's page checksums. Plain columns are read a row
group at a time, only the groups a trace touches; run-encoded columns are small and read
whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ember.arrow import numbers
from ember.errors import StoreError, first_line
from ember.fetch.rows import source_keys
from ember.plan.sources import KEYED, Source, saved_file
from ember.store.columns import IntColumn, Runs, Segmented, concatenated, isin_sorted
from ember.store.groupings import Grouping
from ember.store.index import Level, LineageIndex, Ranges
from ember.store.kept import ROW_GROUP as KEPT_ROW_GROUP
from ember.store.kept import KeptRows
from ember.store.parts import Parts, tiled

FORMAT = "ember-lineage-store"
VERSION = 3  # 2: columns made of parts (levels the executors wrote); 3: checksums
MANIFEST = "manifest.json"
CHECKSUM = "checksum"  # the manifest's own CRC-32, over its other fields (`manifest_checksum`)
ROW_GROUP = 1 << 16  # rows per row group of a plain column: the unit a trace reads
START, END = "__ember_start", "__ember_end"  # a grouping row's rid range
PARQUET = {"compression": "zstd", "write_page_checksum": True, "write_statistics": True}


@dataclass(frozen=True)
class Stored:
    """Everything a Lineage is made of, as the store holds it."""

    output: pa.Table
    index: LineageIndex
    sources: tuple[Source, ...]
    info: dict[str, Any] = field(default_factory=dict)  # mode, plan, written files, text sources
    groupings: tuple[Grouping, ...] = ()
    kept: dict[str, pa.Table] = field(default_factory=dict)  # source key → rows copied into the store


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of a local folder or of any URI pyarrow can reach."""
    if "://" in path:
        fs, inner = pafs.FileSystem.from_uri(path)
        return fs, inner.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(path).rstrip("/")


def write_parquet(fs: pafs.FileSystem, path: str, table: pa.Table, **options: Any) -> int:
    """Writes one store file (zstd, page checksums, statistics); its size in bytes."""
    pq.write_table(table, path, filesystem=fs, **PARQUET, **options)
    return int(fs.get_file_info(path).size)


def write_column(fs: pafs.FileSystem, root: str, name: str, col: IntColumn) -> tuple[dict[str, Any], int]:
    """An encoded column written as `root/name`: its manifest entry and its size in bytes."""
    if isinstance(col, Runs):
        data = pa.table({"start": col.start, "base": col.base, "step": col.step})
        return {"file": name, "encoding": "runs", "rows": col.size}, write_parquet(fs, f"{root}/{name}", data)
    values = pa.table({"v": col.decode()})
    size = write_parquet(
        fs, f"{root}/{name}", values, row_group_size=ROW_GROUP, use_dictionary=False,
        column_encoding={"v": "DELTA_BINARY_PACKED"},
    )
    return {"file": name, "encoding": "plain", "rows": col.size}, size


def open_column(
    fs: pafs.FileSystem, root: str, meta: dict[str, Any], sizes: dict[str, int], sums: dict[str, int] | None = None
) -> IntColumn:
    """A column as its manifest entry describes it, checked against it (and each file against
    its CRC-32 in `sums`, when it is first opened); plain columns and parts are read lazily."""
    if meta["encoding"] == "parts":
        parts = meta["parts"]
        if not tiled(parts, meta["rows"]):
            raise StoreError(f"{root}: the parts of a column do not cover its {meta['rows']} rows in order")
        nbytes = sum(sizes[p["file"]] for p in parts)
        return Parts(parts, meta["rows"], lambda part: open_column(fs, root, part, sizes, sums), nbytes, (fs, root))
    name = meta["file"]
    if sums is not None:
        check_crc(fs, root, name, sums)
    with _damage(root, name):
        pf = pq.ParquetFile(fs.open_input_file(f"{root}/{name}"), page_checksum_verification=True)
    if meta["encoding"] == "runs":
        with _damage(root, name):
            t = pf.read()
        start, base, step = (numbers(t.column(c)) for c in ("start", "base", "step"))
        runs = Runs(start, base, step, meta["rows"])
        if runs.start.size and (runs.start[0] != 0 or runs.start[-1] >= runs.length):
            raise StoreError(f"{root}: {name} does not cover the {meta['rows']} rows the manifest says")
        return runs
    if meta["encoding"] == "plain":
        if pf.metadata.num_rows != meta["rows"]:
            raise StoreError(f"{root}: {name} holds {pf.metadata.num_rows} rows, the manifest says {meta['rows']}")
        return StoredPlain(pf, sizes.get(name, 0), lambda: _damage(root, name))
    raise StoreError(f"{root}: {name} has an unknown encoding {meta['encoding']!r}")


def crc32(fs: pafs.FileSystem, path: str) -> int:
    """The CRC-32 of a file's bytes, read in blocks."""
    crc = 0
    with fs.open_input_stream(path) as f:
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def check_crc(fs: pafs.FileSystem, root: str, name: str, sums: dict[str, int]) -> None:
    """Raises `StoreError` unless store file `name` has the CRC-32 the manifest recorded."""
    with _damage(root, name):
        found = crc32(fs, f"{root}/{name}")
    if name not in sums:
        raise StoreError(f"{root}: the manifest records no checksum for {name}")
    if found != sums[name]:
        raise StoreError(f"{root}: {name} is damaged (its checksum is not the one saved)")


def manifest_checksum(manifest: dict[str, Any]) -> int:
    """The CRC-32 of a manifest's fields other than its checksum, as canonical JSON."""
    rest = {k: v for k, v in manifest.items() if k != CHECKSUM}
    return zlib.crc32(json.dumps(json.loads(json.dumps(rest)), sort_keys=True, separators=(",", ":")).encode())


def column_files(meta: dict[str, Any]) -> list[str]:
    """The files a column entry names."""
    return [p["file"] for p in meta["parts"]] if meta["encoding"] == "parts" else [meta["file"]]


def _transfer(src_fs: pafs.FileSystem, src: str, dest_fs: pafs.FileSystem, dest: str) -> int:
    """Puts a file into a store being written: a hard link where both are on one local
    disk (instant, and the capture's own file stays for it), else a copy. Its size."""
    if isinstance(src_fs, pafs.LocalFileSystem) and isinstance(dest_fs, pafs.LocalFileSystem):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        try:
            os.link(src, dest)
        except OSError:
            shutil.copyfile(src, dest)
        return os.path.getsize(dest)
    dest_fs.create_dir(dest.rsplit("/", 1)[0])
    pafs.copy_files(src, dest, source_filesystem=src_fs, destination_filesystem=dest_fs)
    return int(dest_fs.get_file_info(dest).size)


# --- writing ------------------------------------------------------------------


@contextmanager
def atomic_store(path: str, overwrite: bool, folders: tuple[str, ...]) -> Iterator[tuple[pafs.FileSystem, str]]:
    """Yields a temporary folder next to `path` to write a store into; on success it takes
    `path`'s place by renames (the old store, if any, is moved aside first, then deleted),
    on failure it is deleted, so a crash never leaves a half-written store under `path`.
    A process killed between the two renames leaves the old store aside: the next load or
    save of `path` puts it back (`restore_replaced`)."""
    fs, root = filesystem(path)
    restore_replaced(fs, root)
    exists = fs.get_file_info(root).type != pafs.FileType.NotFound
    if exists and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite=True to replace it")
    tmp = f"{root}.ember-tmp-{uuid.uuid4().hex[:8]}"
    for folder in folders:
        fs.create_dir(f"{tmp}/{folder}")
    try:
        yield fs, tmp
        if exists:
            old = f"{root}{_ASIDE}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"  # names sort by age
            fs.move(root, old)
            fs.move(tmp, root)
            fs.delete_dir(old)
        else:
            fs.move(tmp, root)
    except BaseException:
        fs.delete_dir(tmp)
        raise


_ASIDE = ".ember-old-"  # the suffix of a store moved aside while its replacement takes its place


def restore_replaced(fs: pafs.FileSystem, root: str) -> None:
    """Where no store is at `root` but one was moved aside by a save that never finished
    (`atomic_store`), moves it back: a killed save leaves the previous store, not none.
    A folder moved aside while `root` holds a store is one a killed save had already
    replaced; it stays for the user to delete (it could be another process's save under way)."""
    if fs.get_file_info(root).type != pafs.FileType.NotFound:
        return
    parent, _, name = root.rpartition("/")
    try:
        found = fs.get_file_info(pafs.FileSelector(parent or "/", allow_not_found=True))
    except OSError:  # a parent ember may not list: nothing to restore that it could find
        return
    aside = [i.path for i in found if i.base_name.startswith(name + _ASIDE) and i.type == pafs.FileType.Directory]
    if aside:  # the newest: older ones were left by saves killed after their store took its place
        with contextlib.suppress(OSError):  # another process restored it first, or saved anew
            fs.move(max(aside), root)


def write_store(path: str, stored: Stored, overwrite: bool = False) -> None:
    with atomic_store(path, overwrite, ("index", "sources", "groups", "kept")) as (fs, tmp):
        manifest = _Writer(fs, tmp).manifest(stored)
        with fs.open_output_stream(f"{tmp}/{MANIFEST}") as out:
            out.write(json.dumps(manifest, indent=1).encode())


class _Writer:
    def __init__(self, fs: pafs.FileSystem, root: str):
        self.fs, self.root = fs, root
        self.files: dict[str, int] = {}

    def table(self, name: str, table: pa.Table, **options: Any) -> str:
        self.files[name] = write_parquet(self.fs, f"{self.root}/{name}", table, **options)
        return name

    def column(self, name: str, col: IntColumn) -> dict[str, Any]:
        if isinstance(col, Parts):
            return self.parts(col)
        meta, self.files[name] = write_column(self.fs, self.root, name, col)
        return meta

    def parts(self, col: Parts) -> dict[str, Any]:
        """A column the executors wrote: its part files are linked (or copied) into the store."""
        fs, root = col.folder
        for m in col.metas:
            self.files[m["file"]] = _transfer(fs, f"{root}/{m['file']}", self.fs, f"{self.root}/{m['file']}")
        return {"encoding": "parts", "rows": col.size, "parts": col.metas}

    def checksums(self) -> dict[str, int]:
        """Each file's CRC-32, read back once it is written (the bytes a load will check)."""
        return {name: crc32(self.fs, f"{self.root}/{name}") for name in self.files}

    def level(self, name: str, level: Level) -> dict[str, Any]:
        return {
            "name": name,
            "why": level.why,
            "rows": level.rows,
            "rids": [
                {"source": key, "column": self.column(f"index/{name}.rid{i}.parquet", col)}
                for i, (key, col) in enumerate(level.rids)
            ],
            "refs": [
                {
                    "table": r.table,
                    "start": self.column(f"index/{name}.ref{i}.start.parquet", r.start),
                    "end": self.column(f"index/{name}.ref{i}.end.parquet", r.end),
                }
                for i, r in enumerate(level.refs)
            ],
        }

    def source(self, n: int, source: Source, kept: pa.Table | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "key": source.key,
            "name": source.name,
            "kind": source.kind,
            "rows": source.rows,
            "files": [asdict(f) for f in source.files],
            "partitioning": [list(column) for column in source.partitioning],
            "columns": list(source.columns),
        }
        if source.remote:  # its facts are its server's, read through a session of it
            entry["remote"] = True
            entry["options"] = [list(option) for option in source.options]
        if source.kind == "memory":
            entry["data"] = self.table(f"sources/{n}.parquet", source.data)
        if source.kind == KEYED:
            entry["row_key"] = list(source.row_key)
            entry["data"] = self.table(f"sources/{n}.keys.parquet", source_keys(source))
        if kept is not None:
            entry["kept"] = {"file": self.table(f"kept/{n}.parquet", kept, row_group_size=KEPT_ROW_GROUP), "rows": kept.num_rows}
        return entry

    def grouping(self, n: int, g: Grouping) -> dict[str, Any]:
        table = g.result.append_column(START, pa.array(g.start)).append_column(END, pa.array(g.end))
        return {
            "source": g.source,
            "query": g.query,
            "column": g.column,
            "file": self.table(f"groups/{n}.parquet", table),
            "rows": table.num_rows,
            "rids": self.column(f"groups/{n}.rids.parquet", g.rids),
        }

    def manifest(self, stored: Stored) -> dict[str, Any]:
        from ember.version import __version__

        output = self.table("output.parquet", stored.output)
        levels = [self.level(f"t{i}", lv) for i, lv in enumerate(stored.index.tables)]
        out_level = self.level("output", stored.index.output)
        sources = [self.source(n, s, stored.kept.get(s.key)) for n, s in enumerate(stored.sources)]
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "ember": __version__,
            "output": {"file": output, "rows": stored.output.num_rows, "schema": _schema(stored.output.schema)},
            "sources": sources,
            "levels": levels,
            "output_level": out_level,
            "groupings": [self.grouping(n, g) for n, g in enumerate(stored.groupings)],
            "info": stored.info,
            "files": self.files,
            "checksums": self.checksums(),
        }
        return {**manifest, CHECKSUM: manifest_checksum(manifest)}


def _schema(schema: pa.Schema) -> list[dict[str, str]]:
    return [{"name": f.name, "type": str(f.type)} for f in schema]


# --- reading ------------------------------------------------------------------


def read_store(path: str) -> Stored:
    """The store at `path`, checked against its manifest; `StoreError` for any damage."""
    try:
        fs, root = filesystem(path)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise StoreError(f"{path!r} is not a path ember can read a store from ({first_line(e)})") from None
    with _damage(path, MANIFEST):
        manifest = read_manifest(fs, root, path)
    if CHECKSUM not in manifest and manifest["version"] >= 3:
        raise StoreError(f"{path}: {MANIFEST} is damaged (it has no checksum)")
    try:
        return _read(fs, root, path, manifest)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # a manifest of an older ember, damaged
        raise StoreError(f"{path}: {MANIFEST} is damaged ({type(e).__name__}: {first_line(e)})") from None


def _read(fs: pafs.FileSystem, root: str, path: str, manifest: dict[str, Any]) -> Stored:
    _check_files(fs, root, manifest, path)
    sums = manifest.get("checksums")  # None in a store saved before checksums
    reader = _Reader(fs, root, manifest["files"], sums)
    name = manifest["output"]["file"]
    if sums is not None:
        check_crc(fs, root, name, sums)
    with _damage(path, name):
        output = pq.ParquetFile(fs.open_input_file(f"{root}/{name}"), page_checksum_verification=True).read()
    if output.num_rows != manifest["output"]["rows"] or _schema(output.schema) != manifest["output"]["schema"]:
        raise StoreError(f"{path}: output.parquet does not match the manifest (rows or columns differ)")
    tables = tuple(reader.level(lv) for lv in manifest["levels"])
    index = LineageIndex(reader.level(manifest["output_level"]), tables)
    sources = tuple(reader.source(s) for s in manifest["sources"])
    groupings = tuple(reader.grouping(g) for g in manifest.get("groupings", []))
    return Stored(output, index, sources, manifest.get("info", {}), groupings)


def read_manifest(
    fs: pafs.FileSystem, root: str, path: str, fmt: str = FORMAT, version: int = VERSION, kind: str = "lineage store"
) -> dict[str, Any]:
    """The manifest of a store of format `fmt`; refuses other formats and newer versions."""
    restore_replaced(fs, root)
    try:
        with fs.open_input_stream(f"{root}/{MANIFEST}") as f:
            manifest = json.loads(f.read().decode())
    except FileNotFoundError:
        raise StoreError(f"{path} is not an ember {kind} (no {MANIFEST})") from None
    except NotADirectoryError:
        raise StoreError(f"{path} is not an ember {kind} (a file, not a folder)") from None
    except IsADirectoryError:
        raise StoreError(f"{path}: {MANIFEST} is a folder, not an ember {kind} manifest") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise StoreError(f"{path}: {MANIFEST} is damaged ({first_line(e)})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        raise StoreError(f"{path}: {MANIFEST} is not an ember {kind} manifest")
    found = manifest.get("version")
    if isinstance(found, int) and found > version:
        raise StoreError(
            f"{path} was written by a newer ember ({kind} format {found}, made by ember "
            f"{manifest.get('ember')}); this ember reads format {version} and older: upgrade ember"
        )
    if CHECKSUM in manifest and manifest[CHECKSUM] != manifest_checksum(manifest):
        raise StoreError(f"{path}: {MANIFEST} is damaged (its checksum is not the one saved)")
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise StoreError(f"{path}: {MANIFEST} is damaged (format version {found!r})")
    return manifest


def _check_files(fs: pafs.FileSystem, root: str, manifest: dict[str, Any], path: str) -> None:
    files: dict[str, int] = manifest.get("files", {})
    named = {manifest["output"]["file"]} | set(_column_files(manifest))
    if not named <= set(files):
        raise StoreError(f"{path}: the manifest names files it does not list: {sorted(named - set(files))[:3]}")
    infos = fs.get_file_info([f"{root}/{name}" for name in files])
    for (name, size), info in zip(files.items(), infos, strict=True):
        if info.type == pafs.FileType.NotFound:
            raise StoreError(f"{path}: {name} is missing")
        if info.size != size:
            raise StoreError(f"{path}: {name} has {info.size} bytes, the manifest says {size} (truncated or replaced)")


def _column_files(manifest: dict[str, Any]) -> Iterator[str]:
    for lv in (*manifest["levels"], manifest["output_level"]):
        for r in lv["rids"]:
            yield from column_files(r["column"])
        yield from (f for r in lv["refs"] for k in ("start", "end") for f in column_files(r[k]))
    for g in manifest.get("groupings", []):
        yield from (g["file"], g["rids"]["file"])
    yield from (s["kept"]["file"] for s in manifest["sources"] if "kept" in s)


@contextmanager
def _damage(path: str, name: str) -> Iterator[None]:
    try:
        yield
    except (OSError, pa.ArrowException) as e:
        raise StoreError(f"{path}: {name} is damaged ({e})") from None


class _Reader:
    def __init__(self, fs: pafs.FileSystem, root: str, files: dict[str, int], sums: dict[str, int] | None):
        self.fs, self.root, self.files, self.sums = fs, root, files, sums

    def column(self, meta: dict[str, Any]) -> IntColumn:
        return open_column(self.fs, self.root, meta, self.files, self.sums)

    def parquet(self, name: str) -> pa.Table:
        """A whole store file, checked (its checksum, and Parquet's page checksums)."""
        if self.sums is not None:
            check_crc(self.fs, self.root, name, self.sums)
        with _damage(self.root, name), self.fs.open_input_file(f"{self.root}/{name}") as f:
            return pq.ParquetFile(f, page_checksum_verification=True).read()

    def level(self, meta: dict[str, Any]) -> Level:
        level = Level(
            meta["rows"],
            tuple((r["source"], self.column(r["column"])) for r in meta["rids"]),
            tuple(Ranges(r["table"], self.column(r["start"]), self.column(r["end"])) for r in meta["refs"]),
            meta["why"],
        )
        if any(col.size != level.rows for col in level.columns()):
            raise StoreError(f"{self.root}: level {meta['name']} has columns of different lengths")
        return level

    def grouping(self, meta: dict[str, Any]) -> Grouping:
        table = self.parquet(meta["file"])
        rids = self.column(meta["rids"])
        start, end = (numbers(table.column(c)).astype(np.int64) for c in (START, END))
        if table.num_rows != meta["rows"] or (end.size and int(end.max()) > rids.size):
            raise StoreError(f"{self.root}: {meta['file']} does not match the manifest")
        result = table.drop_columns([START, END])
        return Grouping(meta["source"], meta["query"], meta["column"], result, start, end, rids)

    def source(self, meta: dict[str, Any]) -> Source:
        data = None
        if meta["kind"] in ("memory", KEYED):  # its rows, or a keyed source's keys in rid order
            data = self.parquet(meta["data"])
            if data.num_rows != meta["rows"]:
                raise StoreError(f"{self.root}: {meta['data']} holds {data.num_rows} rows, the manifest says {meta['rows']}")
        files = tuple(saved_file(f) for f in meta["files"])
        partitioning = tuple((str(name), str(dtype)) for name, dtype in meta.get("partitioning", ()))
        kept = None
        if "kept" in meta:
            name = meta["kept"]["file"]
            kept = _CheckedKept(self.fs, self.root, name, meta["kept"]["rows"], self.sums)
        columns = tuple(str(c) for c in meta.get("columns", ()))
        row_key = tuple(str(c) for c in meta.get("row_key", ()))
        options = tuple((str(k), str(v)) for k, v in meta.get("options", ()))
        remote = bool(meta.get("remote", False))
        return Source(
            meta["key"], meta["name"], meta["kind"], meta["rows"], files, partitioning, columns, options, row_key, remote, data, kept
        )


class _CheckedKept(KeptRows):
    """A store's copy of a source's rows, checked against its checksum at its first use."""

    def __init__(self, fs: pafs.FileSystem, root: str, name: str, rows: int, sums: dict[str, int] | None):
        super().__init__(fs, f"{root}/{name}", rows)
        self._root, self._name, self._sums = root, name, sums

    def _checked(self) -> pa.Schema:
        if self._schema is None and self._sums is not None:
            check_crc(self.fs, self._root, self._name, self._sums)
        return super()._checked()


class StoredPlain(Segmented):
    """A plain column in a store, read one row group at a time and only where a trace looks."""

    def __init__(self, pf: pq.ParquetFile, nbytes: int, guard: Callable[[], Any]):
        md = pf.metadata
        counts = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
        super().__init__(np.concatenate(([0], np.cumsum(counts, dtype=np.int64))), nbytes)
        self._pf, self._guard = pf, guard
        stats = [md.row_group(g).column(0).statistics for g in range(md.num_row_groups)]
        self._min = np.array([s.min if s is not None and s.has_min_max else -(1 << 62) for s in stats], np.int64)
        self._max = np.array([s.max if s is not None and s.has_min_max else 1 << 62 for s in stats], np.int64)
        self._groups: dict[int, np.ndarray] = {}

    def _decoded(self, g: int) -> np.ndarray:
        if g not in self._groups:
            with self._guard():
                self._groups[g] = numbers(self._pf.read_row_group(g, columns=["v"]).column(0))
        return self._groups[g]

    def _take_in(self, g: int, at: np.ndarray) -> np.ndarray:
        return self._decoded(g)[at]

    def hits(self, values: np.ndarray) -> np.ndarray:
        if values.size == 0:
            return np.empty(0, dtype=np.int64)
        found = np.searchsorted(values, self._max, side="right") > np.searchsorted(values, self._min, side="left")
        return concatenated(
            [np.flatnonzero(isin_sorted(self._decoded(g), values)) + self._bounds[g] for g in np.flatnonzero(found).tolist()]
        )
