"""Semantic (SPEC §4.3–4.4): memory texts → unit vectors (`embed`), statement pairs
that cannot both be true (`conflicts`), and one summary per cluster of near-duplicates with the
reinforcement it gives (`consolidate`, its clustering inside)."""
