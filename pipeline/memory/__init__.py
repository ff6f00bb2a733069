"""Memory (SPEC §4.2): scores and reinforcement → what is believed about each person
as of a date: decay snapshots (`decay`), then the monthly audit and its promotion candidates
(`audit`)."""
