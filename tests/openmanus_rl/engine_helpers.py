"""`Recording`: a generator wrapper that keeps what the real engine sampled, for token-for-token checks."""

from __future__ import annotations

from typing import Any


class Recording:
    """Passes ``generate_sequences`` calls to ``inner`` and keeps every (prompt ids, sampled ids, log-probs,
    finish reason) it returned, in call order."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.samples: list[tuple[list[int], list[int], list[float], str]] = []

    def generate_sequences(self, data: Any) -> Any:
        out = self.inner.generate_sequences(data)
        nt = out.non_tensor_batch
        for i, prompt in enumerate(data.non_tensor_batch["prompt_ids"]):
            self.samples.append(
                (
                    list(prompt),
                    [int(x) for x in nt["response_ids"][i]],
                    [float(x) for x in nt["response_log_probs"][i]],
                    str(nt["finish_reason"][i]),
                )
            )
        return out
