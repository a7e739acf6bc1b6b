#!/usr/bin/env bash
# The learning result, reproducibly: base model -> SFT warm start -> GRPO from it, each evaluated greedily on the
# same held-out test tasks of one env (default WebShop), plus the expert on those tasks (the ceiling), and paired
# comparisons.
#
#   scripts/learning_run.sh [--env_name webshop] [--n_demos 32] [--steps 14] [--eval_limit 500] [--base_limit 100]
#                           [--out results/learning] [--program PACKAGE.MODULE:FUNCTION] [--arm NAME]
#                           [--seeds 1,2,3] [--test_freq 3] [--dev_tasks 64] [--action_format react|xml|tool_call]
#                           [trainer overrides, e.g. algorithm.adv_estimator=gigpo trainer.max_minutes=70]
#
# One RL step is 4 tasks x 4 samples = 16 trajectories and one optimiser step (so the old log-probs come from the
# update itself, no separate pass), lr 5e-6 with a KL loss to the warm start (coefficient 0.02, low_var_kl: one
# reference pass a step), dynamic sampling on: the recipe of docs/results/learning_v3 (+0.18 success on the 500 WebShop
# test goals in 14 steps; lr 2e-5 without the KL term gave +0.034, docs/results/learning_v2_500). Gradient checkpointing is
# off (the update ran 1.32x faster on box E for 0.6 GiB more peak RSS, docs/learning.md). The base model is evaluated
# on --base_limit tasks only: it scores about 0 and its evaluation costs as much as the others'. Turn caps, token
# budgets and observation cuts are the run's defaults (agent.* in ppo_trainer.yaml, the env's EnvSpec) everywhere: in
# the demonstrations, RL, every evaluation and the expert's. trainer.max_minutes=M ends RL after the step that spends
# M minutes (validated and checkpointed), so a run fits a sitting whatever a step costs on the box.
# Dev success is measured before the first step too (the default job skips that validation): the plot starts at step 0.
#
# Choosing the policy: RL validates on --dev_tasks dev tasks every --test_freq steps and keeps the checkpoint with the
# best dev success (trainer.keep_best; step 0 is the warm start). After the run, the last step is evaluated on test as
# <arm>.json and the dev-chosen one as <arm>_best.json (a copy of the last step's or the warm start's result when it is
# one of those): the test split is read only after the choice.
#
# --seeds 1,2,3 runs the RL arm once per seed (trainer.seed and data.seed: sampling, task order) from the same warm
# start, as <arm>_seed<K>.json and <arm>_seed<K>_best.json, then pools every seed file of the arm found in <out> (so
# seeds run on different days add up) against the warm start: <out>/<arm>_seeds.txt/.json and <arm>_best_seeds.*
# (`python -m openmanus_rl.eval seeds`: each seed's paired gain, and the pooled gain with a bootstrap over seeds and
# tasks). A seed's arm takes as long as one run's RL and evaluation.
#
# --action_format writes the built-in agent's demonstrations, plays its evaluations and runs RL in that action format
# (default: agent.action_format of ppo_trainer.yaml, react); the warm start is cached per format.
#
# --program trains and evaluates an agent program through the gateway instead of the built-in agent (e.g.
# examples.webshop_openai_agent:play): the warm start's demonstrations are the program's own episodes with the expert
# answering its calls (scripts/warm_start.py --program), every evaluation plays the program (openmanus_rl.eval --program), and a WebShop server on --env_port (36001)
# serves the program during training; the program finds it there or at $WEBSHOP_URL.
#
# An evaluation whose result file already exists in <out> is reused (greedy decoding on the same tasks gives the
# same result); delete the file to evaluate again. The GRPO run and its evaluation are always redone.
# The RL arm is named after its estimator (algorithm.adv_estimator=gigpo -> <out>/gigpo.json; grpo when not given), or
# --arm NAME (e.g. --arm rm for a run on a reward model's score: reward_model.enable=true reward_model.model.path=DIR).
# Writes <out>/{base,warm_start,<arm>,<arm>_best,expert}.json (+ .tasks.jsonl), <out>/<arm>.metrics.jsonl,
# <out>/phases.jsonl (appended), then scripts/learning_report.py's <out>/comparisons.txt, <out>/dev_success.png
# (validation success on dev against the RL step) and <out>/table.md over every arm in <out>: a second arm run into
# the same <out> (--arm rm) adds to the report instead of replacing it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ENV=webshop; N_DEMOS=32; STEPS=14; EVAL_LIMIT=500; BASE_LIMIT=100; OUT=results/learning; OVERRIDES=(); PROGRAM=""
ENV_PORT=36001; ARM_NAME=""; SEEDS=""; TEST_FREQ=3; DEV_TASKS=64; FORMAT=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --env_name) ENV="$2"; shift 2 ;;
        --n_demos) N_DEMOS="$2"; shift 2 ;;
        --steps) STEPS="$2"; shift 2 ;;
        --eval_limit) EVAL_LIMIT="$2"; shift 2 ;;
        --base_limit) BASE_LIMIT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --program) PROGRAM="$2"; shift 2 ;;
        --env_port) ENV_PORT="$2"; shift 2 ;;
        --arm) ARM_NAME="$2"; shift 2 ;;
        --seeds) SEEDS="$2"; shift 2 ;;
        --test_freq) TEST_FREQ="$2"; shift 2 ;;
        --dev_tasks) DEV_TASKS="$2"; shift 2 ;;
        --action_format) FORMAT="$2"; shift 2 ;;
        *=*) OVERRIDES+=("$1"); shift ;;
        *) echo "usage: scripts/learning_run.sh [--env_name ENV] [--n_demos N] [--steps N] [--eval_limit N] [--base_limit N] [--out DIR]" \
                "[--program PACKAGE.MODULE:FUNCTION] [--env_port PORT] [--arm NAME] [--seeds 1,2,3] [--test_freq 3] [--dev_tasks 64]" \
                "[--action_format FORMAT]" \
                "[overrides]" >&2; exit 2 ;;
    esac
