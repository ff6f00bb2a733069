"""Every table of the lake, declared once, in the order data flows: one module per stage
(`ingest` → `feedback` → `semantic` → `memory` → `examples` → `preference` → `publish`), each
table with its columns and polars types, primary key, partitioning, owning asset and the comment
the warehouse, the analyst snapshot and the Dagster catalog show for it.

What reads this registry (the way pudl's `metadata/resources` drives its IO and checks):
`pipeline.storage.lake.Lake` refuses a frame that does not match its table on write and returns the
declared columns on read (also for a table not yet written) — `enforce`; `assets.partitions`
gives every asset its `dagster/column_schema`; `pipeline.publish.analytics` takes the comments;
`checks(name)` is the pandera schema of a table (types, primary key unique and not null). A
stage that needs a table's schema asks here: `schema("memory_conflicts")`.

Every table an asset writes is an asset of the same name (ingest's `events` is the asset
`raw_events`), so the lineage the catalog shows is the one the code reads and writes. This
package imports nothing else of the pipeline: every other module may import it.
"""

from pipeline.tables.declaration import (
    EVENT_COLUMNS,
    FEEDBACK_COLUMNS,
    INTERACTION_COLUMNS,
    LOAD_DATE,
    MEMORY_COLUMNS,
    SIGNALS,
    TENANT,
    TYPE_COUNT_FIELDS,
    Role,
    Table,
)
from pipeline.tables.enforce import KeyViolation, SchemaMismatch, as_declared, checks, conform
from pipeline.tables.publish import PACK_SUMMARY, PACK_SUMMARY_DESCRIPTIONS
from pipeline.tables.registry import (
    ASSET_OF_TABLE,
    BOOKKEEPING,
    COMMENTS,
    HIVE_TYPES,
    PARTITION_COLUMNS,
    SHARED_TABLES,
    TABLES,
    asset_name,
    column_description,
    columns,
    empty,
    schema,
    table,
    table_name,
    table_of_asset,
    table_with_columns,
)

__all__ = [
    "ASSET_OF_TABLE",
    "BOOKKEEPING",
    "COMMENTS",
    "EVENT_COLUMNS",
    "FEEDBACK_COLUMNS",
    "HIVE_TYPES",
    "INTERACTION_COLUMNS",
    "LOAD_DATE",
    "MEMORY_COLUMNS",
    "PACK_SUMMARY",
    "PACK_SUMMARY_DESCRIPTIONS",
    "PARTITION_COLUMNS",
    "SHARED_TABLES",
    "SIGNALS",
    "TABLES",
    "TENANT",
    "TYPE_COUNT_FIELDS",
    "KeyViolation",
    "Role",
    "SchemaMismatch",
    "Table",
    "as_declared",
    "asset_name",
    "checks",
    "column_description",
    "columns",
    "conform",
    "empty",
    "schema",
    "table",
    "table_name",
    "table_of_asset",
    "table_with_columns",
]
