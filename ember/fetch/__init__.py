"""Source rows by `ember_rid`: read only what a trace needs."""
