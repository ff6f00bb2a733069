"""The text `memorypack demo` ends with: few-shot examples, one explained memory, one template."""

from pathlib import Path

from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.showcase import describe_pack
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake


def test_describe_pack(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    version = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF))).version
    text = describe_pack(paths.packs / "acme")
    assert f"Memory pack acme {version}: 6 memories" in text
    assert "Few-shot examples for system 'support':" in text
    assert "Where is my order? mail me at [EMAIL]" in text and "→ It ships tomorrow." in text
    assert "[support_reply, quality +0.60 from 3 votes]" in text
    assert "[support_reply, a corrected answer]" in text
    assert "Top memory for contact 'c1'" in text
    assert 'because of this memory: "Always email, never call" (explicit_instruction' in text
    assert "Current template of 'concise_response' (version 2 of 2, eval accuracy 0.75):" in text
    assert "confirm the order number first" in text
