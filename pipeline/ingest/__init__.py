"""Ingest (SPEC §2): a landing folder's log files → validated events, quarantined lines
with one reason each, load statistics, and each tenant's typed tables (interactions, feedback,
memory statements).

Read in data order: contracts (the raw-log contract; memory_types, what each memory type is
worth, SPEC §4.2's table), tenant_ids, tombstones (what an erasure keeps out), listing (which
entries of a landing folder are read: regular files only), landing (a file's bytes, streamed),
lines (batches of lines; blank ones counted), rawjson (the one bounded reader of a raw line),
parse (each line's JSON), rules (the contract as polars rules), quarantined (rows counted, not
one a line), dedup, folder (`ingest_folder`), partitions (a run over several load dates), layout
(the typed tables, per tenant); importers bring other log formats to the contract."""
