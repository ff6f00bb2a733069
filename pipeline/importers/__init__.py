"""Importers: other log formats → the raw-log contract (SPEC §2.1)."""

from pipeline.importers.locomo import import_locomo
from pipeline.importers.oasst import import_oasst

__all__ = ["import_locomo", "import_oasst"]
