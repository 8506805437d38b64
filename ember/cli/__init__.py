"""The `ember` command: run a PySpark script with lineage capture, then list, trace and export.

Exit codes: 0 success; 1 a user error (missing store, unknown entry, bad `--where`, a
script that raised: its traceback is shown, since it is the script's own); 2 a usage
error (unknown option, missing argument); a script's own `sys.exit(n)` gives n.
Reference: docs/guide/cli.md.
"""

from __future__ import annotations

import json
import tempfile
import traceback
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pyarrow as pa
import typer
from rich.console import Console

try:  # typer vendors its own click since 0.20; older ones use click itself
    from typer._click.exceptions import ClickException, UsageError
except ImportError:
    from click import ClickException, UsageError  # type: ignore[assignment]

from ember.cli.record import Script
from ember.cli.runner import Recorder, now, open_entry, sha256
from ember.cli.runstore import (
    RUN_FILE,
    CliError,
    Run,
    folder_bytes,
    fresh_store,
    read_run,
    store_manifest,
    write_run,
)
from ember.cli.show import dict_table, human_bytes, print_json, rows_table
from ember.query.lineage import Lineage

if TYPE_CHECKING:
    from ember.infer.lineage import InferredLineage

app = typer.Typer(
    name="ember",
    help="Row-level lineage for PySpark scripts: run a script with capture, list, trace and export its lineage.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
_debug = {"on": False}


def _console(stderr: bool = False) -> Console:
    """A console on stdout/stderr; wide when not a terminal, so piped tables do not wrap."""
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console.width = 200
    return console


class Mode(StrEnum):
    eager = "eager"
    lazy = "lazy"


class Format(StrEnum):
    json = "json"
    openlineage = "openlineage"


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error.")) -> None:
    _debug["on"] = debug


@app.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": False})
def run(
    script: Annotated[Path, typer.Argument(help="The PySpark script, run as `python SCRIPT ARGS...` would run it.")],
    args: Annotated[list[str] | None, typer.Argument(help="Arguments for the script (after `--` if they clash with ember's).")] = None,
    store: Annotated[Path | None, typer.Option("--store", help="Folder for the lineage (default: SCRIPT-stem.lineage).")] = None,
    mode: Annotated[Mode, typer.Option("--mode", help="eager: capture each action; lazy: capture nothing, traces re-run.")] = Mode.eager,
) -> None:
    """Runs SCRIPT unmodified and records the lineage of every DataFrame action it performs."""
    if not script.is_file():
        raise CliError(f"no script at {script}")
    folder = store or Path(f"{script.stem}.lineage")
    fresh_store(folder)
    user = Script(script, list(args or []), writes=mode is Mode.eager)
    record = Run(user.path, user.args, mode.value, sha256(script), str(uuid.uuid4()), now())
    write_run(folder, record)
    err = _console(stderr=True)
    outcome = user.run(Recorder(folder, record, user, err))
    record.status = "ok" if outcome.code == 0 else "failed"
    write_run(folder, record)
    skipped = sum(e.status == "skipped" for e in record.entries)
    if record.entries:
        err.print(dict_table(f"ember: {len(record.entries)} actions in {folder}", [_summary(e) for e in record.entries]))
    else:
        err.print(f"ember: the script performed no DataFrame action; {folder} has no entries")
    if skipped:
        err.print(f"ember: {skipped} action(s) not captured (see the reason column)")
    if outcome.error is not None:
        err.file.write(user.traceback(outcome.error))
        raise CliError(f"{script.name} raised {type(outcome.error).__name__}; the entries recorded before it are in {folder}")
    if outcome.code:
        err.print(f"ember: {script.name} exited with code {outcome.code}")
        raise typer.Exit(outcome.code)


@app.command("ls")
def ls(
    store: Annotated[Path, typer.Argument(help="A folder written by `ember run`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Lists the entries of a store: action, line, mode, output rows, sources and size."""
    record = read_run(store)
    listing = [_listing(store, e) for e in record.entries]
    out = _console()
    if as_json:
        print_json(out, {"script": record.script, "args": record.args, "mode": record.mode, "status": record.status, "entries": listing})
        return
    out.print(f"{record.script} {' '.join(record.args)}  ({record.mode}, {record.status})")
    shown = [
        {**{k: v for k, v in e.items() if k not in ("sources", "bytes", "reason")},
         "sources": ", ".join(f"{s['name']} ({s['rows']})" if s["rows"] is not None else s["name"] for s in e["sources"]),
         "size": human_bytes(e["bytes"]), "note": e["reason"]}
        for e in listing
    ]
    out.print(dict_table(f"{len(listing)} entries", shown) if shown else "no entries")


@app.command()
def trace(
    store: Annotated[Path, typer.Argument(help="A folder written by `ember run`.")],
    entry: Annotated[str, typer.Argument(help="An entry name, as `ember ls` lists it.")],
    backward: Annotated[bool, typer.Option("--backward", help="Source rows behind output rows (chosen by --where or --oids).")] = False,
    forward: Annotated[str | None, typer.Option("--forward", metavar="SOURCE", help="Output rows that rows of SOURCE reached (chosen by --where or --ids).")] = None,
    where: Annotated[str | None, typer.Option("--where", help="SQL condition over the output (backward) or the source's columns (forward).")] = None,
    oids: Annotated[str | None, typer.Option("--oids", help="Output row numbers, comma-separated (backward).")] = None,
    ids: Annotated[str | None, typer.Option("--ids", help="Source row ids (ember_rid), comma-separated (forward).")] = None,
    keys: Annotated[str | None, typer.Option("--keys", help='A keyed source\'s keys, a JSON list: [7, 9], or [["fr", 7]] for a key of two columns (forward).')] = None,
    source: Annotated[str | None, typer.Option("--source", help="Show only this source (backward; may be an upstream job's).")] = None,
    through: Annotated[list[Path] | None, typer.Option("--through", help="A folder of stores to find upstream jobs in (repeatable; the store's parent folder and EMBER_CATALOG are searched too).")] = None,
    columns: Annotated[str | None, typer.Option("--columns", help="Columns to show, comma-separated (default: all).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Rows (and ids in JSON) shown per source; 0 for all.")] = 20,
    ids_only: Annotated[bool, typer.Option("--ids-only", help="Backward: print the source row ids, not the rows (reads no source).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Traces an entry's lineage backward (output → sources) or forward (source → output)."""
    if backward == (forward is not None):
        raise UsageError("give exactly one of --backward and --forward SOURCE")
    chosen_by = [x for x in ((oids,) if backward else (ids, keys)) if x is not None]
    if (where is None) == (not chosen_by) or len(chosen_by) > 1 or (backward and (ids, keys) != (None, None)) or (forward and oids is not None):
        raise UsageError("--backward takes --where or --oids; --forward takes --where, --ids or --keys")
    record = read_run(store)
    lin = open_entry(store, record, record.entry(entry), _console(stderr=True))
    cap = None if limit == 0 else limit
    out = _console()
    if backward:
        chosen = _numbers(oids, "--oids")
        with _linking(lin, store, through or []) as up:
            t = lin.backward(oids=chosen, where=where, through=up) if isinstance(lin, Lineage) else lin.backward(oids=chosen, where=where)
        names = [source] if source else t.sources
        keyed = {n: t.keys(n) for n in names if t.key_columns(n)}  # a keyed source's rows are its keys (its table holds the rest)
        if ids_only:
            print_json(out, {"entry": entry, "direction": "backward", "exact": t.exact, "sources": {
                n: {"count": keyed[n].num_rows, "keys": keyed[n].slice(0, cap).to_pylist()} if n in keyed
                else {"count": int((i := t.ids(n)).size), "ids": i[:cap].tolist()} for n in names}})
            return
        found: dict[str, tuple[int, list[int] | None, pa.Table]] = {}
        for n in names:
            if n in keyed:
                found[n] = (keyed[n].num_rows, None, _pick(keyed[n].slice(0, cap), columns))
            else:
                i = t.ids(n)
                found[n] = (int(i.size), i[:cap].tolist(), _pick(t.rows(n, limit=cap), columns))
        if as_json:
            print_json(out, {"entry": entry, "direction": "backward", "exact": t.exact, "sources": {
                n: {"count": count, "keys": r.to_pylist()} if rids is None else {"count": count, "ids": rids, "rows": r.to_pylist()}
                for n, (count, rids, r) in found.items()}})
            return
        for n, (count, rids, r) in found.items():
            what = "rows" if rids is not None else "keys"
            out.print(rows_table(f"{n}: {count} {what}{_shown(r, count)}{'' if t.exact else ' (superset)'}", r))
        return
    assert forward is not None
    rids = _numbers(ids, "--ids")
    with _linking(lin, store, through or []) as up:
        if keys is not None:
            if not isinstance(lin, Lineage):
                raise CliError("--keys follows eager entries only")
            f = lin.forward(forward, keys=_keys(keys), through=up)
        elif isinstance(lin, Lineage):
            f = lin.forward(forward, ids=rids, where=where, through=up)
        else:
            f = lin.forward(forward, ids=rids, where=where)
    reached = f.ids()
    rows = _pick(f.rows().slice(0, cap), columns)
    if as_json:
        print_json(out, {"entry": entry, "direction": "forward", "source": forward, "exact": f.exact,
                         "count": int(reached.size), "oids": reached[:cap].tolist(), "rows": rows.to_pylist()})
        return
    out.print(rows_table(f"output: {reached.size} rows reached{_shown(rows, reached.size)}", rows))


@contextmanager
def _linking(lin: Lineage | InferredLineage, store: Path, through: list[Path]) -> Iterator[list[str]]:
    """The folders a trace finds upstream jobs in: `--through`'s and the store's parent
    (which holds the other runs' stores); a line where `--through` links nothing."""
    if not isinstance(lin, Lineage) and through:
        raise CliError("--through follows eager entries only: a lazy entry keeps no lineage to link")
    for folder in through:
        if not folder.is_dir():
            raise CliError(f"--through {folder}: no such folder")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield [str(p) for p in (store.resolve().parent, *through)]
    if through and any("links nothing" in str(w.message) for w in caught):
        _console(stderr=True).print(f"ember: --through links nothing: no store there wrote the files {', '.join(lin.sources)} read")


@app.command()
def export(
    store: Annotated[Path, typer.Argument(help="A folder written by `ember run`.")],
    entry: Annotated[str, typer.Argument(help="An entry name, as `ember ls` lists it.")],
    format: Annotated[Format, typer.Option("--format", help="json: output oid → source rids; openlineage: a RunEvent.")] = Format.json,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write (default: stdout).")] = None,
) -> None:
    """Exports an eager entry's lineage as ember's JSON or as an OpenLineage RunEvent."""
    record = read_run(store)
    item = record.entry(entry)
    if item.status != "eager":
        raise CliError(f"entry {entry!r} is {item.status}: only eager entries keep lineage to export")
    if format is Format.openlineage:
        from ember.cli import openlineage  # its client is slow to import

        text = openlineage.to_json(openlineage.run_event(store, record, item, store_manifest(store, item)))
    else:
        lin = open_entry(store, record, item, _console(stderr=True))
        assert isinstance(lin, Lineage)
        with tempfile.TemporaryDirectory(prefix="ember-export-") as tmp:
            lin.export_json(str(Path(tmp) / "lineage.json"))
            text = (Path(tmp) / "lineage.json").read_text()
    if output is None:
        _console().file.write(text + "\n")
    else:
        output.write_text(text)


@app.command()
def ui(
    store: Annotated[Path, typer.Argument(help="A folder written by `ember run`, of stores saved with lin.save, or with a views.toml.")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
    token: Annotated[str | None, typer.Option("--token", help="The token the page's API asks for (default: a random one, printed in the URL).")] = None,
    no_token: Annotated[bool, typer.Option("--no-token", help="Ask for no token (trusted setups only; prints a warning).")] = False,
) -> None:
    """Serves the linked-brushing web page over a store's entries (or the views of its views.toml)."""
    from ember import ui as page

    if token is not None and no_token:
        raise UsageError("give --token or --no-token, not both")
    if not store.is_dir() or (store / RUN_FILE).is_file():
        read_run(store)  # an `ember run` store: its errors say what is missing (else the page's do)
    # neither option: serve's default, a random token
    auth: dict[str, Any] = {"token": token} if token is not None else {"no_token": True} if no_token else {}
    page.serve(str(store), host=host, port=port, **auth)


def main(argv: list[str] | None = None) -> int:
    """Runs the command; returns its exit code (the console script exits with it)."""
    _debug["on"] = False
    err = _console(stderr=True)
    try:
        code = app(args=argv, prog_name="ember", standalone_mode=False)
    except ClickException as e:  # usage errors (2) and click's own
        e.show()
        return e.exit_code
    except typer.Abort:
        err.print("ember: aborted")
        return 1
    except Exception as e:  # every error becomes one line unless --debug
        if _debug["on"]:
            traceback.print_exc()
        text = str(e).strip().splitlines()
        name = "error" if isinstance(e, CliError) else type(e).__name__
        err.print(f"ember: {name}: {text[0] if text else repr(e)}", markup=False)
        return 1
    return code if isinstance(code, int) else 0


def _numbers(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of integers", param_hint=option) from None


def _pick(rows: pa.Table, columns: str | None) -> pa.Table:
    """The chosen columns, and the row id column (`ember_rid` or `ember_oid`) always."""
    if columns is None:
        return rows
    wanted = [c.strip() for c in columns.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in rows.column_names]
    if unknown:
        raise CliError(f"--columns: no column {', '.join(unknown)}; there are: {', '.join(rows.column_names)}")
    return rows.select([*wanted, *(c for c in rows.column_names if c.startswith("ember_") and c not in wanted)])


def _keys(text: str) -> list[Any]:
    """`--keys`: a JSON list of key values (lists of values for a key of several columns)."""
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--keys is a JSON list, like [7, 9] or [[\"fr\", 7]]: {e}") from None
    if not isinstance(values, list):
        raise UsageError("--keys is a JSON list, like [7, 9] or [[\"fr\", 7]]")
    return [tuple(v) if isinstance(v, list) else v for v in values]


def _shown(rows: pa.Table, total: int) -> str:
    return f", showing {rows.num_rows}" if rows.num_rows < total else ""


def _summary(e: Any) -> dict[str, Any]:
    return {"entry": e.name, "mode": e.status, "rows": e.rows, "seconds": e.seconds, "reason": e.reason}


def _listing(store: Path, e: Any) -> dict[str, Any]:
    """One entry for `ls`: sources with row counts from its store (names only for lazy ones)."""
    if e.status == "eager":
        sources = [{"name": s["name"], "rows": s["rows"]} for s in store_manifest(store, e).get("sources", [])]
    else:
        sources = [{"name": n, "rows": None} for n in e.sources]
    return {"entry": e.name, "action": e.action, "line": e.line, "mode": e.status, "rows": e.rows,
            "sources": sources, "bytes": folder_bytes(store / e.name), "reason": e.reason}
