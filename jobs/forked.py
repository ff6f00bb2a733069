"""What the fork server imports before it forks the worker processes of a night (jobs/runner.py):
the heavy libraries and the PII engine (spaCy's NER model, presidio's recognizers, name lists),
loaded once a night instead of once a run (~6 s each). Each worker is still a fresh process:
nothing here holds a tenant's data.

Nothing here may import polars: its allocator and spill threads start at import, and a fork keeps
only the thread that forks (tests/test_tenants_apart.py holds this)."""

import contextlib

import dagster  # noqa: F401
import onnxruntime  # noqa: F401
import pyarrow.dataset  # noqa: F401
import sentence_transformers  # noqa: F401
import torch  # noqa: F401
import transformers.models.gpt2.modeling_gpt2  # noqa: F401

from pipeline.pii import analyse

# A text that loads what a first analysis loads lazily: the NER model and recognizers, Faker's
# name and place lists, phonenumbers' region metadata.
WARM_UP = "Priya Lopez in Berlin: call 0612345678901234 or mail a@b.example"

# Only a head start: if it fails here, a tenant's run loads it and says what failed.
with contextlib.suppress(Exception):
    analyse([WARM_UP])
