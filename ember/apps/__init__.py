"""Applications built on lineage (Smoke §6.5): functional-dependency profiling."""

from __future__ import annotations

from ember.apps.fd import FDProfiler, FDViolations, Violation, fd_violations

__all__ = ["FDProfiler", "FDViolations", "Violation", "fd_violations"]
