"""The `ember` command end to end, checked against DuckDB over the same Parquet files."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from openlineage.client.serde import Serde
from pyspark.sql import SparkSession

from ember.cli import main
from ember.cli.openlineage import run_event
from ember.cli.runstore import read_run, store_manifest

JOB = '''\
import json, sys
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.getOrCreate()
li = spark.read.parquet(sys.argv[1] + "/lineitem.parquet")
totals = li.groupBy("l_returnflag").agg(F.sum("l_quantity").alias("qty")).orderBy("l_returnflag")
out = {"totals": [list(r) for r in totals.collect()]}
out["big"] = li.filter("l_quantity > 49").count()
totals.show()
out["first"] = [list(li.filter(F.col("l_linenumber") == i + 1).first()) for i in range(2)]
out["rdd"] = li.rdd.map(lambda r: 1).take(2)
json.dump(out, open(sys.argv[2], "w"), default=str)
'''


def line_of(text: str, script: str = JOB) -> int:
    return next(i for i, line in enumerate(script.splitlines(), 1) if text in line)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def lineitem_rids(tpch: Path, where: str) -> list[int]:
    """The oracle: DuckDB numbers the rows of the Parquet file as ember_rid does."""
    path = tpch / "lineitem.parquet"
    sql = f"SELECT file_row_number FROM read_parquet('{path}', file_row_number = true) WHERE {where} ORDER BY 1"
    return [r[0] for r in duckdb.sql(sql).fetchall()]


@pytest.fixture(scope="module")
def captured(spark: SparkSession, tpch: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `ember run` of JOB and one plain run of it, with what each computed."""
    tmp = tmp_path_factory.mktemp("cli")
    script = tmp / "job.py"
    script.write_text(JOB)
    saved = sys.argv[:]
    sys.argv = [str(script), str(tpch), str(tmp / "plain.json")]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved
    code = main(["run", str(script), "--store", str(tmp / "store"), str(tpch), str(tmp / "ember.json")])
    return {"code": code, "store": tmp / "store", "tmp": tmp, "script": script}


def test_script_sees_its_own_results(captured: dict[str, Any]) -> None:
    assert captured["code"] == 0
    tmp = captured["tmp"]
    assert json.loads((tmp / "ember.json").read_text()) == json.loads((tmp / "plain.json").read_text())


def test_one_entry_per_action_named_by_line(captured: dict[str, Any]) -> None:
    run = read_run(captured["store"])
    first = line_of("first())")
    assert [e.name for e in run.entries] == [
        f"job.py-{line_of('totals.collect()')}-collect",
        f"job.py-{line_of('.count()')}-count",
        f"job.py-{line_of('totals.show()')}-show",
        f"job.py-{first}-first",
        f"job.py-{first}-first-2",
        f"job.py-{line_of('li.rdd')}-rdd.take",
    ]
    assert [e.status for e in run.entries] == ["eager"] * 5 + ["skipped"]
    assert "RDD" in run.entries[-1].reason
    assert run.status == "ok"


def test_ls_json(captured: dict[str, Any], capsys: pytest.CaptureFixture[str], tpch: Path) -> None:
    code, out, _ = run_cli(capsys, "ls", str(captured["store"]), "--json")
    assert code == 0
    entries = {e["action"]: e for e in json.loads(out)["entries"]}
    assert entries["count"]["rows"] == len(lineitem_rids(tpch, "l_quantity > 49"))
    assert entries["collect"]["rows"] == 3
    assert entries["collect"]["sources"] == [{"name": "lineitem", "rows": len(lineitem_rids(tpch, "true"))}]
    assert entries["collect"]["bytes"] > 0
    code, out, _ = run_cli(capsys, "ls", str(captured["store"]))
    assert code == 0 and "job.py-" in out


