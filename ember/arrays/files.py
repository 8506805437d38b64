"""Saving and loading array workflows' lineage.

A store is a folder (local, or any URI pyarrow reaches, like the row-lineage store):

    manifest.json              format, version, ember version, arrays (names, shapes),
                               ops, edges with their tables (form, rows, bytes, CRC-32),
                               every file's size
    tables/<edge>.<form>.npy   one encoded ProvRC table each, as a uint8 array

It is written into `<path>.ember-tmp-<random>` and renamed into place, so a crash
mid-save leaves nothing that loads. Reading checks the format and version, every
file's size and checksum, and that each table fits the arrays it links.
"""

from __future__ import annotations

import io
import json
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from ember.arrays.provrc import Table, decode, encode
from ember.errors import StoreError
from ember.store.files import atomic_store, filesystem, read_manifest

if TYPE_CHECKING:
    from ember.arrays.track import Workflow

FORMAT = "ember-array-lineage"
VERSION = 1
MANIFEST = "manifest.json"


def save(wf: Workflow, path: str, overwrite: bool = False) -> None:
    with atomic_store(path, overwrite, ("tables",)) as (fs, tmp):
        files: dict[str, int] = {}

        def table_entry(i: int, table: Table) -> dict[str, Any]:
            name = f"tables/{i}.{table.form}.npy"
            blob = encode(table)
            buf = io.BytesIO()
            np.save(buf, np.frombuffer(blob, np.uint8))
            with fs.open_output_stream(f"{tmp}/{name}") as out:
                out.write(buf.getvalue())
            files[name] = buf.getbuffer().nbytes
            return {
                "file": name,
                "form": table.form,
                "rows": table.rows,
                "bytes": len(blob),
                "crc32": zlib.crc32(blob),
            }

        edges = [
            {
                "op": e.op,
                "src": e.src,
                "dst": e.dst,
                "tables": [table_entry(i, t) for t in e.tables],
            }
            for i, e in enumerate(wf.edges)
        ]
        with fs.open_output_stream(f"{tmp}/{MANIFEST}") as out:
            out.write(json.dumps(_manifest(wf, edges, files), indent=1).encode())


def _manifest(wf: Workflow, edges: list[dict[str, Any]], files: dict[str, int]) -> dict[str, Any]:
    from ember.version import __version__

    return {
        "format": FORMAT,
        "version": VERSION,
        "ember": __version__,
        "arrays": [{"name": n.name, "shape": list(n.shape)} for n in wf.nodes],
        "ops": [
            {
                "name": op.name,
                "how": op.how,
                "inputs": list(op.inputs),
                "outputs": list(op.outputs),
                "reused": op.reused,
            }
            for op in wf.ops
        ],
        "edges": edges,
        "files": files,
    }


def load(path: str) -> Workflow:
    """A workflow with the saved arrays' names and shapes and their lineage (no values)."""
    from ember.arrays.track import Edge, Node, Op, Workflow

    fs, root = filesystem(path)
    manifest = read_manifest(fs, root, path, FORMAT, VERSION, "array lineage store")
    try:
        wf = Workflow()
        wf.nodes = [Node(a["name"], tuple(a["shape"])) for a in manifest["arrays"]]
        wf.ops = [
            Op(o["name"], o["how"], tuple(o["inputs"]), tuple(o["outputs"]), o["reused"])
            for o in manifest["ops"]
        ]
        for e in manifest["edges"]:
            forms = {}
            for t in e["tables"]:
                table = decode(_blob(fs, root, path, t, manifest["files"]))
                src, dst = wf.nodes[e["src"]].shape, wf.nodes[e["dst"]].shape
                if table.in_shape != src or table.out_shape != dst or table.form != t["form"]:
                    raise StoreError(f"{path}: {t['file']} does not match its arrays or form")
                forms[table.form] = table
            wf.edges.append(
                Edge(e["op"], e["src"], e["dst"], forms["backward"], forms.get("forward"))
            )
    except (KeyError, TypeError, IndexError) as e:
        raise StoreError(f"{path}: {MANIFEST} is incomplete ({e!r})") from None
    return wf


def _blob(
    fs: pafs.FileSystem, root: str, path: str, table: dict[str, Any], files: dict[str, int]
) -> bytes:
    name = table["file"]
    info = fs.get_file_info(f"{root}/{name}")
    if info.type == pafs.FileType.NotFound:
        raise StoreError(f"{path}: {name} is missing")
    if info.size != files.get(name):
        raise StoreError(
            f"{path}: {name} has {info.size} bytes, the manifest says {files.get(name)} "
            "(truncated or replaced)"
        )
    try:
        with fs.open_input_stream(f"{root}/{name}") as f:
            blob = np.load(io.BytesIO(f.read()), allow_pickle=False).tobytes()
    except (OSError, ValueError, pa.ArrowException) as e:
        raise StoreError(f"{path}: {name} is damaged ({e})") from None
    if len(blob) != table["bytes"] or zlib.crc32(blob) != table["crc32"]:
        raise StoreError(f"{path}: {name} is damaged (checksum mismatch)")
    return blob
