"""Feedback (SPEC §4.1): interactions, feedback and memory statements → one quality
score per memory (`scores`: smoothed score, Wilson lower bound, reputation)."""
