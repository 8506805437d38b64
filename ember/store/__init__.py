"""Lineage indexes: slots and side tables composed into arrays that answer traces in-process."""
