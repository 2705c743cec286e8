"""The regression verdict's defaults, apart from its numpy arithmetic (backend/reporting/
regression.py re-exports them): the check's spec and the CLI's `regress` flags default to them,
and every CLI call builds that parser."""

from __future__ import annotations

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20250
MIN_CHANGE = 0.05
