"""The stage groups in the order data flows: every edge of the asset graph goes forward here."""

INGEST = "ingest"  # landing folder → events, quarantine, typed tables
FEEDBACK = "feedback"  # what people said about each answer and memory
USAGE = "usage"  # what the pack put into calls, and whether it helped
SEMANTIC = "semantic"  # embeddings, conflicts, consolidation
MEMORY = "memory"  # what we believe about each person today: decay, audit
EXAMPLES = "examples"  # what works: skill statistics, few-shot examples
PREFERENCE = "preference"  # pairs → DPO policy → templates
PUBLISH = "publish"  # packs and the analyst snapshot

STAGES = (INGEST, FEEDBACK, USAGE, SEMANTIC, MEMORY, EXAMPLES, PREFERENCE, PUBLISH)
