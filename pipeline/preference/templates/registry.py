"""The base skill templates shipped with the package and the knobs of refinement; the prompt
format a policy sees is the policy's (`dpo.settings.format_prompt`)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

REGISTRY_RESOURCE = "skill_templates.yaml"


SOURCE_REGISTRY = "registry"


SOURCE_REFINED = "refined"


@dataclass(frozen=True)
class SkillTemplate:
    skill_id: str
    description: str
    template: str
    version: int


@dataclass(frozen=True)
class TemplateConfig:
    """Knobs of template refinement (SPEC §4.7)."""

    # A candidate replaces the current template only when its win on the held-out pairs is
    # significant: a one-sided exact sign test on the pairs where the two disagree, p < `alpha`.
    # Even a clean sweep needs 5 such pairs (0.5**5 = 0.031 < 0.05), so fewer eval pairs than
    # that can never show a win: they are not scored.
    alpha: float = 0.05
    min_eval_pairs: int = 5
    margin_epsilon: float = 1e-3  # at equal accuracy, a candidate must beat the margin by this
    min_reason_count: int = 1  # feedback rows with a reason before it becomes guidance
    max_examples: int = 1  # best outputs / corrections quoted in a candidate
    example_max_chars: int = 300
    default_max_sentences: int = 3


def load_registry(resource: str = REGISTRY_RESOURCE) -> dict[str, SkillTemplate]:
    """The base skill templates shipped in the package (`pipeline/preference/templates/skill_templates.yaml`)."""
    text = (
        resources.files("pipeline.preference.templates")
        .joinpath(resource)
        .read_text(encoding="utf-8")
    )
    return parse_registry(text)


def parse_registry(text: str) -> dict[str, SkillTemplate]:
    raw = yaml.safe_load(text) or {}
    skills = raw.get("skills") or {}
    registry: dict[str, SkillTemplate] = {}
    for skill_id, spec in skills.items():
        template = str(spec.get("template") or "").strip()
        if not template:
            raise ValueError(f"skill template registry: {skill_id} has no template")
        registry[str(skill_id)] = SkillTemplate(
            skill_id=str(skill_id),
            description=str(spec.get("description") or "").strip(),
            template=template,
            version=int(spec.get("version", 1)),
        )
    return registry
