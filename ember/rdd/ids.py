"""Lineage ids of the RDD capture (Titian's): one int per record at a capture point.

An id names a record at a capture point: its partition there, so a trace can send the id
straight to that partition (the directed shuffle), and `n`, the record's number within
that partition (a byte offset for text input, the element index for `parallelize`, the
output position for every other point). Users see ids as `(point uid, partition, n)`;
inside, an id is one int, `slot << SHIFT | n`, where `slot` numbers the (point, partition)
pairs of a context: an int is a third of a tuple's cost to build, hash and pickle on every
record, and a table of them is a numpy array.
"""

from __future__ import annotations

from collections.abc import Sequence

Ref = int  # slot << SHIFT | n
Row = Sequence[Ref]
SHIFT = 40  # n below 2**40: byte offsets of files up to 1 TB
MASK = (1 << SHIFT) - 1
MAX_SLOTS = 1 << 23  # (point, partition) pairs per context, so an id fits an int64
