"""Every key a `DataProto` carries in ``batch`` (tensors) or ``non_tensor_batch`` (one object per row): its shape,
dtype and who writes it. Code names keys through the constants here; ``tests/verl/test_batch_keys.py`` fails on a
key written or read anywhere that is not listed, and on a listed key that nothing writes.

Shapes: ``B`` rows, ``P`` prompt tokens (left-padded), ``T`` response tokens (right-padded), ``L = P + T``.
A training row is one trajectory (or one model turn, step-wise): its prompt, then its model turns and the
observations between them, as one response.
"""

from __future__ import annotations

import dataclasses

TENSOR, ROWS = "tensor", "non_tensor"  # where a key lives: DataProto.batch or DataProto.non_tensor_batch


@dataclasses.dataclass(frozen=True)
class Key:
    name: str
    where: str  # TENSOR or ROWS
    shape: str  # a tensor's shape, or the type of one row's object
    dtype: str
    writer: str  # the module(s) that write it
    meaning: str


KEYS: dict[str, Key] = {}


def _key(name: str, where: str, shape: str, dtype: str, writer: str, meaning: str) -> str:
    KEYS[name] = Key(name, where, shape, dtype, writer, meaning)
    return name


_PACK = "verl.utils.batch.pack_sequences"
_ROLLOUTS = "the rollout plugins (openmanus_rl.agent.output, openmanus_rl.gateway.output, verl.trainer.ppo.single_turn)"
_AGENT = "openmanus_rl.agent.output"
_GATEWAY = "openmanus_rl.gateway.output"
_TRAINER = "verl.trainer.ppo.ray_trainer"
_ENGINE = "the generation call (verl.workers.fsdp_workers, openmanus_rl.experts.rollout, openmanus_rl.gateway)"
_REQUEST = "a generation request (openmanus_rl.agent.openmanus_agent, openmanus_rl.gateway.dispatch, single_turn)"
_DATASET = "verl.utils.dataset.read_tasks: a column of the task parquet, carried on each of its rows"

# ---- model inputs: every pass reads these
PROMPTS = _key("prompts", TENSOR, "(B, P)", "int64", _PACK, "prompt token ids, left-padded")
RESPONSES = _key("responses", TENSOR, "(B, T)", "int64", _PACK, "response token ids, right-padded")
INPUT_IDS = _key("input_ids", TENSOR, "(B, L)", "int64", _PACK, "prompts then responses")
ATTENTION_MASK = _key("attention_mask", TENSOR, "(B, L)", "int64", _PACK, "1 on real tokens")
POSITION_IDS = _key("position_ids", TENSOR, "(B, L)", "int64", _PACK, "positions from the attention mask")
RESPONSE_MASK = _key(
    "response_mask", TENSOR, "(B, T)", "int64", f"{_PACK}; step_plan pads with 0 rows",
    "1 on model-sampled tokens (the loss mask), 0 on observations, padding and failed rows",
)  # fmt: skip
ROLLOUT_LOG_PROBS = _key(
    "rollout_log_probs", TENSOR, "(B, T)", "float32", _ROLLOUTS, "the engine's log-prob of each sampled token"
)

# ---- what the rollout says of each row
UID = _key("uid", ROWS, "str", "object", f"{_ROLLOUTS}; the driver renames refills", "the group: one task's rows")
TASK_ID = _key("task_id", ROWS, "int | str", "object", _ROLLOUTS, "the env task the row played")
DATA_SOURCE = _key("data_source", ROWS, "str", "object", f"{_AGENT}, {_GATEWAY}, {_DATASET}", "env or dataset name")
SEED = _key("seed", ROWS, "int", "object", f"{_ROLLOUTS}, {_REQUEST}", "the sampling seed of the row (or request)")
FAILED = _key(
    "failed", ROWS, "bool", "object", f"{_ROLLOUTS}; verl.trainer.ppo.reward.mark_failed",
    "an env, engine or reward error: out of every group, loss and metric",
)  # fmt: skip
STATUS = _key("status", ROWS, "str", "object", _ROLLOUTS, "how the episode ended (done, max_turns, failed, padding)")
ERROR = _key("error", ROWS, "str", "object", f"{_ROLLOUTS}; mark_failed", "why the row failed ('' if it did not)")
NUM_TURNS = _key("num_turns", ROWS, "int", "object", _ROLLOUTS, "model turns in the episode")
SUCCESS = _key("success", ROWS, "bool | None", "object", _ROLLOUTS, "the env's verdict (None: the reward path decides)")
ENV_REWARD = _key("env_reward", ROWS, "float", "object", f"{_AGENT}, single_turn", "the env's own final reward")
REWARD_TOTAL = _key("reward_total", ROWS, "float", "object", f"{_AGENT}, {_GATEWAY}", "the composed episode reward R")
REWARD_BREAKDOWN = _key("reward_breakdown", ROWS, "dict[str, float]", "object", _AGENT, "R by reward component")
TRAJECTORY = _key("trajectory", ROWS, "list[dict]", "object", _AGENT, "the episode's turns as text (the viewer's)")
ENV_SERVER = _key("env_server", ROWS, "str", "object", _AGENT, "the env server that played it")
TURN_ENDS = _key("turn_ends", ROWS, "list[int]", "object", f"{_AGENT}, {_GATEWAY}", "each model turn's last position")
ANCHOR_OBS = _key("anchor_obs", ROWS, "list[str] | str", "object", _AGENT, "the state each model turn acted on (GiGPO)")
STEP_REWARD = _key("step_reward", ROWS, "list[float] | float", "object", _AGENT, "what each turn earned (GiGPO)")
TRAJ_UID = _key("traj_uid", ROWS, "str", "object", _AGENT, "step-wise rows: the trajectory a turn's row belongs to")
STEP = _key("step", ROWS, "int", "object", _AGENT, "step-wise rows: the turn's index in its trajectory")
REWARD_SCORE_FN = _key(
    "reward_score_fn", ROWS, "str", "object", f"{_GATEWAY}, {_DATASET}", "the reward function that scores the row"
)
SCORED_BY = _key("scored_by", ROWS, "str", "object", _GATEWAY, "who scored the program's episode")
PROGRAM_INFO = _key("program_info", ROWS, "dict", "object", _GATEWAY, "the agent program's own info of its episode")
SAMPLE = _key("sample", ROWS, "int", "object", _GATEWAY, "the sample's index within its gateway session")
PREFIX_BREAKS = _key("prefix_breaks", ROWS, "int", "object", _GATEWAY, "times the program's context was not a prefix")
GATEWAY_SESSION = _key("gateway_session", ROWS, "str", "object", _GATEWAY, "the gateway session's id")

