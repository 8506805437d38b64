"""Titian's debugging workflows on a generated log, each checked against plain Python over
the same lines (regexes and counters), never against ember's own output."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ember.rdd import CulpritError, LineageContext, ddmin
from ember.rdd.points import Captured
from tests.rdd.logs import DSCR, Log, counts_of, errors_of, program, reports_of, write_log

PARTITIONS = 4


@pytest.fixture
def lc(spark: SparkSession) -> Iterator[LineageContext]:
    context = LineageContext(spark.sparkContext)
    yield context
    context.clear()


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return write_log(tmp_path / "log.txt")


def code_lines(log: Log, code: str) -> list[str]:
    return [line for line in log.lines if re.match(rf"ERROR\t{code}\t", line)]


def oracle_reports(lines: list[str]) -> list[tuple[str, int]]:
    codes = Counter(m.group(1) for line in lines if (m := re.match(r"ERROR\t(\d)\t", line)))
    return sorted((DSCR[c], n) for c, n in codes.items())


def test_results_are_unchanged(lc: LineageContext, log: Log) -> None:
    assert sorted(program(lc.textFile(str(log.path), PARTITIONS)).collect()) == oracle_reports(log.lines)


def test_s1_most_frequent_error_goes_back_to_exactly_its_lines(lc: LineageContext, log: Log) -> None:
    reports = program(lc.textFile(str(log.path), PARTITIONS))
    top = reports.sortBy(lambda kv: kv[1], ascending=False).take(1)[0]
    trace = reports.filter(lambda kv: kv == top).getLineage().goBackAll()
    code = next(c for c, d in DSCR.items() if d == top[0])
    assert code == Counter(re.findall(r"^ERROR\t(\d)", "\n".join(log.lines), re.M)).most_common(1)[0][0]
    lines = trace.collect()
    assert sorted(lines) == sorted(code_lines(log, code))
    assert len(lines) == top[1]


def test_input_ids_are_byte_offsets_that_reread_the_line(lc: LineageContext, log: Log) -> None:
    reports = program(lc.textFile(str(log.path), PARTITIONS))
    reports.collect()
    traced = reports.filter(lambda kv: kv[0] == "Disk").getLineage().goBackAll().collectWithIds()
    disk = set(code_lines(log, "3"))
    by_offset = dict(zip(log.offsets, log.lines, strict=True))
    assert {off for (_, _, off), _ in traced} == {off for off, line in by_offset.items() if line in disk}
    assert all(by_offset[off] == line for (_, _, off), line in traced)
    assert len({pid for (_, pid, _), _ in traced}) == PARTITIONS  # every split holds Disk lines


def test_a_file_that_is_not_utf8_is_traced_by_its_own_bytes(lc: LineageContext, tmp_path: Path) -> None:
    """Latin-1 lines: Spark decodes their bytes with replacement characters, which are
    longer in UTF-8 than the byte they replace; ids stay the lines' own byte offsets."""
    lines = [f"n{i} caf\xe9" if i % 3 == 0 else f"n{i} plain" for i in range(40)]
    path = tmp_path / "latin.txt"
    path.write_bytes("\n".join(lines).encode("latin-1") + b"\n")
    offsets = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    counts = lc.textFile(str(path), 3).map(lambda line: (line.split()[0], 1)).reduceByKey(lambda a, b: a + b)
    counts.collect()
    for i in (2, 3, 38, 39):  # plain and Latin-1 lines, in the first and the last split
        traced = counts.filter(lambda kv, k=f"n{i}": kv[0] == k).getLineage().goBackAll().collectWithIds()
        assert [(off, line) for (_, _, off), line in traced] == [(offsets[i], lines[i].replace("\xe9", "\ufffd"))]


def test_lines_ended_by_crlf_or_a_lone_cr_are_traced_by_their_own_offsets(lc: LineageContext, tmp_path: Path) -> None:
    """Hadoop's reader ends a line at LF, CRLF or CR: a file saved on Windows has CRLF
    past its first lines (once refused only in its first 64 KB, drifting after), an old
    Mac file lone CRs; ids are the lines' byte offsets and records the lines themselves."""
    lines = [f"n{i} {'x' * (10 + i % 7)}" for i in range(6000)]
    ends = ["\n" if i < 5000 else "\r\n" if i % 2 else "\r" for i in range(6000)]  # CRs from byte ~97 K on
    content = "".join(line + end for line, end in zip(lines, ends, strict=True)).encode()
    path = tmp_path / "mixed.txt"
    path.write_bytes(content)
    offsets = [sum(len(x) + len(e) for x, e in zip(lines[:i], ends[:i], strict=True)) for i in range(len(lines))]
    counts = lc.textFile(str(path), 3).map(lambda line: (line.split()[0], 1)).reduceByKey(lambda a, b: a + b)
    assert len(counts.collect()) == len(lines)
    for i in (0, 4999, 5000, 5001, 5999):
        traced = counts.filter(lambda kv, k=f"n{i}": kv[0] == k).getLineage().goBackAll().collectWithIds()
        assert [(off, line) for (_, _, off), line in traced] == [(offsets[i], lines[i])]


