"""A generated error log (Titian's running example) and the program over it, shared by the
workflow tests and the retry job. The program works on tracked and on plain RDDs alike."""

from __future__ import annotations

import random
from dataclasses import dataclass
from operator import add
from pathlib import Path
from typing import Any

DSCR = {"1": "Warning", "2": "Timeout", "3": "Disk", "4": "Failure"}
TAGS = ["NETWORK", "Zookeeper", "Guest", "db", "cache"]


@dataclass
class Log:
    path: Path
    lines: list[str]
    offsets: list[int]  # byte offset of each line, computed while writing


def write_log(path: Path, n: int = 3000, seed: int = 7, extra: tuple[str, ...] = ()) -> Log:
    """ERROR lines carry `code<TAB>tag`; code 4 is rarer, so the most frequent code is unique."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        if rng.random() < 0.4:
            code = rng.choices("1234", weights=[5, 3, 2, 1])[0]
            lines.append(f"ERROR\t{code}\t{rng.choice(TAGS)} request {i} failed")
        else:
            lines.append(f"INFO\tserved request {i} in {rng.randint(1, 900)} ms")
    for j, line in enumerate(extra):
        lines.insert(len(lines) * (j + 1) // (len(extra) + 1), line)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line.encode()) + 1
    path.write_text("".join(f"{line}\n" for line in lines))
    return Log(path, lines, offsets)


def errors_of(lines: Any) -> Any:
    return lines.filter(lambda line: line.startswith("ERROR"))


def counts_of(errors: Any) -> Any:
    return errors.map(lambda line: (line.split("\t")[1], 1)).reduceByKey(add)


def reports_of(counts: Any) -> Any:
    return counts.map(lambda kv: (DSCR[kv[0]], kv[1]))


def program(lines: Any) -> Any:
    return reports_of(counts_of(errors_of(lines)))
