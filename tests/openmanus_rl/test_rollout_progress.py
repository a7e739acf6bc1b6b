"""Where a long rollout is: the ``[rollout]`` progress lines (``agent.progress_every_s``)."""

import pytest

from openmanus_rl.agent import AgentConfig
from openmanus_rl.agent.openmanus_agent import RolloutProgress
from openmanus_rl.agent.trajectory import Trajectory


def trajectories(statuses):
    out = [
        Trajectory(row=i, copy=0, uid=str(i), task_id=i, data_source="webshop", seed=i) for i in range(len(statuses))
    ]
    for t, status in zip(out, statuses):
        t.status = status
    return out


def test_the_line_says_how_many_finished_and_how_long_the_rest_should_take():
    progress = RolloutProgress(trajectories(["done", "failed", "running", "running"]), "eval")
    assert progress.line(2, progress.start + 30.0) == "[rollout] 2/4 trajectories finished, 30 s (~30 s left)"
    assert progress.line(1, progress.start + 10.0) == "[rollout] 1/4 trajectories finished, 10 s (~30 s left)"
    assert progress.line(0, progress.start + 5.0) == "[rollout] 0/4 trajectories finished, 5 s"


def test_lines_are_printed_every_so_often_and_not_at_all_by_default(capsys):
    quiet = RolloutProgress(trajectories(["done", "running"]), "train")
    quiet.start -= 100.0
    quiet.update()
    assert capsys.readouterr().out == ""

    progress = RolloutProgress(trajectories(["done", "running"]), "eval", every_s=10.0)
    progress.update()  # less than 10 s since the start: nothing yet
    assert capsys.readouterr().out == ""
    progress.start -= 20.0
    progress.printed -= 20.0
    progress.update()
    assert capsys.readouterr().out == "[rollout] 1/2 trajectories finished, 20 s (~20 s left)\n"
    progress.update()  # printed just now
    assert capsys.readouterr().out == ""


def test_progress_every_s_is_checked():
    assert AgentConfig().progress_every_s == 0
    with pytest.raises(ValueError, match=r"progress_every_s must be a number >= 0 \(0: no progress lines\), got -1"):
        AgentConfig(progress_every_s=-1).validate()