def test_trace_backward_and_forward(captured: dict[str, Any], capsys: pytest.CaptureFixture[str], tpch: Path) -> None:
    entry = read_run(captured["store"]).entries[0].name
    code, out, _ = run_cli(capsys, "trace", str(captured["store"]), entry, "--backward", "--where", "l_returnflag = 'R'", "--limit", "0", "--json")
    assert code == 0
    found = json.loads(out)["sources"]["lineitem"]
    expected = lineitem_rids(tpch, "l_returnflag = 'R'")
    assert found["count"] == len(expected) and found["ids"] == expected
    assert [r["ember_rid"] for r in found["rows"]] == expected
    rid = lineitem_rids(tpch, "l_returnflag = 'A'")[0]
    code, out, _ = run_cli(capsys, "trace", str(captured["store"]), entry, "--forward", "lineitem", "--ids", str(rid), "--json")
    assert code == 0
    assert [r["l_returnflag"] for r in json.loads(out)["rows"]] == ["A"]
    code, out, _ = run_cli(capsys, "trace", str(captured["store"]), entry, "--backward", "--oids", "0", "--limit", "2")
    assert code == 0 and "lineitem:" in out and "showing 2" in out


def test_export_json_and_openlineage(captured: dict[str, Any], capsys: pytest.CaptureFixture[str], tpch: Path) -> None:
    store, run = captured["store"], read_run(captured["store"])
    entry = run.entries[0]
    target = captured["tmp"] / "lineage.json"
    assert main(["export", str(store), entry.name, "--format", "json", "-o", str(target)]) == 0
    doc = json.loads(target.read_text())
    by_flag = {row[0]: i for i, row in enumerate(json.loads((captured["tmp"] / "plain.json").read_text())["totals"])}
    assert doc["lineage"][by_flag["N"]]["sources"]["lineitem"] == lineitem_rids(tpch, "l_returnflag = 'N'")
    code, out, _ = run_cli(capsys, "export", str(store), entry.name, "--format", "openlineage")
    assert code == 0
    event = json.loads(out)
    assert event["eventType"] == "COMPLETE"
    assert [d["name"] for d in event["inputs"]] == [str((tpch / "lineitem.parquet").resolve())]
    assert event["outputs"][0]["facets"]["schema"]["fields"][0]["name"] == "l_returnflag"
    lineitem = str((tpch / "lineitem.parquet").resolve())
    assert {
        col: [(f["name"], f["field"]) for f in v["inputFields"]]
        for col, v in event["outputs"][0]["facets"]["columnLineage"]["fields"].items()
    } == {"l_returnflag": [(lineitem, "l_returnflag")], "qty": [(lineitem, "l_quantity")]}
    facet = event["run"]["facets"]["emberRowLineage"]
    assert facet["entry"] == entry.name and facet["format"] == "ember-lineage-store"
    assert Path(facet["store"]) == (store / entry.name).resolve()
    assert json.loads(Serde.to_json(run_event(store, run, entry, store_manifest(store, entry)))) == event


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["ls", "{tmp}/missing"], 1, "no store at"),
        (["trace", "{store}", "nope", "--backward", "--oids", "0"], 1, "no entry 'nope'"),
        (["trace", "{store}", "{entry}", "--backward", "--where", "no_such_column = 1"], 1, "InvalidPredicateError"),
        (["trace", "{store}", "{entry}", "--backward", "--where", "l_returnflag = = 'R'"], 1, "does not parse"),
        (["trace", "{store}", "{entry}", "--backward", "--oids", "99"], 1, "out of range"),
        (["trace", "{store}", "{entry}", "--backward", "--oids", "one"], 2, "comma-separated"),
        (["trace", "{store}", "{entry}", "--backward"], 2, "--where or --oids"),
        (["trace", "{store}", "{skipped}", "--backward", "--oids", "0"], 1, "was not captured"),
        (["export", "{store}", "{entry}", "--format", "xml"], 2, "xml"),
        (["ui", "{tmp}/missing"], 1, "no store at"),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(
    captured: dict[str, Any], capsys: pytest.CaptureFixture[str], args: list[str], code: int, says: str
) -> None:
    run = read_run(captured["store"])
    fill = {"tmp": captured["tmp"], "store": captured["store"], "entry": run.entries[0].name, "skipped": run.entries[-1].name}
    got, _, err = run_cli(capsys, *(a.format(**fill) for a in args))
    assert got == code
    assert says in err and "Traceback" not in err


