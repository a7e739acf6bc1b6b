"""Expert policies: the registry, replies in each action template, the WebShop expert on literal pages and on a real
server, demonstrations built by the agent's own code (token for token), and the SFT data script end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from demo_helpers import loss_spans, sft_argv
from script_modules import load_script, warm_start_args
from trainer_runs import last_line, run_python

from agentgym.webshop.expert import parse_instruction, read_page, search_keywords
from openmanus_rl.agent import OpenManusAgent, get_action_template
from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.envs import get_env_spec
from openmanus_rl.experts import (
    EXPERTS,
    Expert,
    ExpertGenerator,
    WebShopExpert,
    evaluate_expert,
    format_reply,
    get_expert,
    register_expert,
    reply,
)
from verl.protocol import DataProto

REPO = Path(__file__).resolve().parents[2]
WEBSHOP = get_env_spec("webshop")
REACT, XML = get_action_template("react"), get_action_template("xml")

INSTRUCTION = (
    "i am after a box of protein bars that is non gmo and high protein, featuring whey protein with "
    "flavor: cinnamon roll, and size: 24 count, and price lower than 70.00 dollars"
)
START_PAGE = f"WebShop [SEP] Instruction: [SEP] {INSTRUCTION} [SEP] Search"
RESULTS_PAGE = (
    f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > "
    "[SEP] B0AAAAAAA1 [SEP] Bribly Gold Protein Bars Variety Pack [SEP] $88.95 "
    "[SEP] B0AAAAAAA2 [SEP] Pellstone High Protein Snack Bars, Non Gmo Whey Protein Bars [SEP] $39.95 to $52.99 "
    "[SEP] B0AAAAAAA3 [SEP] Ostmora Protein Bars [SEP] $26.00 [SEP] B0AAAAAAA4 [SEP] Fenana Non Gmo [truncated]"
)
ITEM_PAGE = (
    f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] < Prev [SEP] flavor [SEP] chocolate peanut butter "
    "[SEP] salted caramel [SEP] cinnamon roll [SEP] size [SEP] 12 count [SEP] 24 count [SEP] Pellstone High Protein "
    "Snack Bars, Non Gmo Whey Protein Bars [SEP] Price: $39.95 to $52.99 [SEP] Rating: N.A. [SEP] Description "
    "[SEP] Features [SEP] Reviews [SEP] Buy Now"
)
ITEM_WITHOUT_OPTION = ITEM_PAGE.replace(" [SEP] 24 count", " [SEP] 48 count")


# ---------------------------------------------------------------------- registry
class _Echo(Expert):
    env_name = "echo-test"

    def act(self, observation: str) -> str:
        self.last_thought = "echo"
        return f"say {observation}"


def test_registry_get_register_and_unknown_name():
    assert isinstance(get_expert("webshop"), WebShopExpert)
    assert get_expert("webshop", noise=0.25, seed=3).noise == 0.25
    register_expert("echo-test", _Echo)
    try:
        expert = get_expert("echo-test")
        assert isinstance(expert, _Echo) and expert.act("hi") == "say hi"
        with pytest.raises(ValueError, match="an expert for env 'echo-test' is already registered"):
            register_expert("echo-test", _Echo)
        register_expert("echo-test", _Echo, replace=True)
        with pytest.raises(ValueError) as info:
            get_expert("nope")
        assert str(info.value) == (
            "no expert for env 'nope'; experts exist for: "
            "['alfworld', 'babyai', 'echo-test', 'frozenlake', 'maze', 'sciworld', 'sokoban', 'textcraft', 'webshop', "
            "'wordle']"
        )
    finally:
        EXPERTS.pop("echo-test", None)


# ---------------------------------------------------------------------- replies
ACTIONS = [
    "search[red shoes for men]",
    "click[B0123ABCDE]",
    "click[Buy Now]",
    "click[< Prev]",
    "click[3.25 ounce]",
    "click[navy | white]",
]


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("template", [REACT, XML], ids=["react", "xml"])
def test_reply_parses_back_to_the_action(template, action):
    reply = format_reply(template, action, "I pick this. Action: no", WEBSHOP)
    parsed = template.parse(reply, WEBSHOP)
    assert parsed.action == action and parsed.kind == "action"
    assert re.search(template.format_pattern, reply, re.DOTALL)
    assert format_reply(template.name, action, "I pick this.") == format_reply(template, action, "I pick this.")


def test_reply_texts_are_literal():
    assert format_reply("react", "click[Buy Now]", "Buy it.") == "Thought: Buy it.\nAction: click[Buy Now]"
    assert format_reply("xml", "click[Buy Now]", "Buy it.") == "<think>Buy it.</think>\n<action>click[Buy Now]</action>"
    # a thought cannot smuggle in an action marker or a second line
    assert format_reply("react", "click[x]", "go\nAction: click[y]") == "Thought: go click[y]\nAction: click[x]"
    assert format_reply("xml", "click[x]", "a <action>b</action>") == "<think>a b</think>\n<action>click[x]</action>"
    assert format_reply("react", "click[x]", "") == "Thought: I decide the next step.\nAction: click[x]"
    with pytest.raises(ValueError, match="one non-empty line"):
        format_reply("react", "click[a]\nclick[b]")
    with pytest.raises(ValueError, match="unknown action format 'json'"):
        format_reply("json", "click[a]")


def test_expert_reply_uses_the_template():
    expert = WebShopExpert()
    assert reply(expert, START_PAGE, "xml", WEBSHOP) == (
        "<think>I search for the product the instruction describes.</think>\n"
        "<action>search[box protein bars non gmo high whey flavor cinnamon roll size 24 count]</action>"
    )


# ---------------------------------------------------------------------- the WebShop expert on literal pages
def test_instruction_parsing():
    ins = parse_instruction(INSTRUCTION)
    assert ins.request == "i am after a box of protein bars that is non gmo and high protein, featuring whey protein"
    assert ins.options == (("flavor", "cinnamon roll"), ("size", "24 count"))
    assert ins.price_limit == 70.0
    assert search_keywords(ins) == "box protein bars non gmo high whey flavor cinnamon roll size 24 count"
    coat = parse_instruction(
        "please get me a coat which is windproof, with faux fur trim with color: navy, and "
        "size: xxl, and price lower than 160.00 dollars"
    )
    assert coat.request == "please get me a coat which is windproof, with faux fur trim"
    assert coat.options == (("color", "navy"), ("size", "xxl"))
    plain = parse_instruction("look for a set of makeup brushes which is easy to clean")
    assert (plain.request, plain.options, plain.price_limit) == (
        "look for a set of makeup brushes which is easy to clean",
        (),
        None,
    )


def test_page_reading():
    results = read_page(RESULTS_PAGE)
    assert results.kind == "results" and results.truncated
    assert [(x.asin, x.price) for x in results.listings] == [
        ("B0AAAAAAA1", 88.95),
        ("B0AAAAAAA2", 39.95),
        ("B0AAAAAAA3", 26.0),
    ]
    item = read_page(ITEM_PAGE)
    assert item.kind == "item" and item.price == 39.95
    assert item.options == [
        "flavor",
        "chocolate peanut butter",
        "salted caramel",
        "cinnamon roll",
        "size",
        "12 count",
        "24 count",
    ]
    assert read_page(START_PAGE).kind == "start"


def test_webshop_expert_plays_literal_pages():
    expert = WebShopExpert()
    assert expert.act(START_PAGE) == ("search[box protein bars non gmo high whey flavor cinnamon roll size 24 count]")
    # B0AAAAAAA1 is first but above the price limit; the cut-off fourth listing is never chosen
    assert expert.act(RESULTS_PAGE) == "click[B0AAAAAAA2]"
    assert expert.last_thought == "B0AAAAAAA2 is the top result under 70.00 dollars ($39.95 to $52.99), so I open it."
    assert expert.act(ITEM_PAGE) == "click[cinnamon roll]"
    assert expert.act(ITEM_PAGE) == "click[24 count]"
    assert expert.act(ITEM_PAGE) == "click[Buy Now]"
    assert expert.steps == 5


def test_webshop_expert_backtracks_when_an_option_is_missing():
    expert = WebShopExpert()
    expert.act(START_PAGE)
    assert expert.act(RESULTS_PAGE) == "click[B0AAAAAAA2]"
    assert expert.act(ITEM_WITHOUT_OPTION) == "click[< Prev]"
    assert (
        expert.last_thought == "This product does not fit: it does not offer size: 24 count. I go back to the results."
    )
    assert expert.act(RESULTS_PAGE) == "click[B0AAAAAAA3]"  # the next affordable one
    expert.reset()
    assert expert.steps == 0 and expert.tried == []


def test_webshop_expert_step_guard_buys_in_time():
    expert = WebShopExpert(max_steps=4)
    expert.act(START_PAGE)
    expert.act(RESULTS_PAGE)
    assert expert.act(ITEM_WITHOUT_OPTION) == "click[cinnamon roll]"  # no budget to go back: make the best of it
    assert expert.act(ITEM_WITHOUT_OPTION) == "click[Buy Now]"  # the 4th and last action


def test_webshop_expert_noise():
    with pytest.raises(ValueError, match="noise must be in"):
        WebShopExpert(noise=1.5)
    picks = set()
    for seed in range(20):
        expert = WebShopExpert(noise=1.0, seed=seed)
        expert.act(START_PAGE)
        picks.add(expert.act(RESULTS_PAGE))
        assert expert.act(ITEM_PAGE) == "click[Buy Now]"  # every option skipped
    assert picks == {"click[B0AAAAAAA1]", "click[B0AAAAAAA3]"}  # never the best one
    a, b = WebShopExpert(noise=0.5, seed=7), WebShopExpert(noise=0.5, seed=7)
    assert [a.act(p) for p in (START_PAGE, RESULTS_PAGE, ITEM_PAGE, ITEM_PAGE)] == [
        b.act(p) for p in (START_PAGE, RESULTS_PAGE, ITEM_PAGE, ITEM_PAGE)
    ]


def test_webshop_expert_reads_nothing_but_observations():
    source = Path(sys.modules[WebShopExpert.__module__].__file__).read_text()
    assert "agentgym" not in source and "requests" not in source and "open(" not in source


# ---------------------------------------------------------------------- against a real server
@pytest.mark.slow
def test_expert_solves_test_tasks_without_catalogue(server, monkeypatch):
    import agentgym.webshop.data as data

    def no_catalogue(*args, **kwargs):
        raise AssertionError("the expert must not read the catalogue")

    monkeypatch.setattr(data, "load_shop", no_catalogue)
    monkeypatch.setattr(data, "_load", no_catalogue)
    score = evaluate_expert("webshop", "test", 10, server, task_ids=list(range(10)))
    assert score.n == 10
    assert sum(score.successes) >= 8  # measured: 9 of the first 10 (172 of the first 200)
    assert score.mean_reward >= 0.85  # measured: 0.967
    assert all(3 <= s <= 8 for s in score.steps)


def _one_episode_batch(task_id: int, split: str = "train") -> DataProto:
    return DataProto.from_dict(
        non_tensors={"data_source": ["webshop"], "extra_info": [{"index": task_id, "split": split}]}
    )


def test_demonstrations_use_the_rl_runs_turn_cap() -> None:
    """The warm start plays its demonstrations under RL's agent limits: each env's own turn cap unless the run
    sets ``agent.max_turns`` (other agent keys do not shape demonstrations)."""
    warm_start, make_sft_data = load_script("warm_start"), load_script("make_sft_data")
    assert warm_start.agent_limits() == {
        "max_turns": None,
        "max_prompt_length": 1024,
        "max_response_length": 96,
        "max_obs_length": 256,
        "max_trajectory_length": 3072,
    }
    assert warm_start.agent_limits(["agent.max_turns=12", "agent.n=4", "agent.max_obs_length=128"]) == {
        "max_turns": 12,
        "max_prompt_length": 1024,
        "max_response_length": 96,
        "max_obs_length": 128,
        "max_trajectory_length": 3072,
    }
    assert [
        make_sft_data.parse_args(["--env_name", env, "--out", "x.parquet"]).max_turns
        for env in ("webshop", "maze", "sokoban")
    ] == [8, 15, 20]
    assert make_sft_data.parse_args(["--env_name", "maze", "--out", "x", "--max_turns", "9"]).max_turns == 9


def test_sciworlds_demonstrations_keep_every_episode_that_scored() -> None:
    """Inside its 20-turn cap SciWorld's expert finished 1 of 32 train tasks (score 100), which left SFT one
    demonstration and failed the default job; it keeps every episode that scored (a correct start), the other envs
    keep their successes, and ``--keep`` still chooses."""
    make_sft_data = load_script("make_sft_data")
    rows = [
        {"failed": False, "success": False, "env_reward": 0.0},
        {"failed": False, "success": False, "env_reward": 33.0},
        {"failed": False, "success": True, "env_reward": 100.0},
        {"failed": True, "success": False, "env_reward": 50.0},
    ]
    assert [r["env_reward"] for r in make_sft_data.keep(rows, "progress")] == [33.0, 100.0]
    assert [r["env_reward"] for r in make_sft_data.keep(rows, "successful")] == [100.0]
    keep = {
        env: make_sft_data.parse_args(["--env_name", env, "--out", "x"]).keep
        for env in ("sciworld", "alfworld", "webshop")
    }
    assert keep == {"sciworld": "progress", "alfworld": "successful", "webshop": "successful"}
    assert (
        make_sft_data.parse_args(["--env_name", "sciworld", "--out", "x", "--keep", "successful"]).keep == "successful"
    )


def test_only_experts_with_a_move_budget_get_the_turn_cap() -> None:
    """The demonstrations' turn cap reaches the experts that plan within a move budget; the others (ALFWorld, BabyAI,
    SciWorld, Wordle) take no such option, and building them with it failed."""
    make_sft_data = load_script("make_sft_data")
    options = {
        env: make_sft_data.expert_kwargs(make_sft_data.parse_args(["--env_name", env, "--out", "x.parquet"]))
        for env in ("webshop", "maze", "alfworld", "sciworld", "babyai", "wordle")
    }
    assert options == {
        "webshop": {"noise": 0.0, "max_steps": 8},
        "maze": {"noise": 0.0, "max_steps": 15},
        "alfworld": {"noise": 0.0},
        "sciworld": {"noise": 0.0},
        "babyai": {"noise": 0.0},
        "wordle": {"noise": 0.0},
    }
    from openmanus_rl.experts import get_expert

    for env, kwargs in options.items():
        assert get_expert(env, **kwargs) is not None, env


@pytest.mark.slow
def test_demonstrations_and_evaluations_never_start_more_episodes_than_the_servers_hold(spawn_server) -> None:
    """``make_sft_data`` and ``openmanus_rl.eval`` play at most the servers' env caps at once (``GET /health``'s
    ``max_envs``): more waited at 503 and failed (SciWorld holds 16; an eval of 50 tasks failed 34)."""
    from agentgym.spawn import free_port
    from openmanus_rl.envs.supervisor import env_cap
    from openmanus_rl.evaluation.run import fit_servers

    capped = spawn_server("webshop", "--max-envs", "5")
    silent = f"http://127.0.0.1:{free_port()}"
    assert env_cap(capped.url, 64) == 5
    assert env_cap(silent, 64) == 64  # no answer: the default
    assert fit_servers(64, 1, [capped.url]) == 5
    assert fit_servers(64, 2, [capped.url, capped.url]) == 5  # 10 envs, 2 trajectories a task
    assert fit_servers(64, 8, [capped.url]) == 1  # never below one task
    assert fit_servers(3, 1, [capped.url]) == 3 and fit_servers(64, 1, [silent]) == 64


def test_demonstrations_use_the_rl_runs_action_format() -> None:
    """``run_training.sh`` passes the run's ``agent.*`` overrides to the warm start: an ``agent.action_format``
    among them is the format of the demonstrations."""
    warm_start = load_script("warm_start")
    assert warm_start.action_format("react") == "react"
    assert warm_start.action_format("react", ["agent.max_turns=12", "agent.action_format=tool_call"]) == "tool_call"
    assert (
        warm_start.action_format("xml", ["agent.action_format=react", "agent.action_format=tool_call"]) == "tool_call"
    )


def maze_warm_start(model: str, cache: Path, *args: str) -> list[str]:
    """`scripts/warm_start.py` for the maze from ``model``, cached under ``cache``, with ``args`` added."""
    return [
        sys.executable,
        "scripts/warm_start.py",
        "--env_name",
        "maze",
        "--model",
        model,
        "--cache_dir",
        str(cache),
        *args,
    ]


def test_a_bad_sft_override_fails_before_any_demonstration(tiny_model_path: str, tmp_path: Path) -> None:
    """``sft.*`` overrides of the job reach the warm start's SFT, and are checked before the expert plays: no
    server is started and nothing is written. Without a warm start they are refused."""
    cmd = maze_warm_start(tiny_model_path, tmp_path / "cache")
    proc = subprocess.run([*cmd, "train.epochs=0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1] == "[warm_start] config error: sft.train.epochs must be >= 1, got 0"
    assert not (tmp_path / "cache").exists()
    proc = subprocess.run(
        ["bash", "train_grpo.sh", "--no_warm_start", "sft.train.epochs=1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == "sft.* overrides configure the warm start, which --no_warm_start skips: sft.train.epochs=1\n"


def test_a_bad_rl_override_fails_before_anything_is_written_under_the_runs_folder(
    tiny_model_path: str, tmp_path: Path
) -> None:
    """The job checks the whole config before the warm start, the servers or its output folder (where the run's
    log goes): a bad value stops it with exit code 2 and the run's folder is not created."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            "bash",
            "train_ppo.sh",
            "--env_name",
            "maze",
            "--model",
            tiny_model_path,
            "--data_dir",
            str(tmp_path / "data"),
            "agent.max_turns=0",
            f"trainer.output_dir={out}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "config error: agent: max_turns must be an int >= 1 (or null: each env's own cap), got 0" in proc.stderr
    assert not out.exists() and "every line of this run goes to" not in proc.stdout


def test_an_agent_program_reaches_the_warm_start_and_its_key() -> None:
    """``run_training.sh`` passes ``+agent.program=`` on: the warm start takes the program out of the SFT overrides,
    and the program and its source are part of the cache key."""
    from pathlib import Path

    warm_start = load_script("warm_start")
    program = "examples.webshop_openai_agent:play"
    assert warm_start.split_program(["agent.n=4", f"+agent.program={program}", "train.epochs=2"]) == (
        program,
        ["agent.n=4", "train.epochs=2"],
    )
    assert warm_start.split_program(["agent.n=4"]) == (None, ["agent.n=4"])
    source = (REPO / "examples" / "webshop_openai_agent.py").read_bytes()
    assert warm_start.program_source_sha256(program) == __import__("hashlib").sha256(source).hexdigest()
    model = Path(warm_start.__file__).resolve().parents[1] / "examples"  # any folder: the key reads its files
    keys = {
        warm_start.cache_key(warm_start_args(action_format="tool_call", program=p), model, "float32")
        for p in (None, program)
    }
    assert len(keys) == 2


@pytest.mark.slow
@pytest.mark.parametrize("action_format", ["react", "xml", "tool_call"])
def test_sft_sample_is_the_agents_sequence_token_for_token(server, tokenizer, tmp_path, action_format):
    script = load_script("make_sft_data")
    out = tmp_path / "one.parquet"
    argv = sft_argv(server, out, "--n", "1", "--split", "dev", "--action_format", action_format)
    stats = script.main(argv)
    assert stats["played"] == 1 and stats["kept"] == 1
    sample = pd.read_parquet(out).iloc[0]
    assert sample.task_id == 500 and sample.split == "dev" and sample.action_format == action_format

    # the same episode through the agent once more, with a fresh expert generator
    args = script.parse_args(argv)
    generator = ExpertGenerator(tokenizer, "webshop", action_format, {"noise": 0.0, "max_steps": args.max_turns})
    with OpenManusAgent(tokenizer, generator, script.agent_config(args, server)) as agent:
        batch = agent.run_llm_loop(_one_episode_batch(500, "dev"))
    attention = batch.batch["attention_mask"][0].bool()
    width = batch.batch["prompts"].shape[1]
    prompt_len = int(attention[:width].sum())
    assert list(sample.input_ids) == batch.batch["input_ids"][0][attention].tolist()
    response_mask = batch.batch["response_mask"][0][: len(sample.input_ids) - prompt_len].tolist()
    assert list(sample.loss_mask) == [0] * prompt_len + response_mask
    assert sample.num_turns == batch.non_tensor_batch["num_turns"][0]
    assert sample.success == batch.non_tensor_batch["success"][0] and sample.env_reward == 1.0

    # loss_mask is 1 exactly on the expert's replies, each with its end-of-turn token
    chat = ChatFormat(tokenizer)
    spans = loss_spans(list(sample.input_ids), list(sample.loss_mask))
    (turns,) = generator.episodes.values()
    assert [s[-1] for s in spans] == [chat.eot_id] * len(turns)
    assert [tokenizer.decode(s[:-1]) for s in spans] == [t.reply for t in turns]
    assert len(turns) == sample.num_turns and turns[-1].action == "click[Buy Now]"
    template = get_action_template(action_format)
    assert [template.parse(t.reply, WEBSHOP).action for t in turns] == [t.action for t in turns]

    # the expert saw what the model sees: each observation as it entered the sequence (whole, or cut)
    observations = [
        t for t in batch.non_tensor_batch["trajectory"][0] if t["role"] == "observation" and t["in_sequence"]
    ]
    for seen, entered in zip([t.observation for t in turns], observations):
        if entered["truncated"]:
            assert seen.endswith(" [truncated]") and entered["text"].startswith(seen[: -len(" [truncated]")][:200])
        else:
            assert seen == entered["text"]


@pytest.mark.slow
def test_make_sft_data_script_end_to_end(server, tiny_model_path, tmp_path):
    out = tmp_path / "sft" / "webshop_react_3.parquet"
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # carries the session's OPENMANUS_CACHE to the script's own server
    script = str(REPO / "scripts" / "make_sft_data.py")
    args = ["--env_name", "webshop", "--n", "3", "--split", "dev", "--action_format", "react", "--out", str(out)]
    proc = run_python([script, *args, "--tokenizer", tiny_model_path], timeout_s=300, env=env)
    stats = json.loads(last_line(proc))
    assert stats["played"] == 3 and stats["kept"] == 3 and stats["success_rate"] == 1.0  # measured: 500-502 all solved
    assert "[sft] played 3 episodes (0 env failures), success rate 1.000" in proc.stdout
    frame = pd.read_parquet(out)
    assert list(frame.columns) == (
        "input_ids loss_mask task_id success env_reward num_turns status env_name action_format split".split()
    )
    assert frame.task_id.tolist() == [500, 501, 502]
    assert set(frame.split) == {"dev"} and set(frame.env_name) == {"webshop"} and frame.success.all()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    for _, row in frame.iterrows():
        assert len(row.input_ids) == len(row.loss_mask) <= 3072
        assert row.loss_mask[0] == 0 and row.loss_mask[-1] == 1  # the prompt first, the last reply at the end
        text = tokenizer.decode(row.input_ids)
        assert text.count("<|im_start|>assistant\nThought: ") == row.num_turns and text.endswith(
            "Action: click[Buy Now]<|im_end|>"
        )


def test_webshop_expert_on_pages_cut_short():
    cut_in_price = RESULTS_PAGE.replace(" [SEP] B0AAAAAAA4 [SEP] Fenana Non Gmo [truncated]", " [truncated]").replace(
        "$26.00", "$2"
    )
    assert [x.asin for x in read_page(cut_in_price).listings] == ["B0AAAAAAA1", "B0AAAAAAA2"]  # "$2" may be partial
    cut_item = ITEM_PAGE[: ITEM_PAGE.index(" [SEP] Pellstone")] + " [SEP] Pell [truncated]"
    page = read_page(cut_item)
    assert page.kind == "item" and page.price is None and page.options[-1] == "24 count"
    expert = WebShopExpert()
    expert.act(START_PAGE)
    expert.act(RESULTS_PAGE)
    assert [expert.act(cut_item) for _ in range(3)] == ["click[cinnamon roll]", "click[24 count]", "click[Buy Now]"]


def test_the_warm_starts_commands_run_together_and_each_failure_is_named(tmp_path: Path, capsys) -> None:
    """`run_together` starts every command before it waits: the first one here waits for a file only the second
    writes (alone it would give up after 60 s and fail). Their output reaches stderr; a failure exits naming it and
    stops the commands still running."""
    warm_start = load_script("warm_start")
    flag = tmp_path / "flag"
    waits = (
        "import pathlib, sys, time\n"
        f"flag = pathlib.Path({str(flag)!r})\n"
        "for _ in range(600):\n"
        "    if flag.exists(): print('saw the flag'); print(''); sys.exit(0)\n"
        "    time.sleep(0.1)\n"
        "sys.exit(1)\n"
    )
    writes = f"import pathlib; print('writing'); pathlib.Path({str(flag)!r}).write_text('x'); print('wrote')"
    assert warm_start.run_together([[sys.executable, "-c", waits], [sys.executable, "-c", writes]]) == [
        "saw the flag",
        "wrote",
    ]
    err = capsys.readouterr().err
    assert {"saw the flag", "writing", "wrote"} <= set(err.splitlines())
    fails = [sys.executable, "-c", "import sys; print('partial'); sys.exit(3)"]
    with pytest.raises(SystemExit) as raised:
        warm_start.run_together([fails])
    assert str(raised.value) == f"[warm_start] failed: (exit 3) {' '.join(fails)}"
    sleeps = [sys.executable, "-c", "import time; time.sleep(120)"]  # done in 120 s unless the failure stops it
    with pytest.raises(SystemExit) as raised:
        warm_start.run_together([sleeps, fails])
    assert str(raised.value) == f"[warm_start] failed: (exit 3) {' '.join(fails)}; stopped with it: {' '.join(sleeps)}"


@pytest.mark.slow
def test_a_warm_start_is_built_then_found_in_its_cache(tiny_model_path: str, tmp_path: Path) -> None:
    """`scripts/warm_start.py` end to end on the tiny model: train and dev demonstrations of the maze (played side by
    side), SFT on them (three samples, fewer than a batch: one step), the folder as the last stdout line; the second
    call finds it by its key."""
    cmd = maze_warm_start(tiny_model_path, tmp_path / "cache", "--n_demos", "3", "--n_dev_demos", "2", "train.epochs=1")
    built = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    hf = Path(built.stdout.strip().splitlines()[-1])
    folder = hf.parents[1]
    assert hf.name == "huggingface" and (hf / "config.json").is_file()
    assert [len(pd.read_parquet(folder / f"demos_{split}.parquet")) for split in ("train", "dev")] == [3, 2]
    assert set(json.loads((folder / "timing.json").read_text())) == {"demonstrations_s", "sft_s"}
    assert "[sft] played 3 episodes" in built.stderr and "[sft] played 2 episodes" in built.stderr
    assert "[sft] 3 training samples, fewer than train.batch_size=4: each epoch is one step over 3" in built.stderr
    summary = json.loads((folder / "sft" / "sft_summary.json").read_text())
    assert (summary["steps"], summary["config"]["train"]["batch_size"]) == (1, 3)
    cached = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert cached.returncode == 0 and cached.stdout.strip().splitlines()[-1] == str(hf)
    assert "[warm_start] cached: " in cached.stderr


def test_an_envs_own_sft_overrides_go_first_and_the_runs_win() -> None:
    """`EnvSpec.warm_start_sft`: WebShop's warm start trains one epoch at lr 2e-4 unless the run says otherwise; an
    env without its own keeps the YAML's; a mix takes only what every env declares."""
    warm_start = load_script("warm_start")
    assert get_env_spec("webshop").warm_start_sft == ("train.epochs=1", "optim.lr=2e-4")
    assert warm_start.env_sft_overrides(["webshop"], []) == ["train.epochs=1", "optim.lr=2e-4"]
    assert warm_start.env_sft_overrides(["webshop"], ["optim.lr=1e-4", "train.patience=2"]) == [
        "train.epochs=1",
        "optim.lr=1e-4",
        "train.patience=2",
    ]
    assert warm_start.env_sft_overrides(["frozenlake"], ["train.epochs=3"]) == ["train.epochs=3"]
    assert warm_start.env_sft_overrides(["webshop"], ["++optim.lr=1e-4", "~train.epochs"]) == [
        "++optim.lr=1e-4",
        "~train.epochs",
    ]
    assert warm_start.env_sft_overrides(["babyai", "webshop"], []) == []
