"""Where the page's views come from: entries captured into the store folder (any
group-by: one view per source its groups partition), and views declared in the folder's `views.toml`, which are
captured on the first start and kept under `.ui-views/` for the next ones.

A declared view's group-by items and sum, whether read from views.toml or sent by the
page, pass `ember.ui.expressions` first: Spark runs only the SQL written back from
their checked trees (docs/guide/security.md)."""

from __future__ import annotations

import json
import logging
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pyarrow.dataset as ds
from pyspark.sql import SparkSession

import ember
from ember.errors import EmberError
from ember.ui import expressions
from ember.ui.views import LeftOut, View, build_view

VIEWS_FILE = "views.toml"
CACHE = ".ui-views"
MAX_GROUPS = 10_000  # an entry with more output rows is not a chart anyone can brush
MAX_NAME = 80  # characters of a view's name
log = logging.getLogger("ember.ui")


@dataclass(frozen=True)
class Declared:
    """A view declared in views.toml: `SELECT group_by, count(*) [, sum(sum)] FROM table GROUP BY group_by`;
    `group_by` and `sum` as Spark SQL written back by `expressions.check` (never as read)."""

    name: str
    table: str
    path: str
    group_by: tuple[str, ...]
    sum: str | None = None

    def sql(self) -> str:
        positions = ", ".join(str(i + 1) for i in range(len(self.group_by)))
        measures = "count(*) AS count" + (f", sum({self.sum}) AS sum" if self.sum else "")
        return f"SELECT {', '.join(self.group_by)}, {measures} FROM {self.table} GROUP BY {positions} ORDER BY {positions}"


def load_views(store_dir: Path, spark: SparkSession | None = None) -> tuple[list[View], list[LeftOut]]:
    """Every view the folder offers, and the entries (or their sources) left out and why;
    raises if it offers none."""
    if not store_dir.is_dir():
        raise EmberError(f"no store folder at {store_dir}")
    config = store_dir / VIEWS_FILE
    declared = read_config(config)[1] if config.exists() else []  # checked before anything runs
    views: list[View] = []
    left_out: list[LeftOut] = []
    for entry in entries(store_dir):
        shown, skipped = entry_views(store_dir, entry, spark)
        views += shown
        left_out += skipped
    views += [declared_view(d, store_dir / CACHE, spark) for d in declared]
    if not views:
        why = "; ".join(f"{x.name}: {x.why}" for x in left_out[:5])
        raise EmberError(f"{store_dir} has no group-by entries and no {VIEWS_FILE}" + (f" ({why})" if why else ""))
    seen: set[str] = set()
    for view in views:
        while view.id in seen:
            view.id += "_"
        seen.add(view.id)
    return views, left_out


def entries(store_dir: Path) -> Iterator[Path]:
    """Store folders (those holding a manifest.json) at or up to two levels below `store_dir`."""
    if (store_dir / "manifest.json").exists():
        yield store_dir
        return
    for manifest in sorted([*store_dir.glob("*/manifest.json"), *store_dir.glob("*/*/manifest.json")]):
        if not any(part.startswith(".") for part in manifest.relative_to(store_dir).parts):
            yield manifest.parent


def entry_views(store_dir: Path, entry: Path, spark: SparkSession | None) -> tuple[list[View], list[LeftOut]]:
    """The entry as views, one per source whose rows its groups partition (a group-by
    over a join reads several), and what is left out (logged too): the entry where it
    does not load or is no chart, a source whose rows its groups share."""
    name = str(entry.relative_to(store_dir)) if entry != store_dir else entry.name
    try:
        lin = ember.load(str(entry), spark)
        if lin.output().num_rows > MAX_GROUPS:
            raise EmberError(f"{lin.output().num_rows} output rows, too many groups for a chart")
    except EmberError as e:
        log.warning("entry %s left out: %s", name, e)
        return [], [LeftOut(name, str(e))]
    views, left_out = [], []
    for source in lin.sources:
        label = name if len(lin.sources) == 1 else f"{name} · {source}"
        try:
            views.append(build_view(slug(label), label, lin, source=source, entry=name))
        except EmberError as e:
            log.warning("entry %s left out: %s", label, e)
            left_out.append(LeftOut(label, str(e)))
    return views, left_out


