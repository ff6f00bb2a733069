"""What the fork server imports before it forks the worker processes of a night (jobs/runner.py):
the heavy libraries a tenant's run uses, the Dagster instance's storage (~1 s of imports a run
otherwise) and the PII engine (spaCy's NER model, presidio's recognizers, name lists), loaded once
a night instead of once a run (~7 s each). Not sentence-transformers (~1.6 s with scikit-learn):
only the one-off ONNX export of a new home and the "torch" embedding backend use it. Each worker is
still a fresh process: nothing here holds a tenant's data.

Nothing here may import polars: its allocator and spill threads start at import, and a fork keeps
only the thread that forks (tests/test_tenants_apart.py holds this)."""

import contextlib

import dagster  # noqa: F401
import onnx  # noqa: F401
import onnxruntime  # noqa: F401
import pyarrow.dataset  # noqa: F401
import torch  # noqa: F401
import transformers.models.gpt2.modeling_gpt2  # noqa: F401
import trl  # noqa: F401
import upath.implementations.local  # noqa: F401

from assets.dagster_internals import preload_instance_storage
from pipeline.pii.detect import warm_up

preload_instance_storage()

# Only a head start: if it fails here, a tenant's run loads it and says what failed.
with contextlib.suppress(Exception):
    warm_up()
