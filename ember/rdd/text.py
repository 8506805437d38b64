"""Text lines as Hadoop's reader makes them (`sc.textFile`), found again by byte offset:
a line ends at LF, CRLF or a lone CR, and bytes that are not UTF-8 decode to U+FFFD as
Java's decoder replaces them (registered as the `AS_JAVA` codec error handler).
"""

from __future__ import annotations

import codecs
import mmap
from collections.abc import Iterator

from ember.rdd.ids import Ref


def read_lines(path: str, slot: int, ns: list[int]) -> Iterator[tuple[Ref, str]]:
    """The lines starting at byte offsets `ns` of `path`."""
    if not ns:
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for n in ns:
            yield slot | n, m[n : _line_end(m, n)].decode(errors=AS_JAVA)  # as Spark decodes


def _java_malformed(b: bytes, i: int) -> int:
    """How many bytes from `i` Java's UTF-8 decoder (Hadoop's `Text`, so `sc.textFile`)
    replaces with one U+FFFD: Python replaces the longest valid prefix's bytes one by one
    (`\xed\xa0` at a line's end is two U+FFFD there, one in Java)."""
    b1, left = b[i], len(b) - i

    def bad(k: int) -> bool:  # byte i+k is not a continuation byte
        return (b[i + k] & 0xC0) != 0x80

    if 0xE0 <= b1 <= 0xEF:
        if (b1 == 0xE0 and left > 1 and (b[i + 1] & 0xE0) == 0x80) or (left > 1 and bad(1)):
            return 1
        if left < 3:
            return left  # cut short by the line's end: the rest is one
        return 2 if bad(2) else 3  # (three: a surrogate's encoding)
    if 0xF0 <= b1 <= 0xF4:
        if left > 1 and ((b1 == 0xF0 and not 0x90 <= b[i + 1] <= 0xBF) or (b1 == 0xF4 and (b[i + 1] & 0xF0) != 0x80) or bad(1)):
            return 1
        if left > 2 and bad(2):
            return 2
        return left if left < 4 else 3
    return 1


def _java_replace(e: UnicodeError) -> tuple[str, int]:
    assert isinstance(e, UnicodeDecodeError)
    return "\ufffd", e.start + _java_malformed(e.object, e.start)


AS_JAVA = "ember-java-replace"
codecs.register_error(AS_JAVA, _java_replace)


def _line_end(m: mmap.mmap, pos: int) -> int:
    """Where the line starting at `pos` ends: at its LF or CR (Hadoop ends lines at either)."""
    lf = m.find(b"\n", pos)
    stop = len(m) if lf < 0 else lf
    cr = m.find(b"\r", pos, stop)
    return stop if cr < 0 else cr


def line_after(m: mmap.mmap, pos: int) -> int:
    """Where the line after the one starting at `pos` starts (past an LF, a CRLF or a CR)."""
    end = _line_end(m, pos)
    return end + 2 if m[end : end + 2] == b"\r\n" else end + 1