# ---- dataset columns the code reads
PROMPT = _key("prompt", ROWS, "list[dict] | str", "object", _DATASET, "the single-turn prompt")
EXTRA_INFO = _key("extra_info", ROWS, "dict", "object", _DATASET, "task facts; ``index`` is the env task")
REWARD_MODEL = _key("reward_model", ROWS, "dict", "object", _DATASET, "the row's reward spec (e.g. ground truth)")

# ---- generation requests and replies (worker calls)
PROMPT_IDS = _key("prompt_ids", ROWS, "list[int]", "object", _REQUEST, "the context to generate from")
REQUEST_ID = _key("request_id", ROWS, "str", "object", _REQUEST, "asynchronous requests: the caller's id")
ROUTE = _key("route", ROWS, "int", "object", _REQUEST, "asynchronous requests: served by rank route % world size")
RESPONSE_IDS = _key("response_ids", ROWS, "list[int]", "object", _ENGINE, "the sampled token ids")
RESPONSE_LOG_PROBS = _key("response_log_probs", ROWS, "list[float]", "object", _ENGINE, "their log-probs")
FINISH_REASON = _key("finish_reason", ROWS, "str", "object", _ENGINE, "stop, length or abort")

# ---- what the trainer adds
OLD_LOG_PROBS = _key(
    "old_log_probs", TENSOR, "(B, T)", "float32", "verl.workers.fsdp_workers (compute_log_prob)",
    "log pi_old of each response token, recomputed by the trainer",
)  # fmt: skip
ENTROPYS = _key("entropys", TENSOR, "(B, T)", "float32", "fsdp_workers (compute_log_prob)", "token entropies")
REF_LOG_PROB = _key("ref_log_prob", TENSOR, "(B, T)", "float32", "fsdp_workers (compute_ref_log_prob)", "log pi_ref")
VALUES = _key("values", TENSOR, "(B, T)", "float32", "fsdp_workers (compute_values)", "V of the state before a token")
RM_SCORES = _key("rm_scores", TENSOR, "(B, T)", "float32", "verl.workers.reward_model", "a reward model's scores")
OUTCOME_SCORES = _key(
    "outcome_scores", TENSOR, "(B,)", "float32", "verl.trainer.ppo.reward, model_reward", "each row's outcome score R"
)
TOKEN_LEVEL_SCORES = _key(
    "token_level_scores", TENSOR, "(B, T)", "float32", "verl.trainer.ppo.reward, model_reward",
    "R placed on tokens by the allocation rule",
)  # fmt: skip
TOKEN_LEVEL_REWARDS = _key(
    "token_level_rewards", TENSOR, "(B, T)", "float32", f"{_TRAINER} (compute_advantage)",
    "the scores plus the in-reward KL term, core_algos.kl_reward (the scores when it is off)",
)  # fmt: skip
REWARD_BASELINES = _key(
    "reward_baselines", TENSOR, "(B,)", "float32", "verl.trainer.ppo.collect", "ReMax: the greedy rollout's score"
)
ADVANTAGES = _key("advantages", TENSOR, "(B, T)", "float32", _TRAINER, "the estimator's advantages")
RETURNS = _key("returns", TENSOR, "(B, T)", "float32", _TRAINER, "the estimator's returns (the critic's targets)")
