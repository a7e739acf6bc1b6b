"""1.0 when the final answer equals the ground truth (after trimming and lower-casing), else 0.0.

The final answer is the text of the last ``<answer>...</answer>`` in the
model's final turn when present, else the whole final turn.
"""

from __future__ import annotations

import re
from typing import Any

from verl.utils.reward_score import register

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@register("exact_match")
def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    found = _ANSWER.findall(solution_str or "")
    answer = found[-1] if found else (solution_str or "")
    return float(answer.strip().lower() == str(ground_truth).strip().lower())
