"""Realistic sample landing logs (SPEC §2) with planted, known answers in `truth.json`."""

from pipeline.generate.core import FEEDBACK_PER_INTERACTION, generate

__all__ = ["FEEDBACK_PER_INTERACTION", "generate"]
