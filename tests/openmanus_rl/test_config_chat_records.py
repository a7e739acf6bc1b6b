"""AgentConfig from plain and OmegaConf dicts and its validation; chat-template pieces; JSONL and the HTML viewer."""

import json

import pytest

from openmanus_rl.agent import AgentConfig
from openmanus_rl.agent.chat import ChatFormat
from openmanus_rl.records import read_jsonl, render_html, step_path, write_jsonl
from openmanus_rl.records.viewer import main as viewer_main


def test_config_from_plain_and_omegaconf_dicts():
    from omegaconf import OmegaConf

    fields = {
        "env_name": "babyai",
        "env_ports": [36005, 36006],
        "n": 4,
        "action_format": "xml",
        "reward_components": {"goal": 1.0, "length": {"weight": 0.1, "max_length": 300}},
        "history_window": 2,
    }
    plain = AgentConfig(**fields)
    node = OmegaConf.create(fields)
    from_omegaconf = AgentConfig(**node)
    assert from_omegaconf == plain
    assert type(from_omegaconf.env_ports) is list and type(from_omegaconf.reward_components["length"]) is dict
    plain.validate()
    assert AgentConfig(env_ports=36001).env_ports == [36001]


def test_config_defaults_fit_the_small_box():
    cfg = AgentConfig()
    cfg.validate()
    assert (cfg.max_turns, cfg.max_response_length, cfg.max_obs_length, cfg.max_trajectory_length, cfg.n) == (
        None,
        96,
        256,
        3072,
        1,
    )
    assert cfg.turn_cap("webshop") == 8  # WebShop's own cap
    assert cfg.response_budget == 3072 - 1024


@pytest.mark.parametrize(
    "change, message",
    [
        ({"env_name": "chess"}, "unknown env 'chess'"),
        ({"env_ports": []}, "env_ports must be a non-empty list"),
        ({"env_ports": [0]}, "env_ports must be"),
        ({"env_ports": [36001, 36001]}, "lists a port twice"),
        ({"env_server_base": "127.0.0.1"}, "must start with http"),
        (
            {"manage_servers": True, "env_server_base": "http://10.0.0.5"},
            "manage_servers starts the servers on this machine",
        ),
        ({"server_max_restarts": -1}, "server_max_restarts must be an int >= 0"),
        (
            {"server_nodes": {"role": "env"}},
            r"server_nodes=\{'role': 'env'\} says where the run starts its env servers: set "
            r"manage_servers=true",
        ),
        (
            {"server_nodes": {"cpus": 8}, "manage_servers": True},
            r"server_nodes maps Ray node label names to string values \(quote "
            r"them\), got \{'cpus': 8\}",
        ),
        ({"n": 0}, "n must be an int >= 1"),
        ({"max_turns": 2.5}, "max_turns must be an int"),
        ({"max_trajectory_length": 600}, "at least 1121"),  # 1024 prompt + 96 turn + 1 end-of-turn token
        ({"action_format": "json"}, "unknown action format 'json'"),
        ({"request_timeout_s": 0}, "request_timeout_s must be > 0"),
        ({"history_window": -1}, "history_window must be an int >= 0"),
        ({"reward_components": {"speed": 1.0}}, "unknown type 'speed'"),
    ],
)
def test_config_validate_errors(change, message):
    with pytest.raises(ValueError, match=message):
        AgentConfig(**change).validate()


def test_chat_pieces_of_smollm2(tokenizer):
    chat = ChatFormat(tokenizer)
    assert chat.eot_id == 2  # <|im_end|>
    assert chat.turn_head_ids == [198, 1, 4093, 198]  # "\n<|im_start|>user\n"
    assert chat.turn_tail_ids == [2, 198, 1, 520, 9531, 198]  # "<|im_end|>\n<|im_start|>assistant\n"
    assert chat.message_wrapper("tool") == ("\n", "<|im_start|>tool\n", "<|im_end|>\n<|im_start|>assistant\n")


def test_built_sequence_equals_the_chat_template_rendering(tokenizer):
    """prompt + model ids (ending in <|im_end|>) + observation turn == the template's own rendering of
    the conversation."""
    chat = ChatFormat(tokenizer)
    model_ids = chat.encode("Action: add 1") + [chat.eot_id]
    built = chat.prompt_ids("Task 3") + model_ids + chat.observation_turn_ids(chat.encode("value 1"))
    conversation = [
        {"role": "user", "content": "Task 3"},
        {"role": "assistant", "content": "Action: add 1"},
        {"role": "user", "content": "value 1"},
    ]
    rendered = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    assert built == tokenizer.encode(rendered, add_special_tokens=False)


def test_truncate_observation(tokenizer):
    chat = ChatFormat(tokenizer)
    # "Task 3: value 0." -> [22188, 216, 35, 42, 1685, 216, 32, 30]; " [truncated]" -> [933, 45924, 483, 77]
    assert chat.truncate("Task 3: value 0.", 8) == ([22188, 216, 35, 42, 1685, 216, 32, 30], False)
    assert chat.truncate("Task 3: value 0.", 6) == ([22188, 216, 933, 45924, 483, 77], True)
    assert chat.truncate("Task 3: value 0.", 2) == ([933, 45924], True)


def test_jsonl_roundtrip_and_viewer(tmp_path, capsys):
    records = [
        {
            "global_step": 3,
            "uid": "u",
            "task_id": 7,
            "copy": 0,
            "status": "done",
            "success": True,
            "failed": False,
            "turns": [{"role": "observation", "text": "</script><b>x</b>"}],
            "segments": [],
        }
    ]
    path = write_jsonl(records, step_path(tmp_path, 3))
    assert path == tmp_path / "rollouts" / "step_000003.jsonl"
    assert read_jsonl(path) == records
    html = render_html(records, "Run <1>")
    assert "</script><b>" not in html  # record text cannot close the data block
    assert "<title>Run &lt;1&gt;</title>" in html
    data = html.split('type="application/json">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data) == records
    viewer_main([str(tmp_path / "rollouts"), "-o", str(tmp_path / "all.html")])
    assert "(1 episodes)" in capsys.readouterr().out
    assert (tmp_path / "all.html").read_text().count('"uid": "u"') == 1
