"""Spark's side of ember: reading the optimized plan into the IR, building the rewritten
IR back into a Catalyst plan, numbering source rows, and the Java helpers behind them."""
