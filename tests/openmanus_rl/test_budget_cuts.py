"""`scripts/budget_cuts.py`: the budget an expert episode needs, and the smallest budget that cuts at most a share."""

import budget_cuts


def test_an_episode_needs_room_for_its_last_model_turn_to_start():
    # prompt 5 tokens, model 3, observation 4, model 2, observation 3, model 2
    mask = [0] * 5 + [1] * 3 + [0] * 4 + [1] * 2 + [0] * 3 + [1] * 2
    row = {"input_ids": list(range(len(mask))), "loss_mask": mask}
    # 12 response tokens come before the last model turn: 1024 + 12 + 96 + 1
    assert budget_cuts.needed_budget(row, max_prompt_length=1024, max_response_length=96) == 1133
    one_turn = {"input_ids": [0] * 7, "loss_mask": [0] * 5 + [1] * 2}
    assert budget_cuts.needed_budget(one_turn, max_prompt_length=1024, max_response_length=96) == 1121


def test_the_smallest_budget_in_steps_of_256():
    needs = [1133, 2000, 2600, 3100]
    assert budget_cuts.smallest_budget(needs, 0.25) == 2816  # keeps 3 of 4: 2600 -> 11 x 256
    assert budget_cuts.smallest_budget(needs, 0.05) == 3328  # keeps all: 3100 -> 13 x 256
    assert budget_cuts.smallest_budget([512], 0.0) == 512
