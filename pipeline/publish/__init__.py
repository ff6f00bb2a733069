"""Publish (SPEC §5–6): every stage's tables → one verified memory pack per tenant
and the analyst snapshot.

Read in data order: content (what a pack holds), inputs, memories, models, build, guards (their
own PII detector is `pipeline.pii.guard`), disk, store, writer, remote (an object store); commands
and showcase (`memorypack pack`, a first look); then the snapshot's redaction, names and parts
(each run's redacted rows), and analytics (`analytics.duckdb`, put together from the parts)."""
