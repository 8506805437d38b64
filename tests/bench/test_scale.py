"""The scale benchmark (bench/scale.py) end to end on tiny data: its quick mode's path (a
child process per scale, one query, one round) writes a record, a page and a plot into a
temporary results folder. Timings are the benchmark's business, never asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import scale

pytestmark = pytest.mark.jvm  # the benchmark starts Spark in a child process


def test_quick_mode_writes_a_record_page_and_plot(tpch_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "tpch"
    data.mkdir()
    (data / "sf0.01").symlink_to(tpch_dir.resolve())  # the benchmark reads sf<scale> under its data root
    out = tmp_path / "benchmarks"

    argv = ["--quick", "--scales", "0.01", "--queries", "3", "--trace-repeat", "1", "--no-lazy",
            "--driver-memory", "1g", "--data-root", str(data), "--out", str(out), "--logs", str(tmp_path / "logs")]
    assert scale.main(argv) == 0

    [record] = [json.loads(line) for line in (out / "history" / "scale.jsonl").read_text().splitlines()]
    assert record["bench"] == "scale" and "complete" not in record
    assert record["params"]["rounds"] == 1  # from --quick; the scales and queries given win
    [row] = record["rows"]
    assert "error" not in row, row
    assert (row["scale"], row["n"], row["runs"]) == (0.01, 3, 1)
    assert row["output_rows"] == 10 and 0 < row["back_rids"] <= row["lineage_rids"]
    assert 0 < row["index_bytes"] < row["store_bytes"] and row["input_bytes"] > row["store_bytes"]
    assert row["jvm_rss"] > 0 and row["python_rss"] > 0
    page = (out / "scale.md").read_text()
    assert "| 0.01 | Q3 | 1 |" in page and "## Targets (issue 68)" in page
    assert (out / "scale.png").stat().st_size > 0
    assert (tmp_path / "logs" / "scale-sf0.01.log").exists()


def test_the_page_keeps_the_latest_row_of_each_scale_and_query(tmp_path: Path) -> None:
    history = tmp_path / "history" / "scale.jsonl"
    history.parent.mkdir()
    earlier = [{"date": "2026-01-01T00:00:00", "rows": [{"scale": 1.0, "n": 1, "plain": 5.0},
                                                        {"scale": 10.0, "n": 1, "plain": 50.0}]},
               {"date": "2026-01-02T00:00:00", "complete": False, "rows": [{"scale": 10.0, "n": 1, "plain": 9.0}]}]
    history.write_text("".join(json.dumps(r) + "\n" for r in earlier))

    shown = scale.merged([{"scale": 1.0, "n": 1, "plain": 4.0}], tmp_path, "2026-01-03T00:00:00")

    assert [(r["scale"], r["plain"], r["run"][:10]) for r in shown] == [(1.0, 4.0, "2026-01-03"), (10.0, 50.0, "2026-01-01")]
