"""`ember.infer`: lazy lineage by predicate push-down (PredTrace), nothing captured at run time.

The function is `ember.infer.infer.infer` (exported as `ember.infer`)."""
