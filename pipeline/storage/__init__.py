"""Storage under every stage: frames in, files in the home out. The lake (`lake`:
whole-file Parquet writes and reads on a folder or an object store), the append-only caches of
distinct texts (`vectors`), the DuckDB warehouse rebuilt from the lake (`warehouse`), one
writer per part of a home (`homelock`), and what a tenant's pack still owes (`owed`) or must
withhold (`withheld`)."""
