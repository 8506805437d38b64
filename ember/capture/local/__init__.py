"""Side tables read in-process by DuckDB, beside the job or after it.

A side table fetched after the job is restricted to the groups the lineage points at
(`capture.sides`): a semi join's witnesses for the probe values the result holds, an
aggregate's rows for the groups that reach the output, a window's partitions. When its
rows come from Parquet scans of local files under the operators `engines.duck.compile`
reads (filters, projections, aggregates, expands, unions, windows, inner, outer, semi
and anti joins), a Spark job would spend most of its time being scheduled; DuckDB reads
the same files, with the same row-group skipping, in-process, joined with the wanted keys
(`engines.duck.wanted`), and returns them sorted for the index. Anything the compiler
cannot translate, and any error while reading, leaves the table to Spark.

- `reads`: one capture's reads, each query run once (`Reads`), and whether DuckDB can read a plan.
- `batch`: tables of one wave whose queries are one, read once for all of their keys.
- `inputs`: aggregate inputs two tables read, read once, beside the job.
- `packing`: rows sorted as packed integers after the read, not by DuckDB.
- `plans`: what a read reads of a side table's plan.
"""
