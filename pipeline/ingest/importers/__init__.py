"""Importers: other log formats → the raw-log contract (SPEC §2.1)."""

from pipeline.ingest.importers.locomo import import_locomo
from pipeline.ingest.importers.oasst import import_oasst

__all__ = ["import_locomo", "import_oasst"]