done
[[ -x .venv/bin/python || -n "${VIRTUAL_ENV:-}" ]] || bash scripts/setup.sh
PY="${VIRTUAL_ENV:-$ROOT/.venv}/bin/python"
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"
[[ "$ENV" != *,* ]] || { echo "--env_name: one env per learning run, got $ENV" >&2; exit 2; }
EXP=${ENV}_grpo_learn
ARM=grpo
for item in ${OVERRIDES[@]+"${OVERRIDES[@]}"}; do [[ "$item" == algorithm.adv_estimator=* ]] && ARM="${item#*=}"; done
[[ -z "$ARM_NAME" ]] || ARM="$ARM_NAME"
WARM_ARGS=(); EVAL_ARGS=(); RL_ARGS=()
if [[ -n "$FORMAT" ]]; then
    [[ -z "$PROGRAM" || "$FORMAT" == tool_call ]] || { echo "--action_format: a program speaks tool_call, got $FORMAT" >&2; exit 2; }
    WARM_ARGS=(--action_format "$FORMAT"); EVAL_ARGS=(--action_format "$FORMAT"); RL_ARGS=("agent.action_format=$FORMAT")
fi
if [[ -n "$PROGRAM" ]]; then
    WARM_ARGS=(--program "$PROGRAM")
    EVAL_ARGS=(--program "$PROGRAM")
    RL_ARGS=(agent.action_format=tool_call data.rollout=gateway "+agent.program=$PROGRAM")
fi
START=$SECONDS
phase() {  # appended: the runs of several arms into one <out> keep each other's lines
    echo "{\"arm\": \"$ARM\", \"phase\": \"$1\", \"minutes\": $(( (SECONDS - START) / 60 ))}" | tee -a "$OUT/phases.jsonl" >&2
}
BASE="$("$PY" scripts/prepare_model.py | tail -n 1)"
WARM="$("$PY" scripts/warm_start.py --env_name "$ENV" --model "$BASE" --n_demos "$N_DEMOS" ${WARM_ARGS[@]+"${WARM_ARGS[@]}"})"
evaluate() {  # evaluate <name> <model> <limit> [always]: greedy on the first <limit> test tasks -> <out>/<name>.json
    if [[ -f "$OUT/$1.json" && -z "${4:-}" ]]; then echo "reusing $OUT/$1.json" >&2; return; fi
    "$PY" -m openmanus_rl.eval --model "$2" --env_name "$ENV" --limit "$3" ${EVAL_ARGS[@]+"${EVAL_ARGS[@]}"} --out "$OUT/$1.json"
    phase "eval_$1"
}
phase warm_start
evaluate base "$BASE" "$BASE_LIMIT"
evaluate warm_start "$WARM" "$EVAL_LIMIT"
if [[ -n "$PROGRAM" ]]; then  # the gateway starts no env server: the program's, for the RL run
    "$(dirname "$PY")/agentgym" serve "$ENV" --port "$ENV_PORT" >"$OUT/env_server.log" 2>&1 &
    SERVER_PID=$!
    trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
    export WEBSHOP_URL="http://127.0.0.1:$ENV_PORT"