def test_help_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ([], ["run"], ["ls"], ["trace"], ["export"], ["ui"]):
        code, out, _ = run_cli(capsys, *command, "--help")
        assert code == 0 and "Usage" in out


def test_failing_script(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "bad.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "n = spark.range(5).count()\n"
        "raise ValueError(f'wrong total {n}')\n"
    )
    code, _, err = run_cli(capsys, "run", str(script), "--store", str(tmp_path / "s"))
    assert code == 1
    assert "ValueError: wrong total 5" in err and "bad.py raised ValueError" in err  # the script's own traceback
    run = read_run(tmp_path / "s")
    assert run.status == "failed" and [e.name for e in run.entries] == ["bad.py-3-count"]
    script.write_text("import sys\nsys.exit(3)\n")
    assert main(["run", str(script), "--store", str(tmp_path / "s")]) == 3


def test_store_folder_is_not_clobbered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("x")
    script = tmp_path / "nothing.py"
    script.write_text("print('hi')\n")
    code, _, err = run_cli(capsys, "run", str(script), "--store", str(tmp_path / "data"))
    assert code == 1 and "not an ember run store" in err
    assert (tmp_path / "data" / "keep.txt").exists()


def test_lazy_entries_rerun_the_script(spark: SparkSession, tpch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "lazy.py"
    script.write_text(
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "li = spark.read.parquet(sys.argv[1] + '/lineitem.parquet')\n"
        "print(li.filter('l_quantity > 49').select('l_orderkey', 'l_quantity').collect()[:1])\n"
    )
    store = tmp_path / "lazy.lineage"
    assert main(["run", str(script), "--store", str(store), "--mode", "lazy", str(tpch)]) == 0
    assert "Row(l_orderkey=" in capsys.readouterr().out  # the script's own output
    entry = read_run(store).entries[0]
    assert entry.status == "lazy" and entry.rows == len(lineitem_rids(tpch, "l_quantity > 49"))
    code, out, _ = run_cli(capsys, "trace", str(store), entry.name, "--backward", "--oids", "0,1", "--json")
    assert code == 0
    con = duckdb.connect()
    first_two = con.sql(
        f"SELECT file_row_number FROM read_parquet('{tpch}/lineitem.parquet', file_row_number = true) "
        "WHERE l_quantity > 49 ORDER BY 1 LIMIT 2"
    ).fetchall()
    assert json.loads(out)["sources"]["lineitem"]["ids"] == [r[0] for r in first_two]
    code, _, err = run_cli(capsys, "export", str(store), entry.name)
    assert code == 1 and "only eager entries" in err
    script.write_text(script.read_text() + "# edited\n")
    code, _, err = run_cli(capsys, "trace", str(store), entry.name, "--backward", "--oids", "0")
    assert code == 1 and "changed since" in err


def test_uncapturable_action_does_not_break_the_script(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "udf.py"
    script.write_text(
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "rows = spark.sql('WITH RECURSIVE r(id) AS (SELECT 0 UNION ALL SELECT id + 2 FROM r WHERE id < 4) "
        "SELECT id FROM r').collect()\n"
        "open(sys.argv[1], 'w').write(str(sorted(r.id for r in rows)))\n"
    )
    code, _, err = run_cli(capsys, "run", str(script), "--store", str(tmp_path / "s"), str(tmp_path / "out.txt"))
    assert code == 0
    assert (tmp_path / "out.txt").read_text() == "[0, 2, 4]"
    [entry] = read_run(tmp_path / "s").entries
    assert entry.status == "skipped" and entry.reason.startswith("UnsupportedOperatorError")
    assert "not captured: udf.py-4-collect" in err


def test_a_write_is_made_once_and_one_ember_cannot_capture_runs_as_written(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eager mode makes an append itself, through its capture (once: the folder then holds
    one batch of files); a write whose capture fails before writing (a recursive CTE)
    runs as the script wrote it, and its entry says why it was not captured."""
    script = tmp_path / "writes.py"
    script.write_text(
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "spark.range(6).repartition(2).write.mode('append').option('compression', 'none').parquet(sys.argv[1])\n"
        "spark.sql('WITH RECURSIVE r(id) AS (SELECT 0 UNION ALL SELECT id + 2 FROM r WHERE id < 4) "
        "SELECT id FROM r').write.json(sys.argv[2])\n"
    )
    out, other = tmp_path / "out", tmp_path / "other"
    code, _, err = run_cli(capsys, "run", str(script), "--store", str(tmp_path / "s"), str(out), str(other))
    assert code == 0, err
    written, refused = read_run(tmp_path / "s").entries
    assert written.status == "eager" and written.target == str(out)
    made = sorted(p.name for p in out.iterdir() if p.name.startswith("part-"))
    assert len(made) == 2 and all(name.endswith(".parquet") and "snappy" not in name for name in made)
    assert sorted(spark.read.parquet(str(out)).toPandas().id) == list(range(6))
    assert refused.status == "skipped" and refused.reason.startswith("UnsupportedOperatorError")
    assert sorted(spark.read.json(str(other)).toPandas().id) == [0, 2, 4]


def test_ui_delegates_and_debug_shows_tracebacks(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import ember.ui

    script = tmp_path / "quiet.py"
    script.write_text("x = 1\n")
    assert main(["run", str(script), "--store", str(tmp_path / "s")]) == 0
    served: list[tuple[str, str, int]] = []
    monkeypatch.setattr(ember.ui, "serve", lambda store, host, port: served.append((store, host, port)))
    assert main(["ui", str(tmp_path / "s"), "--port", "9999"]) == 0
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "views.toml").write_text("")  # declared views need no `ember run`
    assert main(["ui", str(tmp_path / "v")]) == 0
    (tmp_path / "saved").mkdir()  # stores saved with lin.save: the page says what it finds
    assert main(["ui", str(tmp_path / "saved")]) == 0
    assert served == [(str(tmp_path / "s"), "127.0.0.1", 9999), (str(tmp_path / "v"), "127.0.0.1", 8765),
                      (str(tmp_path / "saved"), "127.0.0.1", 8765)]
    capsys.readouterr()
    code, _, err = run_cli(capsys, "--debug", "ls", str(tmp_path / "missing"))
    assert code == 1 and "Traceback" in err and "no store at" in err


KEYED_JOB = '''
import sys
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader
import ember

class Reader(DataSourceReader):
    def read(self, partition):
        yield from reversed([(i, "fr" if i % 2 else "de") for i in range(6)])

class Nations(DataSource):
    @classmethod
    def name(cls):
        return "ember_cli_nations"
    def schema(self):
        return "id int, nation string"
    def reader(self, schema):
        return Reader()

spark = SparkSession.builder.getOrCreate()
spark.dataSource.register(Nations)
df = ember.source(spark.read.format("ember_cli_nations").load(), "people", key=["id"])
rows = df.groupBy("nation").count().orderBy("nation").collect()
open(sys.argv[1], "w").write(str([(r.nation, r[1]) for r in rows]))
'''


def test_keyed_source_traced_by_keys(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Python data source declared keyed in the script: `ember trace` prints its keys
    (the store holds keys, not rows) and `--forward --keys` chooses rows by key."""
    script = tmp_path / "keyed.py"
    script.write_text(KEYED_JOB)
    code, _, _ = run_cli(capsys, "run", str(script), "--store", str(tmp_path / "s"), str(tmp_path / "out.txt"))
    assert code == 0 and (tmp_path / "out.txt").read_text() == "[('de', 3), ('fr', 3)]"
    [entry] = read_run(tmp_path / "s").entries
    code, out, err = run_cli(capsys, "trace", str(tmp_path / "s"), entry.name, "--backward", "--oids", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["sources"]["people"] == {"count": 3, "keys": [{"id": 1}, {"id": 3}, {"id": 5}]}
    code, out, _ = run_cli(capsys, "trace", str(tmp_path / "s"), entry.name, "--forward", "people", "--keys", "[2, 5]", "--json")
    assert code == 0 and json.loads(out)["oids"] == [0, 1]
    code, _, err = run_cli(capsys, "trace", str(tmp_path / "s"), entry.name, "--forward", "people", "--ids", "2")
    assert code != 0 and "keys=" in err
