#!/usr/bin/env bash
# Shared body of train_ppo.sh and train_grpo.sh: set up, prepare model and data, check the
# whole config, build (or reuse) the warm start, then train. The trainer starts the env
# servers itself (agent.manage_servers), restarts any that dies or hangs, and stops them
# when it exits. Usage: scripts/run_training.sh <ppo|grpo> [options] [hydra overrides]
# The job's settings live in YAML: verl/trainer/config/ppo_trainer.yaml with the preset preset/<ppo|grpo>.yaml
# (preset=<algo>) over it; this script only runs the phases.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ALGO="$1"; shift
ORIGINAL_ARGS="$*"
usage() {
    cat <<USAGE
usage: ./train_${ALGO}.sh [--env_name NAME] [--num_servers N] [--base_port PORT] [--data_dir DIR]
                         [--exp_name_suffix S] [--model HF_FOLDER] [--n_demos N] [--no_warm_start]
                         [hydra overrides ...]

  --env_name         environment to train on (default webshop; see: agentgym list), or several comma-separated
                     (e.g. babyai,webshop: a mixed dataset data/babyai+webshop, rows routed by data_source,
                     metrics per env)
  --num_servers      environment servers to start per env, on consecutive ports (default 1)
  --base_port        first server port (default 36001)
  --data_dir         where <env>/{train,dev,test}.parquet live (default data; prepared if missing; RL validates on dev);
                     a folder that itself holds train.parquet (and dev.parquet or test.parquet) is a
                     single-turn dataset: no env server, one generation per prompt, scored by the
                     reward module of each row's data_source (e.g. data/countdown)
  --exp_name_suffix  appended to the experiment name
  --model            a Hugging Face model folder (default: SmolLM2-135M-Instruct, prepared once)
  sft.key=value      goes to the warm start's SFT (verl/trainer/config/sft_trainer.yaml), e.g. sft.train.epochs=1
  anything else of the form key=value is passed to python -m verl.trainer.main_ppo, after preset=${ALGO}
                     (verl/trainer/config/preset/${ALGO}.yaml over ppo_trainer.yaml)
USAGE
}

ENV_NAME=webshop; ENV_GIVEN=0; NUM_SERVERS=1; BASE_PORT=36001; DATA_DIR=data; SUFFIX=""; MODEL=""
WARM_START=1; N_DEMOS=32
OVERRIDES=(); SFT_OVERRIDES=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --env_name) ENV_NAME="$2"; ENV_GIVEN=1; shift 2 ;;
        --num_servers) NUM_SERVERS="$2"; shift 2 ;;
        --base_port) BASE_PORT="$2"; shift 2 ;;
        --data_dir) DATA_DIR="$2"; shift 2 ;;
        --exp_name_suffix) SUFFIX="$2"; shift 2 ;;
        --model) MODEL="$2"; shift 2 ;;
        --n_demos) N_DEMOS="$2"; shift 2 ;;
        --no_warm_start) WARM_START=0; shift ;;
        -h|--help) usage; exit 0 ;;
        --*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
        sft.*=*) SFT_OVERRIDES+=("${1#sft.}"); shift ;;
        *=*) OVERRIDES+=("$1"); shift ;;
        *) echo "unexpected argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
