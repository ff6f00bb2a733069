"""Realistic sample landing logs (SPEC §2) with planted, known answers in `truth.json`."""

from pipeline.generate.core import generate

__all__ = ["generate"]
