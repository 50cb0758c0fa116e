"""Make the repo root and tests/ importable, wherever pytest is started from; bound property tests by work."""
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# Hypothesis' default 200 ms deadline per example is a wall-clock bound: on 2 shared cores under load it fails
# tests whose work is fine. Every property test is bounded by its max_examples instead.
settings.register_profile("relviz", deadline=None)
settings.load_profile("relviz")