fi
rl_arm() {  # rl_arm <name> [overrides]: GRPO from the warm start -> <out>/<name>.json (last step), <name>_best.json
    local name="$1"; shift
    rm -rf "outputs/$EXP"
    ./train_grpo.sh --env_name "$ENV" --model "$BASE" --n_demos "$N_DEMOS" --exp_name_suffix _learn \
        trainer.total_training_steps="$STEPS" trainer.val_before_train=true trainer.test_freq="$TEST_FREQ" \
        trainer.save_freq="$STEPS" data.val_max_samples="$DEV_TASKS" trainer.keep_best=true \
        agent.n=4 data.train_batch_size=4 actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.optim.lr=5e-6 \
        actor_rollout_ref.model.enable_gradient_checkpointing=false \
        actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.actor.kl_loss_coef=0.02 algorithm.filter_groups.enable=true \
        ${RL_ARGS[@]+"${RL_ARGS[@]}"} ${OVERRIDES[@]+"${OVERRIDES[@]}"} "$@"
    phase "rl_$name"
    evaluate "$name" "outputs/$EXP/checkpoints" "$EVAL_LIMIT" always
    cp "outputs/$EXP/metrics.jsonl" "$OUT/$name.metrics.jsonl"
    # the dev-chosen policy (checkpoints/best_dev.json): evaluated on test only now, after the choice
    "$PY" - "$OUT" "$name" "outputs/$EXP/checkpoints" <<'PY' >"$OUT/$name.best_source"
import json, sys
from pathlib import Path
out, name, ckpt = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
best = json.loads((ckpt / "best_dev.json").read_text())
last = int((ckpt / "latest_checkpointed_iteration.txt").read_text())
same = name if best["step"] == last else "warm_start" if best["step"] == 0 else None
print(f"{best['step']} {same or best['model']}")
PY
    read -r best_step best_src <"$OUT/$name.best_source"
    echo "[learning_run] $name: best dev success at step $best_step" >&2
    if [[ -f "$OUT/$best_src.json" ]]; then  # the last step or the warm start: that result, under the best's name
        "$PY" - "$OUT" "$best_src" "${name}_best" "$best_step" <<'PY'
import json, shutil, sys
from pathlib import Path
out, src, dst, step = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
summary = json.loads((out / f"{src}.json").read_text())
summary.update(tasks_file=f"{dst}.tasks.jsonl", best_dev_step=step, same_policy_as=f"{src}.json")
(out / f"{dst}.json").write_text(json.dumps(summary, indent=2) + "\n")
shutil.copyfile(out / f"{src}.tasks.jsonl", out / f"{dst}.tasks.jsonl")
PY
    else
        evaluate "${name}_best" "$best_src" "$EVAL_LIMIT" always
    fi
    rm -f "$OUT/$name.best_source"
}
if [[ -z "$SEEDS" ]]; then
    rl_arm "$ARM"
else
    for seed in ${SEEDS//,/ }; do
        rl_arm "${ARM}_seed$seed" trainer.seed="$seed" data.seed="$seed"
    done
fi
[[ -f "$OUT/expert.json" ]] || "$PY" - "$OUT" "$EVAL_LIMIT" "$BASE" "$ENV" <<'PY'
import json, sys
from pathlib import Path
from transformers import AutoTokenizer
from openmanus_rl.experts import evaluate_expert
from openmanus_rl.evaluation.servers import env_server
from verl.utils.yaml_defaults import yaml_value
out, limit, base, env = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
with env_server(env) as url:  # the expert sees observations cut as the agent cuts them, within the env's turn cap
    score = evaluate_expert(env, "test", limit, url, max_obs_length=yaml_value("ppo_trainer", "agent.max_obs_length"),
                            tokenizer=AutoTokenizer.from_pretrained(base))
(out / "expert.json").write_text(json.dumps(score.summary(), indent=2))
print(score.summary())
PY
if [[ -n "$SEEDS" ]]; then  # every seed of the arm in <out>, this run's and earlier ones', pooled
    for kind in "" _best; do
        mapfile -t FILES < <(ls "$OUT" | grep -E "^${ARM}_seed[0-9]+$kind\.json$" | sed "s|^|$OUT/|")
        "$PY" -m openmanus_rl.eval seeds "$OUT/warm_start.json" "${FILES[@]}" --json "$OUT/${ARM}${kind}_seeds.json" \
            | tee "$OUT/${ARM}${kind}_seeds.txt"
    done
    exit 0
fi
"$PY" scripts/learning_report.py "$OUT" --env_name "$ENV"  # every arm in <out>, this run's and earlier ones'
