"""The run's terminal view (scripts/quiet.py): which lines of a real run's output a user sees, with literal lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from quiet import plain, shown_lines

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "quiet.py"

# lines as a training run prints them (a Ray worker's prefix in colour, vLLM's log format, a progress bar)
RUN = [
    "[config] ok\n",
    "2026-11-28 17:25:28,862\tINFO worker.py:2038 -- Started a local Ray instance.\n",
    "\x1b[36m(ActorRolloutRefWorker pid=10721)\x1b[0m [precision] actor rank 0: "
    "bfloat16 (set explicitly in the config)\n",
    "\x1b[36m(ActorRolloutRefWorker pid=10721)\x1b[0m \rLoading weights:   "
    "0%|          | 0/272\rLoading weights: 100%|##| 272/272\n",
    "\x1b[36m(ActorRolloutRefWorker pid=10721)\x1b[0m (MainProcess pid=10721) WARNING 11-28 17:26:33 "
    "[layerwise.py:266] RotaryEmbedding: Failed to load weights\n",
    "\x1b[36m(ActorRolloutRefWorker pid=10721)\x1b[0m [rank0]:[W1128 17:25:40.610235661 "
    "utils.cpp:68] Warning: NUMA binding\n",
    "  cpu = _conversion_method_template(device=torch.device('cpu'))\n",
    "[step 1/3] succ=0.25 reward=0.7333 (~1.5 min left)\n",
    "[summary] where the time went\n",
    "  RL step 1                              47.9 s\n",
    "  total                                 212.0 s\n",
    "Traceback (most recent call last):\n",
    '  File "main_ppo.py", line 3, in <module>\n',
    "ValueError: agent.max_turns must be >= 1\n",
    "(MainProcess pid=7) ERROR 11-28 17:30:00 [core.py:9] EngineCore failed\n",
    "Error executing job with overrides: []\n",
]


def test_only_tagged_lines_errors_and_what_is_indented_under_them_are_shown():
    assert list(shown_lines(RUN)) == [
        "[config] ok",
        "[precision] actor rank 0: bfloat16 (set explicitly in the config)",
        "[step 1/3] succ=0.25 reward=0.7333 (~1.5 min left)",
        "[summary] where the time went",
        "  RL step 1                              47.9 s",
        "  total                                 212.0 s",
        "Traceback (most recent call last):",
        '  File "main_ppo.py", line 3, in <module>',
        "ValueError: agent.max_turns must be >= 1",
        "ERROR 11-28 17:30:00 [core.py:9] EngineCore failed",
        "Error executing job with overrides: []",
    ]


def test_plain_text_is_what_a_terminal_leaves():
    assert plain("\x1b[36m(CriticWorker pid=3, ip=10.0.0.2)\x1b[0m [precision] critic") == "[precision] critic"
    assert plain("(W pid=1) \rLoading 0%\rLoading 100%\r\n") == "Loading 100%"
    assert plain("\r\n") == ""


def test_every_line_goes_to_the_log_and_the_shown_ones_to_the_terminal(tmp_path):
    log = tmp_path / "run" / "run.log"
    log.parent.mkdir()
    log.write_text("an earlier run\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--log", str(log)], input="".join(RUN).encode(), capture_output=True, check=True
    )
    assert out.stdout.decode().splitlines() == list(shown_lines(RUN))
    assert log.read_bytes() == ("an earlier run\n" + "".join(RUN)).encode()  # appended, byte for byte
    everything = subprocess.run(
        [sys.executable, str(SCRIPT), "--log", str(tmp_path / "all.log"), "--all"],
        input="".join(RUN).encode(),
        capture_output=True,
        check=True,
    )
    assert everything.stdout == "".join(RUN).encode()