[[ "$NUM_SERVERS" =~ ^[1-9][0-9]*$ ]] || { echo "--num_servers must be a positive integer" >&2; exit 2; }
[[ "$BASE_PORT" =~ ^[0-9]+$ ]] || { echo "--base_port must be a port number" >&2; exit 2; }
[[ "$N_DEMOS" =~ ^[1-9][0-9]*$ ]] || { echo "--n_demos must be a positive integer" >&2; exit 2; }
if [[ "$WARM_START" == 0 && ${#SFT_OVERRIDES[@]} -gt 0 ]]; then
    echo "sft.* overrides configure the warm start, which --no_warm_start skips: sft.${SFT_OVERRIDES[0]}" >&2; exit 2
fi

[[ -x .venv/bin/python || -n "${VIRTUAL_ENV:-}" ]] || bash scripts/setup.sh
PY="${VIRTUAL_ENV:-$ROOT/.venv}/bin/python"
BIN="$(dirname "$PY")"
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

if [[ "$ENV_GIVEN" == 0 && -f "$DATA_DIR/train.parquet" ]]; then
    VAL="$DATA_DIR/dev.parquet"; [[ -f "$VAL" ]] || VAL="$DATA_DIR/test.parquet"
    [[ -f "$VAL" ]] || { echo "$DATA_DIR has train.parquet but neither dev.parquet nor test.parquet" >&2; exit 2; }
    [[ ${#SFT_OVERRIDES[@]} -eq 0 ]] || { echo "a single-turn dataset has no warm start, so no sft.* overrides: sft.${SFT_OVERRIDES[0]}" >&2; exit 2; }
    [[ -n "$MODEL" ]] || MODEL="$("$PY" scripts/prepare_model.py | tail -n 1)"
    echo "[train] single-turn dataset $DATA_DIR (no environment server); validation on $VAL"
    exec "$PY" -m verl.trainer.main_ppo preset="$ALGO" data.rollout=single_turn \
        actor_rollout_ref.model.path="$MODEL" data.train_files="$DATA_DIR/train.parquet" data.val_files="$VAL" \
        trainer.experiment_name="$(basename "$DATA_DIR")_${ALGO}${SUFFIX}" ${OVERRIDES[@]+"${OVERRIDES[@]}"}
fi

IFS=, read -r -a ENVS <<<"$ENV_NAME"
SERVABLE="$("$BIN/agentgym" list)"
for env in "${ENVS[@]}"; do
    if ! grep -qx "$env" <<<"$SERVABLE"; then
        echo "unknown env '$env'; available: $(tr '\n' ' ' <<<"$SERVABLE")" >&2
        usage >&2
        exit 2
    fi
done
DATA_NAME="$(IFS=+; echo "${ENVS[*]}")"
EXP="${DATA_NAME}_${ALGO}${SUFFIX}"
# the terminal shows this project's own lines (phases, steps with the time left, errors); every line of the
# model conversion, the warm start and the trainer goes to the run's log (OPENMANUS_VERBOSE=1: on the terminal too)
quiet() { "$PY" scripts/quiet.py --log "$1" $([[ "${OPENMANUS_VERBOSE:-0}" == 1 ]] && echo --all); }
PREP_LOG="$(mktemp)"  # the model conversion's lines, moved into the run's log once the config check has passed
trap 'rm -f "$PREP_LOG"' EXIT
PHASE_START=0  # phases for the summary at the end (scripts/run_summary.py), from the start of this script
EXTRA="$("$PY" -c 'import sys; from agentgym.registry import get_env_spec
print(",".join(sorted({get_env_spec(n).extra for n in sys.argv[1:]} - {None})))' "${ENVS[@]}")"
if [[ -n "$EXTRA" ]]; then
    OPENMANUS_EXTRAS="$EXTRA" bash scripts/setup.sh  # what the envs' servers need (quick when already installed)
fi
if [[ -z "$MODEL" ]]; then
    MODEL_OUT="$(mktemp)"  # the folder on stdout; the conversion's progress to the run's log
    "$PY" scripts/prepare_model.py 2>&1 >"$MODEL_OUT" | quiet "$PREP_LOG"
    MODEL="$(tail -n 1 "$MODEL_OUT")"; rm -f "$MODEL_OUT"
fi
SETUP_S=$((SECONDS - PHASE_START)); PHASE_START=$SECONDS
# rewritten when an env's task list changed since (e.g. a new WebShop catalogue); a no-op otherwise
"$PY" scripts/prepare_data.py --env_name "$ENV_NAME" --out "$DATA_DIR" --if_changed

PORTS=()  # NUM_SERVERS per env, env after env: the agent cuts the list into one run per env
for ((i = 0; i < NUM_SERVERS * ${#ENVS[@]}; i++)); do PORTS+=("$((BASE_PORT + i))"); done
PORT_LIST="[$(IFS=,; echo "${PORTS[*]}")]"
RL_ARGS=(preset="$ALGO" data.train_files="$DATA_DIR/$DATA_NAME/train.parquet" data.val_files="$DATA_DIR/$DATA_NAME/dev.parquet"
         "agent.env_name='$ENV_NAME'" "agent.env_ports=$PORT_LIST" agent.manage_servers=true trainer.experiment_name="$EXP"
         ${OVERRIDES[@]+"${OVERRIDES[@]}"})
# every start-up check before the warm start, the servers or anything under outputs/ (the warm start has the base model's
# shape); its last line is the run's folder, trainer.output_dir as the config resolves it
CHECKED="$("$PY" -m verl.trainer.main_ppo --check_config actor_rollout_ref.model.path="$MODEL" "${RL_ARGS[@]}")"
sed '$d' <<<"$CHECKED"
OUT_DIR="$(tail -n 1 <<<"$CHECKED")"; OUT_DIR="${OUT_DIR#\[config\] output_dir=}"
RUN_LOG="$OUT_DIR/run.log"
mkdir -p "$OUT_DIR"
{ echo "=== $(date -u '+%Y-%m-%d %H:%M:%S') UTC: ./train_${ALGO}.sh $ORIGINAL_ARGS"; cat "$PREP_LOG"; } >>"$RUN_LOG"
echo "[train] every line of this run goes to $RUN_LOG; the terminal shows the run's own lines"

DATA_S=$((SECONDS - PHASE_START)); PHASE_START=$SECONDS
RL_MODEL="$MODEL"
if [[ "$WARM_START" == 1 ]]; then
    # the demonstrations are played under RL's agent limits (agent.max_turns=..., ...), and SFT runs on RL's device
    WARM_OVERRIDES=()
    for item in ${OVERRIDES[@]+"${OVERRIDES[@]}"}; do
        if [[ "$item" == agent.* || "$item" == +agent.program=* || "$item" == trainer.device=* ]]; then
            WARM_OVERRIDES+=("$item")
        fi
    done
    # demonstrations + SFT (with the sft.* overrides) once per (model, env, format or agent program, demos, agent
    # limits, SFT config); progress on stderr, the folder on stdout
    WARM_OUT="$(mktemp)"
    "$PY" scripts/warm_start.py --env_name "$ENV_NAME" --model "$MODEL" --n_demos "$N_DEMOS" \
        ${WARM_OVERRIDES[@]+"${WARM_OVERRIDES[@]}"} ${SFT_OVERRIDES[@]+"${SFT_OVERRIDES[@]}"} 2>&1 >"$WARM_OUT" | quiet "$RUN_LOG" \
        || { echo "[train] the warm start failed; its whole output is in $RUN_LOG" >&2; exit 1; }
    RL_MODEL="$(tail -n 1 "$WARM_OUT")"; rm -f "$WARM_OUT"
    echo "[train] RL starts from the warm start $RL_MODEL (base model $MODEL)"
else
    echo "[train] RL starts from the base model $MODEL (--no_warm_start)"
fi
WARM_S=$((SECONDS - PHASE_START)); PHASE_START=$SECONDS
echo "[train] the trainer starts $NUM_SERVERS server(s) of each of $ENV_NAME on port(s) ${PORTS[*]} (logs in $OUT_DIR/env_logs)"
STATUS=0
"$PY" -m verl.trainer.main_ppo actor_rollout_ref.model.path="$RL_MODEL" "${RL_ARGS[@]}" 2>&1 | quiet "$RUN_LOG" || STATUS=$?
[[ "$STATUS" == 0 ]] || echo "[train] the trainer exited with status $STATUS; its whole output is in $RUN_LOG" >&2
WARM_ARGS=()
[[ "$WARM_START" == 1 ]] && WARM_ARGS=(--warm_start "$(dirname "$(dirname "$RL_MODEL")")")
"$PY" scripts/run_summary.py --phase "set-up and model=$SETUP_S" --phase "data and config check=$DATA_S" \
    --phase "warm start=$WARM_S" ${WARM_ARGS[@]+"${WARM_ARGS[@]}"} --trainer_s $((SECONDS - PHASE_START)) \
    --metrics "$OUT_DIR/metrics.jsonl" || true
exit "$STATUS"
