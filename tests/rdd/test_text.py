"""Text input (`rdd.text`): generated text files (UTF-8 or Latin-1, empty lines, with or
without a last line end, 1-4 splits) check that input ids are the lines' own byte offsets,
and re-read lines are decoded as Hadoop decodes them."""

from __future__ import annotations

import gzip
from operator import add
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from ember.rdd import LineageContext, LineageSourceError
from ember.rdd.text import AS_JAVA

# text files: lines of ASCII, Latin-1 or any text (never a line end), empty at times,
# written as UTF-8 or Latin-1, each ended by LF, CRLF or CR, the last at times by none,
# read in 1-4 splits
_TEXTS = {"utf-8": st.text(st.characters(exclude_characters="\r\n", exclude_categories=("Cs",)), max_size=6),
          "latin-1": st.text(st.characters(max_codepoint=0xFF, exclude_characters="\r\n"), max_size=6)}
_ENDS = st.sampled_from(["\n", "\n", "\r\n", "\r"])
texts = st.sampled_from(sorted(_TEXTS)).flatmap(
    lambda enc: st.tuples(st.just(enc), st.lists(st.tuples(_TEXTS[enc], _ENDS), min_size=1, max_size=12), st.booleans()))


def _split_lines(content: bytes) -> list[tuple[int, bytes]]:
    """(offset, bytes) of each line, as Hadoop's reader ends lines: at LF, CRLF or CR."""
    found, start, i = [], 0, 0
    while i < len(content):
        if content[i] in b"\r\n":
            found.append((start, content[start:i]))
            i += 2 if content[i : i + 2] == b"\r\n" else 1
            start = i
        else:
            i += 1
    return found + ([(start, content[start:])] if start < len(content) else [])


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, splits=st.integers(1, 4), pick=st.randoms(use_true_random=False))
def test_generated_text_file_lines_are_their_byte_offsets(
    spark: SparkSession, tmp_path_factory: Any, text: tuple[str, list[tuple[str, str]], bool], splits: int, pick: Any
) -> None:
    """A line count by length over a text file: each count's lines, and the counts a line
    reaches, are the lines' own byte offsets and the lines as Spark read them."""
    encoding, lines, last_end = text
    content = "".join(line + end for line, end in lines).encode(encoding)
    if not last_end:
        content = content.removesuffix(lines[-1][1].encode())
    path = tmp_path_factory.mktemp("text") / "lines.txt"
    path.write_bytes(content)
    offsets = [offset for offset, _ in _split_lines(content)]
    read = spark.sparkContext.textFile(str(path), splits).collect()  # as Spark decodes them
    assert len(read) == len(offsets)
    assume(read)
    lc = LineageContext(spark.sparkContext)
    try:
        source = lc.textFile(str(path), splits)
        counts = source.map(lambda line: (len(line) % 3, 1)).reduceByKey(add)
        assert sorted(counts.collect()) == sorted(
            (k, sum(1 for line in read if len(line) % 3 == k)) for k in {len(line) % 3 for line in read})
        key = len(pick.choice(read)) % 3
        traced = counts.filter(lambda kv: kv[0] == key).getLineage().goBackAll().collectWithIds()
        want = [(offsets[i], line) for i, line in enumerate(read) if len(line) % 3 == key]
        assert sorted((off, line) for (_, _, off), line in traced) == want
        line = pick.choice(read)
        reached = source.filter(lambda x: x == line).getLineage().goNextAll(target=counts).collect()
        assert reached == [(len(line) % 3, sum(1 for x in read if len(x) % 3 == len(line) % 3))]
    finally:
        lc.clear()


_TRICKY = st.sampled_from([0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF])


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(st.one_of(_TRICKY, st.integers(0, 255)), max_size=7).map(bytes))
def test_a_re_read_line_is_decoded_as_hadoop_decodes_it(spark: SparkSession, raw: bytes) -> None:
    """Bytes that are not UTF-8 become U+FFFD as Java's decoder replaces them (`\\xed\\xa0`
    at a line's end is one, Python's own "replace" gives two)."""
    assert raw.decode(errors=AS_JAVA) == spark._jvm.org.apache.hadoop.io.Text(bytearray(raw)).toString()


def test_a_compressed_text_file_is_refused_not_misread(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "words.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("alpha one\nbeta two\n")
    with pytest.raises(LineageSourceError, match="compressed file cannot be re-read by offset"):
        LineageContext(spark.sparkContext).textFile(str(path))
