"""Examples (SPEC §4.5, §4.8): interactions, scores and vectors → per-user skill
statistics and preference vectors (`skill_stats`), and the few-shot example sets (`fewshot`)."""
