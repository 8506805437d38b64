"""Backward and forward traces over captured lineage, answered in-process."""