def test_s2_forward_from_keyword_lines_reaches_their_reports(lc: LineageContext, log: Log) -> None:
    errors = errors_of(lc.textFile(str(log.path), PARTITIONS))
    reports = reports_of(counts_of(errors))
    reports.collect()
    forward = errors.filter(lambda line: "Zookeeper" in line and "\t4\t" in line).getLineage()
    reached = forward.goNextAll().collect()
    wanted = {m.group(1) for line in log.lines if (m := re.match(r"ERROR\t(4)\tZookeeper", line))}
    assert wanted == {"4"}
    assert sorted(reached) == [r for r in oracle_reports(log.lines) if r[0] in {DSCR[c] for c in wanted}]
    network = errors.filter(lambda line: "NETWORK" in line).getLineage().goNextAll(target=reports)
    codes = {m.group(1) for line in log.lines if (m := re.match(r"ERROR\t(\d)\tNETWORK", line))}
    assert sorted(network.collect()) == [r for r in oracle_reports(log.lines) if r[0] in {DSCR[c] for c in codes}]


def test_s3_replay_without_guest_lines(lc: LineageContext, log: Log) -> None:
    reports = program(lc.textFile(str(log.path), PARTITIONS))
    reports.collect()
    kept = reports.getLineage().goBackAll().filter(lambda line: "Guest" not in line)
    replayed = sorted(program(kept).collect())
    assert replayed == oracle_reports([line for line in log.lines if "Guest" not in line])
    assert replayed != oracle_reports(log.lines)


def test_s4_step_by_step_through_reducer_combiner_and_input(
    lc: LineageContext, log: Log, spark: SparkSession
) -> None:
    reports = program(lc.textFile(str(log.path), PARTITIONS))
    reports.collect()
    failure = reports.filter(lambda kv: kv[0] == "Failure").getLineage()
    truth = code_lines(log, "4")
    splits = spark.sparkContext.textFile(str(log.path), PARTITIONS).glom().collect()
    per_split = [sum(line in truth for line in split) for split in splits]

    assert failure.collect() == [("Failure", len(truth))]
    reducer = failure.goBack()
    assert reducer.collect() == [("4", len(truth))]
    combiner = reducer.goBack()
    combined = combiner.collectWithIds()
    assert sorted(rec for _, rec in combined) == sorted(("4", n) for n in per_split if n)
    assert sorted(pid for (_, pid, _), _ in combined) == [p for p, n in enumerate(per_split) if n]
    lines = combiner.goBack()
    assert sorted(lines.collect()) == sorted(truth)
    assert lines.goBack().collect() == lines.collect()  # the input is the end of the trace
    assert sorted(failure.goBackAll().collect()) == sorted(truth)


def test_tracing_is_lazy(lc: LineageContext, log: Log, spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    reports = program(lc.textFile(str(log.path), PARTITIONS))
    reports.collect()
    sc = spark.sparkContext
    lookups: list[str] = []
    for name in ("local_parents", "parents_of", "local_children", "children_of"):
        original = getattr(Captured, name)
        monkeypatch.setattr(Captured, name, lambda self, *a, _f=original, _n=name: (lookups.append(_n), _f(self, *a))[1])
    sc.setJobGroup("ember-lazy", "trace")
    try:
        back = reports.getLineage().goBack().goBack().goBackAll()
        errors_of(lc.textFile(str(log.path), PARTITIONS)).getLineage().goNext(target=reports).goNextAll(target=reports)
        assert list(sc.statusTracker().getJobIdsForGroup("ember-lazy")) == [] and lookups == []
        assert back.count() == len([line for line in log.lines if line.startswith("ERROR")])
        assert lookups  # the action ran the steps (from the table files: no job needed)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def test_s7_crash_culprit_and_skip(lc: LineageContext, tmp_path: Path) -> None:
    bad = "ERROR malformed line without a code"
    log = write_log(tmp_path / "log.txt", extra=(bad,))
    with pytest.raises(CulpritError) as caught:
        program(lc.textFile(str(log.path), PARTITIONS)).collect()
    offset = log.offsets[log.lines.index(bad)]
    assert caught.value.record == bad
    assert caught.value.lineage_id[2] == offset
    assert caught.value.inputs == [(caught.value.lineage_id, bad)]
    assert "IndexError" in caught.value.cause

    lc.skip_failing_records()
    assert sorted(program(lc.textFile(str(log.path), PARTITIONS)).collect()) == oracle_reports(log.lines)
    assert [(rec, ref[2]) for rec, ref in lc.skipped_records()] == [(bad, offset)]


def word_count(lines: Any) -> Any:
    return lines.flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b)


def test_s8_word_count_outlier_and_delta_debugging(
    lc: LineageContext, tmp_path: Path, spark: SparkSession
) -> None:
    token = "zzbogus"
    bad = " ".join([token] * 60)
    normal = (f"served {token} once", f"{token} seen in cache", f"retry {token}")
    log = write_log(tmp_path / "log.txt", n=1500, extra=(*normal, bad))
    counts = word_count(lc.textFile(str(log.path), PARTITIONS))
    suspicious = counts.filter(lambda kv: kv[0] == token)
    assert suspicious.collect() == [(token, 63)]
    seed = suspicious.getLineage().goBackAll().collect()
    assert sorted(seed) == sorted(line for line in log.lines if re.search(rf"\b{token}\b", line))

    sc = spark.sparkContext

    def fails(lines: list[str]) -> bool:
        return any(n > 10 for w, n in word_count(sc.parallelize(lines, 2)).collect() if w == token)

    assert ddmin(seed, fails) == [bad]
    replay = dict(word_count(sc.parallelize([line for line in seed if line != bad], 2)).collect())
    assert replay[token] == 3
