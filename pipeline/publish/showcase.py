"""A first look at a published pack, as an app sees it (the end of `memorypack demo`)."""

from __future__ import annotations

import os
from collections import Counter

from memorypack import MemoryPack
from memorypack.fs import Location

SHOWN_EXAMPLES = 3
CLIP = 90


def _clip(text: str, width: int = CLIP) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe_pack(path: str | os.PathLike[str] | Location) -> str:
    """Load the live pack with the loader and show few-shot examples, one explained memory, a template."""
    pack = MemoryPack.load(path)
    files = pack.manifest["files"]
    size = sum(int(f["bytes"]) for f in files.values())
    lines = [
        f"Memory pack {pack.tenant_id} {pack.version}: {len(pack)} memories, "
        f"{size / 1024:.0f} KB, verified ({len(files)} files)",
        f"  loaded with: MemoryPack.load({str(path)!r})",
    ]
    systems = pack.few_shot_systems()
    if systems:
        system = systems[0]
        lines.append(f"\nFew-shot examples for system {system!r}:")
        for example in pack.few_shot(system, k=SHOWN_EXAMPLES):
            if example.is_corrected:
                quality = "a corrected answer"
            elif example.quality is not None:
                quality = f"quality {example.quality:+.2f} from {example.n_feedback} votes"
            else:
                quality = "quality n/a"
            lines.append(f"  - [{example.kind}, {quality}] {_clip(example.input, 60)}")
            lines.append(f"      → {_clip(example.output, 80)}")
    else:
        lines.append("\nFew-shot examples: none in this pack yet")

    contacts = Counter(c for c in pack.memories.column("contact_id").to_pylist() if c)
    if contacts:
        contact = contacts.most_common(1)[0][0]
        ranked = pack.memories_for(contact, k=1)
        if ranked:
            best = ranked[0]
            lines.append(f"\nTop memory for contact {contact!r} (score {best.score:.2f}):")
            lines.append(f"  {_clip(pack.explain(best.memory_id) or '', 200)}")
    skills = [s for s in pack.skills() if pack.template(s) is not None]
    if skills:
        chosen = max(skills, key=lambda s: len(pack.template_history(s)))
        template = pack.template(chosen)
        assert template is not None
        score = (
            f", eval accuracy {template.eval_accuracy:.2f}"
            if template.eval_accuracy is not None
            else ""
        )
        lines.append(
            f"\nCurrent template of {chosen!r} (version {template.version} of "
            f"{len(pack.template_history(chosen))}{score}):"
        )
        lines.append(f"  {_clip(template.template, 200)}")
    else:
        lines.append("\nTemplates: none in this pack yet")
    return "\n".join(lines)
