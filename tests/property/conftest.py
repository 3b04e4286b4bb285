"""Hypothesis profiles for the property tests.

`ci` (the default): a fixed budget of examples, derandomized (the same examples on every
run, so CI never shrinks differently from one run to the next) and no example database
(nothing written into the checkout). `long`: many more examples, random, for a run by hand:
`HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/property --timeout 0`
(docs/development.md).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis keeps caches of its own (constants found in the code, Unicode tables) under
# `.hypothesis/` in the working directory: here, outside the checkout.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / f"hypothesis-{os.getuid()}")

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "long", parent=settings.get_profile("ci"), max_examples=3000, derandomize=False
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
