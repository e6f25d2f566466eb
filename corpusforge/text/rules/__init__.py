"""Heuristic quality rule families used by the ``text.quality`` stage.

Each family is a pydantic config with an ``evaluate(features) -> RuleResult`` method: the
checks (reason, failed mask, detail formatter) in priority order, the scores to write, and
optionally a rewritten text (C4 removes lines). The stage tokenizes each batch once and
hands the same features to every family.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RuleResult:
    checks: list = field(default_factory=list)          # [(reason, failed mask, describe(idx))]
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    new_text: object | None = None                       # polars Series replacing `text` for kept rows
    counters: dict[str, int] = field(default_factory=dict)
