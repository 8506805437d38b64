"""The engines ember runs on, at the edges: Spark (the job, the capture, plan out and plan
in) and DuckDB (in-process reads of sources and side tables). Nothing above this layer
touches py4j or DuckDB's SQL dialect directly."""
