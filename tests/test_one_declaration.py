"""Every column is declared once, in the table registry (pipeline.tables) or the pack format
(memorypack.columns): no other module of pipeline/, assets/ or jobs/ holds a module-level schema or
list of column names (issue 44). A stage that needs columns asks the registry for them."""

from __future__ import annotations

import ast
from pathlib import Path

from memorypack.columns import FILE_COLUMNS
from pipeline import tables

ROOT = Path(__file__).resolve().parents[1]
DECLARED = {c for t in tables.TABLES.values() for c in t.columns} | {
    c for columns in FILE_COLUMNS.values() for c in columns
}
# Module-level constants that name columns but restate no table: what the pack does to a column
# by its kind, the keys a stage groups by, the fields a rule reads, and the schemas of frames no
# table holds (intermediate steps, the raw lines, run figures). Each stays with the rule it serves.
_BY_KIND = "a treatment by kind of column"
_KEYS = "the keys a stage groups by or reads"
_STEP = "an intermediate frame no table holds"
ALLOWED = {
    ("pipeline/publish/content.py", "ENUM_COLUMNS"): _BY_KIND,
    ("pipeline/publish/content.py", "ID_COLUMNS"): _BY_KIND,
    ("pipeline/publish/content.py", "MACHINE_COLUMNS"): _BY_KIND,
    ("pipeline/publish/redaction.py", "PEOPLE_COLUMNS"): _BY_KIND,
    ("pipeline/erasure/subject.py", "TEXT_FIELDS"): _BY_KIND,
    ("pipeline/preference/pairs/finalize.py", "TEXTS"): _BY_KIND,
    ("pipeline/examples/fewshot.py", "GROUP_KEYS"): _KEYS,
    ("pipeline/semantic/consolidate/members.py", "INTERACTION_KEYS"): _KEYS,
    ("pipeline/ingest/rules.py", "_ENVELOPE"): _KEYS,
    ("pipeline/ingest/quarantined.py", "_SAME"): _KEYS,
    ("pipeline/preference/pairs/table.py", "INTERACTION_COLUMNS"): _KEYS,
    ("pipeline/preference/templates/candidates.py", "EVIDENCE_FEEDBACK_COLUMNS"): _KEYS,
    ("pipeline/preference/dpo/report.py", "PER_TENANT_FIGURES"): _STEP,
    ("assets/ingest.py", "INGEST_FIGURES"): _STEP,
    ("pipeline/examples/fewshot.py", "BOOST_SCHEMA"): _STEP,
    ("pipeline/usage/joint.py", "EFFECT_SCHEMA"): _STEP,
}


def _polars_type(node: ast.expr) -> bool:
    while isinstance(node, ast.Call | ast.Attribute):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id == "pl"


def _declares(value: ast.expr) -> bool:
    """A literal schema ({"col": pl.Type, …}), a pl.Schema(…) or a literal list of ≥ 3 column names."""
    if isinstance(value, ast.Call) and _polars_type(value.func):
        return isinstance(value.func, ast.Attribute) and value.func.attr == "Schema"
    if isinstance(value, ast.Dict) and value.values:
        return all(v is not None and _polars_type(v) for v in value.values) and all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys
        )
    wrapped = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.args
    if wrapped and value.func.id in ("frozenset", "set", "tuple", "list"):
        return _declares(value.args[0])
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
        return len(names) == len(value.elts) >= 3 and set(names) <= DECLARED
    return False


def restated() -> list[tuple[str, str]]:
    found = []
    for folder in ("pipeline", "assets", "jobs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if where.startswith("pipeline/tables/"):
                continue
            for node in ast.parse(path.read_text()).body:
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AnnAssign) and node.value is not None
                    else []
                )
                value = getattr(node, "value", None)
                for target in targets:
                    if isinstance(target, ast.Name) and value is not None and _declares(value):
                        found.append((where, target.id))
    return found


def test_no_module_restates_a_column_list_or_schema() -> None:
    found = restated()
    assert [f for f in found if f not in ALLOWED] == []
    # An allowance that no longer matches anything is removed, not kept.
    assert set(ALLOWED) <= set(found)


def test_the_scan_sees_a_restated_schema() -> None:
    schema = ast.parse('S = {"tenant_id": pl.String(), "ts": pl.Datetime("us", "UTC")}').body[0]
    names = ast.parse('C = ["tenant_id", "memory_id", "confidence"]').body[0]
    words = ast.parse('W = ["never", "always", "not"]').body[0]
    assert isinstance(schema, ast.Assign) and _declares(schema.value)
    assert isinstance(names, ast.Assign) and _declares(names.value)
    assert isinstance(words, ast.Assign) and not _declares(words.value)
