"""What the demo, the tests and the benchmarks share, and users do not get: TPC-H and
TPC-DS workloads, the `make demo` job, and a headless browser for the web page's tests.
Not part of the installed package."""
