"""Benchmark results as data (bench/results.py, bench/summary.py): a run's record, its page
and the summary, on a tiny fake result (no Spark); and the committed summary is what the
committed history gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import results, summary
from bench.results import RESULTS, Run, figure

MACHINE = {"host": "box", "arch": "x86_64", "cpus": 2, "cpu_model": "Fake CPU", "memory_gb": 24.0,
           "python": "3.11.7", "pyspark": "4.3.0", "java": "17.0.15", "load": [1.0, 0.5, 0.25]}
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A `Run` factory writing under tmp_path/benchmarks, with a fixed machine and commit."""
    monkeypatch.setattr(results, "machine", lambda: dict(MACHINE))
    monkeypatch.setattr(results, "commit", lambda: (SHA, False))

    def make(argv: list[str], bench: str = "capture") -> Run:
        return Run(bench, tmp_path / "benchmarks", argv)

    return make


def fake(r: Run, inject: float, scale: float = 1.0, final: bool = True) -> Path:
    rows = [{"n": 1, "plain": 1.5, "inject_over": inject, "back": float("nan")}, {"n": 6, "plain": 0.3, "inject_over": 0.2}]
    headline = [
        figure("inject_median", "Inject overhead, median", inject, "%"),
        figure("back", "One-row backward trace, ids, median", 0.42, "ms", 1, note="worst 3 ms, Q6"),
        figure("perm", "Perm-style overhead at least twice Inject's", "1 of 2"),
    ]
    return r.write("Fake capture", ["Body line.", "", "| query | inject |"], rows, headline, {"scale": scale, "out": "x"},
                   final=final)


def records(tmp_path: Path, bench: str = "capture") -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (tmp_path / "benchmarks" / "history" / f"{bench}.jsonl").read_text().splitlines()]


def test_a_run_writes_its_record_page_and_the_summary(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    page = fake(run(["--scale", "1", "--queries", "1", "6"]), 0.031)

    [record] = records(tmp_path)
    assert record["bench"] == "capture" and record["commit"] == SHA and record["machine"] == MACHINE
    assert record["command"] == "python -m bench.capture --scale 1 --queries 1 6"
    assert record["params"] == {"scale": 1.0}  # where it wrote is not a parameter
    assert record["rows"][0]["back"] is None  # NaN is stored as null: the file stays JSON
    assert record["headline"][0] == {"key": "inject_median", "label": "Inject overhead, median", "value": 0.031,
                                     "unit": "%", "digits": 0}
    assert "complete" not in record and record["date"][:2] == "20"

    text = page.read_text()
    assert page == tmp_path / "benchmarks" / "capture.md"
    assert text.startswith("# Fake capture\n\n- Run: ")
    assert "- Machine: box, x86_64, 2 CPUs, Fake CPU, 24 GB; Python 3.11.7, PySpark 4.3.0, Java 17.0.15" in text
    assert "- Command: `python -m bench.capture --scale 1 --queries 1 6`" in text
    assert "- Commit: `0123456`\n\nBody line.\n" in text

    made = (tmp_path / "benchmarks.md").read_text()
    assert "## [Capture overhead and traces, TPC-H](benchmarks/capture.md)" in made
    assert "| Inject overhead, median | 3 % | ≤ 5 % (result overhead, median): met |" in made
    assert "| One-row backward trace, ids, median | 0.4 ms (worst 3 ms, Q6) | ≤ 10 ms: met |" in made
    assert "| Perm-style overhead at least twice Inject's | 1 of 2 |  |" in made
    assert "1 run recorded since" in made and "`bench.phases`" in made  # not run yet


def test_a_run_written_as_it_goes_keeps_one_record(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = run(["--scale", "1"])
    fake(r, 0.5, final=False)
    assert records(tmp_path)[0]["complete"] is False
    fake(r, 0.4)
    [record] = records(tmp_path)
    assert record["headline"][0]["value"] == 0.4 and "complete" not in record


def test_the_summary_shows_the_latest_complete_run(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fake(run(["--scale", "1"]), 0.5)
    fake(run(["--scale", "1", "--runs", "9"]), 0.04)
    made = (tmp_path / "benchmarks.md").read_text()
    assert "2 runs recorded" in made and "`python -m bench.capture --scale 1 --runs 9`" in made
    assert "| Inject overhead, median | 4 % |" in made

    fake(run(["--scale", "1", "--runs", "2"]), 0.9, final=False)
    made = (tmp_path / "benchmarks.md").read_text()
    assert "| Inject overhead, median | 4 % |" in made and "is partial" in made
    assert len(records(tmp_path)) == 3


def test_a_target_is_judged_only_at_its_scale(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fake(run(["--scale", "0.01"]), 0.5, scale=0.01)
    made = (tmp_path / "benchmarks.md").read_text()
    assert "| Inject overhead, median | 50 % | ≤ 5 % (result overhead, median): set for SF1 |" in made


def test_the_committed_summary_is_what_the_history_gives() -> None:
    committed = RESULTS.parent / "benchmarks.md"
    assert committed.read_text() == summary.render(RESULTS), "run `python -m bench.summary` and commit docs/benchmarks.md"
    assert summary.main(["--check"]) == 0


def test_the_committed_history_is_one_record_per_line() -> None:
    files = sorted((RESULTS / "history").glob("*.jsonl"))
    assert {f.stem for f in files} >= {"capture", "tpcds", "store"}
    for f in files:
        found = [json.loads(line) for line in f.read_text().splitlines()]
        assert found and all(r["bench"] == f.stem for r in found)
        assert [r["date"] for r in found] == sorted(r["date"] for r in found), f"{f.name}: oldest first"
        for r in found:
            assert {"date", "command", "commit", "machine", "headline", "rows"} <= r.keys()
            assert all({"key", "label", "value", "unit"} <= fig.keys() for fig in r["headline"])
            assert (RESULTS / f"{f.stem}.md").exists()