def read_config(path: Path) -> tuple[Declared, list[Declared]]:
    """The table of a views.toml (as a declaration with no name or keys) and its views
    (format: docs/ui.md)."""
    try:
        doc = tomllib.loads(path.read_text())
        table = doc["table"]
        source = Path(table["path"])
        if not source.is_absolute():
            source = (path.parent / source).resolve()
        if not isinstance(table["name"], str) or not expressions.PLAIN.fullmatch(table["name"]):
            raise EmberError(f"{path}: the table's name {table['name']!r} must be letters, digits and _")
        base = Declared("", table["name"], str(source), ())
        listed = [(v["name"], v["group_by"], v.get("sum")) for v in doc.get("view", [])]
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise EmberError(f"{path}: not a views file ({type(e).__name__}: {e}); see docs/ui.md") from None
    if not listed:
        return base, []
    columns = table_columns(source)
    try:
        return base, [checked(base, name, group_by, measure, columns) for name, group_by, measure in listed]
    except EmberError as e:
        raise EmberError(f"{path}: refused, nothing run: {e}") from None


def checked(base: Declared, name: object, group_by: object, measure: object, columns: Sequence[str]) -> Declared:
    """A view over `base`'s table whose items and sum pass the allowlist; raises
    EmberError with the reason otherwise."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        raise EmberError(f"a view's name must be 1 to {MAX_NAME} printable characters, not {str(name)[:MAX_NAME]!r}")
    label = f"view {name.strip()!r}"
    if not isinstance(group_by, list | tuple) or not 1 <= len(group_by) <= 2:
        raise EmberError(f"{label}: one or two group-by items")
    try:
        items = tuple(expressions.check(g, columns) for g in group_by)
        total = None if measure in (None, "") else expressions.column(measure, columns)
    except EmberError as e:
        raise EmberError(f"{label}: {e}") from None
    return replace(base, name=name.strip(), group_by=items, sum=total)


def table_columns(path: Path) -> list[str]:
    """The column names of a Parquet file or folder (its footer only; no Spark)."""
    try:
        return list(ds.dataset(str(path), format="parquet").schema.names)
    except (OSError, ValueError) as e:
        raise EmberError(f"cannot read the table at {path}: {str(e).splitlines()[0]}") from None


def declare(store_dir: Path, name: str, group_by: Sequence[str], measure: str | None, spark: SparkSession | None) -> View:
    """Captures a view declared on the page over the views.toml's table, and appends it
    to views.toml so that the next start has it too."""
    config = store_dir / VIEWS_FILE
    if not config.exists():
        raise EmberError(f"views can be added only over the table of a {VIEWS_FILE} in the store folder")
    base, known = read_config(config)
    group_by = [g.strip() for g in group_by if g.strip()]
    if not name.strip() or not 1 <= len(group_by) <= 2:
        raise EmberError("a view needs a name and one or two group-by expressions")
    declared = checked(base, name, group_by, measure, table_columns(Path(base.path)))
    if any(slug(d.name) == slug(declared.name) for d in known):
        raise EmberError(f"there is already a view named {declared.name!r}")
    view = declared_view(declared, store_dir / CACHE, spark)
    # as written (checked again at every start); printable text, so JSON's escapes are TOML's
    block = f"\n[[view]]\nname = {_toml(declared.name)}\ngroup_by = [{', '.join(_toml(g) for g in group_by)}]\n"
    with config.open("a") as out:
        out.write(block + (f"sum = {_toml(measure)}\n" if measure else ""))
    return view


def declared_view(declared: Declared, cache: Path, spark: SparkSession | None) -> View:
    """The declared view, captured with Spark unless the cache holds it for the same
    declaration and the same source file."""
    stored = cache / slug(declared.name)
    recipe = {**asdict(declared), "group_by": list(declared.group_by), "file": _facts(Path(declared.path))}
    recipe_file = stored.with_suffix(".json")
    if not (recipe_file.exists() and json.loads(recipe_file.read_text()) == recipe and stored.exists()):
        spark = spark or _spark()
        spark.read.parquet(declared.path).createOrReplaceTempView(declared.table)
        log.warning("capturing view %r: %s", declared.name, declared.sql())
        cache.mkdir(parents=True, exist_ok=True)
        try:
            ember.capture(spark.sql(declared.sql())).save(str(stored), overwrite=True)
        except EmberError:
            raise
        except Exception as e:  # Spark's parse and analysis errors share no base class worth naming
            raise EmberError(f"view {declared.name!r}: Spark refused {declared.sql()}: {str(e).splitlines()[0]}") from None
        recipe_file.write_text(json.dumps(recipe))
    lin = ember.load(str(stored), spark)
    keys = [c for c in lin.output().column_names if c not in ("count", "sum", "ember_oid")]
    return build_view(slug(declared.name), declared.name, lin, keys, declared.sum)


def _toml(text: str) -> str:
    """A TOML basic string (the text holds no control characters: `checked` refused them)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "view"


def _facts(path: Path) -> list[int]:
    """What tells a changed source file: its size and modification time."""
    if path.is_dir():
        return [sum(p.stat().st_size for p in path.rglob("*")), int(path.stat().st_mtime_ns)]
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _spark() -> SparkSession:
    from ember.engines.spark.session import local_spark

    return local_spark("ember-ui")
