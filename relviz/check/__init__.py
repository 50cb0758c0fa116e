"""Check my implementation: compare what your code produced with relviz's reference (see relviz.check.matrix)."""
from relviz.check.matrix import *  # noqa: F401,F403
from relviz.check.matrix import (  # noqa: F401
    FIRST_MISMATCHES, KINDS, MAX_BYTES, MAX_SIDE, SEED_NOTEBOOK, SETTINGS_OF, SIGN, CheckResult, Settings, check,
    fit, load_matrix, reference, variant_matrix,
)
