"""Saving and loading array workflows' lineage: a folder with a JSON manifest and one
`.npy` file per ProvRC table, written atomically like the row-lineage store."""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ember.arrays.provrc import decode, encode
from ember.errors import StoreError

if TYPE_CHECKING:
    from ember.arrays.track import Workflow

FORMAT = "ember-array-lineage"
VERSION = 1
MANIFEST = "manifest.json"


def save(wf: Workflow, path: str, overwrite: bool = False) -> None:
    from ember import __version__

    root = os.path.abspath(path).rstrip("/")
    if os.path.exists(root) and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite=True to replace it")
    tmp = f"{root}.ember-tmp-{uuid.uuid4().hex[:8]}"
    os.makedirs(f"{tmp}/tables")
    try:
        edges, files = [], {}
        for i, e in enumerate(wf.edges):
            tables = []
            for table in e.tables:
                name = f"tables/{i}.{table.form}.npy"
                blob = encode(table)
                np.save(f"{tmp}/{name}", np.frombuffer(blob, np.uint8))
                files[name] = os.path.getsize(f"{tmp}/{name}")
                tables.append(
                    {
                        "file": name,
                        "form": table.form,
                        "rows": table.rows,
                        "bytes": len(blob),
                        "crc32": zlib.crc32(blob),
                    }
                )
            edges.append({"op": e.op, "src": e.src, "dst": e.dst, "tables": tables})
        manifest = {
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
        with open(f"{tmp}/{MANIFEST}", "w") as f:
            json.dump(manifest, f, indent=1)
        if os.path.exists(root):
            old = f"{root}.ember-old-{uuid.uuid4().hex[:8]}"
            os.replace(root, old)
            os.replace(tmp, root)
            shutil.rmtree(old)
        else:
            os.replace(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load(path: str) -> Workflow:
    """A workflow with the saved arrays' names and shapes and their lineage (no values)."""
    from ember.arrays.track import Edge, Node, Op, Workflow

    root = os.path.abspath(path).rstrip("/")
    manifest = _manifest(root, path)
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
                table = decode(_blob(root, path, t, manifest["files"]))
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


def _manifest(root: str, path: str) -> dict[str, Any]:
    try:
        with open(f"{root}/{MANIFEST}") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise StoreError(f"{path} is not an ember array lineage store (no {MANIFEST})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(f"{path}: {MANIFEST} is damaged ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreError(f"{path}: {MANIFEST} is not an ember array lineage manifest")
    version = manifest.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise StoreError(
            f"{path} was written by a newer ember (array lineage format {version}, made by ember "
            f"{manifest.get('ember')}); this ember reads format {VERSION} and older: upgrade ember"
        )
    return manifest


def _blob(root: str, path: str, table: dict[str, Any], files: dict[str, int]) -> bytes:
    name = table["file"]
    full = f"{root}/{name}"
    if not os.path.exists(full):
        raise StoreError(f"{path}: {name} is missing")
    size = os.path.getsize(full)
    if size != files.get(name):
        raise StoreError(
            f"{path}: {name} has {size} bytes, the manifest says {files.get(name)} (truncated or replaced)"
        )
    try:
        blob = np.load(full, allow_pickle=False).tobytes()
    except (OSError, ValueError) as e:
        raise StoreError(f"{path}: {name} is damaged ({e})") from None
    if len(blob) != table["bytes"] or zlib.crc32(blob) != table["crc32"]:
        raise StoreError(f"{path}: {name} is damaged (checksum mismatch)")
    return blob
