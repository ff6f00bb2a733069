"""One config tree per run: the `settings` resource holds every stage's knobs, each section
generated from the stage's own frozen dataclass in `pipeline/`, so a knob is declared once (name,
type, default, comment beside it) and every asset and check of a run sees the same values (the
decay snapshot and the feedback scores share `scoring`; the promotion check reads `audit`).

The launchpad shows the tree (`resources: {settings: {config: {dpo: {max_steps: 10}}}}`), and
`tenant_nightly_fast` is `tenant_nightly` with a smaller tree (jobs/nightly.py). The embedding
model is not a run knob: it names the vectors of the home's cache (pipeline/semantic/embed)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

import dagster as dg
from pydantic import create_model

from pipeline.examples.fewshot import FewShotConfig
from pipeline.examples.skill_stats import SkillConfig
from pipeline.feedback.scores import ScoringConfig
from pipeline.memory.audit import AuditConfig
from pipeline.memory.decay import DecayConfig
from pipeline.preference.dpo.settings import DPOPolicyConfig
from pipeline.preference.pairs import PairConfig
from pipeline.preference.templates.registry import TemplateConfig
from pipeline.semantic.conflicts import ConflictConfig
from pipeline.semantic.consolidate import ConsolidationConfig

Stage = TypeVar("Stage")
SCALARS = (int, float, bool, str)


class StageConfig(dg.Config):
    """Run config of one stage: every field of `stage` whose type run config can carry (the rest,
    e.g. decay's per-type rules, keep the dataclass default)."""

    stage: ClassVar[type]

    def build(self, **fixed: Any) -> Any:
        """The stage's dataclass with this run's values (lists back to tuples) and `fixed` ones."""
        values = {
            name: tuple(value) if isinstance(value, list) else value
            for name, value in self.model_dump().items()
            if name in {f.name for f in dataclasses.fields(self.stage)}
        }
        return self.stage(**values | fixed)


def _run_config_type(hint: Any) -> Any | None:
    """The type run config gives a dataclass field (None: the field stays out of run config)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint in SCALARS:
        return hint
    if origin is Literal:
        return str
    if origin in (Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        scalar = _run_config_type(inner[0]) if len(inner) == 1 else None
        return scalar | None if scalar in SCALARS else None
    if origin is tuple and args[:1] == (str,):
        return list[str]
    if origin is dict and args == (str, float):
        return dict[str, float]
    return None


def stage_config(stage: type[Stage], **extra: Any) -> type[StageConfig]:
    """A `dg.Config` class with the fields of the frozen dataclass `stage` (and `extra` ones, as
    `name=(type, default)`), defaults taken from a default instance."""
    hints, default = typing.get_type_hints(stage), stage()
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(stage):  # type: ignore[arg-type]
        kind = _run_config_type(hints[field.name])
        if kind is not None:
            value = getattr(default, field.name)
            fields[field.name] = (kind, list(value) if isinstance(value, tuple) else value)
    model = create_model(  # type: ignore[call-overload]
        f"{stage.__name__}Run", __base__=StageConfig, __doc__=stage.__doc__, **fields, **extra
    )
    model.stage = stage
    return typing.cast(type[StageConfig], model)


ScoringRun = stage_config(ScoringConfig)
ConflictRun = stage_config(ConflictConfig)
ConsolidationRun = stage_config(ConsolidationConfig)
DecayRun = stage_config(DecayConfig)
AuditRun = stage_config(AuditConfig)
SkillRun = stage_config(SkillConfig)
FewShotRun = stage_config(FewShotConfig)
PairRun = stage_config(PairConfig)
DPOPolicyRun = stage_config(DPOPolicyConfig)
TemplateRun = stage_config(TemplateConfig)


class StageSettings(dg.ConfigurableResource):
    """Every stage's knobs for one run, in data order (defaults: the stages' own)."""

    scoring: ScoringRun = ScoringRun()  # type: ignore[valid-type]
    conflicts: ConflictRun = ConflictRun()  # type: ignore[valid-type]
    consolidation: ConsolidationRun = ConsolidationRun()  # type: ignore[valid-type]
    decay: DecayRun = DecayRun()  # type: ignore[valid-type]
    audit: AuditRun = AuditRun()  # type: ignore[valid-type]
    skills: SkillRun = SkillRun()  # type: ignore[valid-type]
    few_shot: FewShotRun = FewShotRun()  # type: ignore[valid-type]
    pairs: PairRun = PairRun()  # type: ignore[valid-type]
    dpo: DPOPolicyRun = DPOPolicyRun()  # type: ignore[valid-type]
    templates: TemplateRun = TemplateRun()  # type: ignore[valid-type]

    def stage(self, name: str) -> Any:
        """The stage's dataclass with this run's values, e.g. `settings.stage("dpo")`."""
        return getattr(self, name).build()


# What `tenant_nightly_fast` (tests, the demo, the quick bench) changes: a smoke-sized policy.
FAST: dict[str, dict[str, Any]] = {"dpo": {"max_steps": 10, "sft_num_train_epochs": 0.0}}


def settings_config(*trees: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """Run config of the `settings` resource: the stage sections of `trees` merged in order
    (a later tree's knob wins), e.g. `settings_config(FAST, {"dpo": {"min_pairs": 5}})`."""
    merged: dict[str, dict[str, Any]] = {}
    for tree in trees:
        for stage, knobs in (tree or {}).items():
            merged[stage] = merged.get(stage, {}) | knobs
    return {"resources": {"settings": {"config": merged}}}
