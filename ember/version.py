"""The package's version, written into saved stores and OpenLineage events."""

__version__ = "0.1.0"
