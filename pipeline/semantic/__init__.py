"""Semantic (SPEC §4.3–4.4): memory texts → unit vectors (`embed`), statement pairs
that cannot both be true (`conflicts`), whether two statements say the same thing (`values`: the
values each names; `judgement`: a pair judgement learned from people's labels, trained by
`training`), and one summary per cluster of near-duplicates with the reinforcement it gives
(`consolidate`, its clustering inside)."""
