"""Erasure and export of one person (GDPR art. 17 and 15): a tenant and contact id →
the person found (`subject`; `scrub` finds and removes their rows in any table), a tombstone
ingest honours (`tombstones`), their rows gone from the lake, caches, policies and warehouse
(`lake`), from landing files and run history (`files`) and from every kept pack version
(`packs`); `person` runs it (`forget`, `export`), and `requests` for the `erasure` events a
night's logs carry. The tombstones' read side is ingest's (`pipeline.ingest.tombstones`)."""
