"""Spark's optimized logical plan, read into ember's small relational IR."""
