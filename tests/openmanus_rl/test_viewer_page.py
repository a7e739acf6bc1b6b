"""The viewer page's script, run under Node with a minimal DOM stand-in: every episode renders, turn by turn."""

import json
import shutil
import subprocess

import pytest

from openmanus_rl.records import render_html

NODE = shutil.which("node")

DOM = r"""
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.className = ''; this._text = ''; this.dataset = {};
                     this.listeners = {}; this.value = ''; this.open = false; this.title = ''; }
  appendChild(c) { this.children.push(c); return c; }
  replaceChildren() { this.children = []; }
  set textContent(t) { this._text = String(t); }
  get textContent() { return this._text + this.children.map(c => c.textContent).join(''); }
  addEventListener(e, f) { this.listeners[e] = f; }
}
const els = {};
const document = {
  createElement: t => new El(t),
  createTextNode: t => { const e = new El('#text'); e.textContent = t; return e; },
  getElementById: id => {
    if (!els[id]) { els[id] = new El('div'); if (id === 'data') els[id].textContent = DATA; }
    return els[id];
  },
};
"""

DRIVE = r"""
const list = els['list'];
const out = {count: els['count'].textContent, episodes: []};
for (const d of list.children) { d.open = true; d.listeners['toggle'](); out.episodes.push(d.textContent); }
els['status'].value = 'failed'; render(); out.failed = list.children.length;
els['status'].value = ''; els['q'].value = 'task-7-text'; render(); out.search = list.children.length;
console.log(JSON.stringify(out));
"""


def record(task_id, status, turns, segments, **extra):
    return {
        "global_step": 2,
        "uid": f"u{task_id}",
        "task_id": task_id,
        "copy": 0,
        "seed": 5,
        "server": "http://s:1",
        "status": status,
        "failed": status == "failed",
        "error": extra.get("error", ""),
        "success": extra.get("success", False),
        "env_reward": 1.0,
        "reward_total": 1.5,
        "reward_breakdown": {"goal": 1.0, "format": 0.5},
        "num_turns": 1,
        "invalid_actions": 0,
        "prompt_tokens": 9,
        "prompt_text": "PROMPT",
        "turns": turns,
        "segments": segments,
    }


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_viewer_renders_every_episode_turn_by_turn(tmp_path):
    records = [
        record(
            7,
            "done",
            [
                {"role": "observation", "text": "task-7-text", "tokens": 3, "truncated": True, "in_sequence": True},
                {
                    "role": "assistant",
                    "text": "Action: add 7",
                    "action": "add 7",
                    "reward": 1.0,
                    "done": True,
                    "tokens": 6,
                    "finish_reason": "length",
                    "end_of_turn_appended": True,
                },
                {"role": "observation", "text": "value 7", "in_sequence": False},
            ],
            [
                {"kind": "model", "text": "Action: add 7", "tokens": 6, "mask": 1},
                {"kind": "end_of_turn", "text": "<|im_end|>", "tokens": 1, "mask": 0},
            ],
            success=True,
        ),
        record(
            8,
            "failed",
            [
                {
                    "role": "assistant",
                    "text": "babble",
                    "action": None,
                    "tokens": 2,
                    "finish_reason": "stop",
                    "end_of_turn_appended": False,
                },
                {"role": "error", "text": "EnvTimeoutError: no answer within 1s"},
            ],
            [],
            error="EnvTimeoutError: no answer within 1s",
        ),
    ]
    html = render_html(records)
    data = html.split('type="application/json">', 1)[1].split("</script>", 1)[0]
    script = html.rsplit("<script>", 1)[1].split("</script>", 1)[0]
    page = tmp_path / "page.js"
    page.write_text("const DATA = " + json.dumps(data) + ";\n" + DOM + script + DRIVE)
    result = json.loads(
        subprocess.run([NODE, str(page)], capture_output=True, text=True, check=True, timeout=30).stdout
    )
    assert result["count"] == "2 of 2 episodes"
    done, failed = result["episodes"]
    for text in (
        "step 2 · task 7 · copy 0 · done",
        "reward 1.5",
        'breakdown {"goal":1,"format":0.5}',
        "PROMPT",
        "task-7-text",
        "3 tokens (truncated)",
        "action: add 7",
        "reward 1",
        "done",
        "6 tokens, length, end-of-turn appended",
        "not in the training sequence",
        "Action: add 7<|im_end|>",
    ):
        assert text in done, text
    for text in ("failed", "action: (none: invalid)", "error: EnvTimeoutError: no answer within 1s"):
        assert text in failed, text
    assert (result["failed"], result["search"]) == (1, 1)


HOSTILE = ["</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>"]

WALK = r"""
els['q'].value = ''; render();
for (const d of els['list'].children) { d.open = true; d.listeners['toggle'](); }
const nodes = [];
(function walk(e) { nodes.push([e.tag, e._text]); e.children.forEach(walk); })(els['list']);
console.log(JSON.stringify(nodes));
"""


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
def test_hostile_text_in_a_trajectory_stays_text(tmp_path):
    """Observation, model, error and prompt text that try to break out of the page come back as
    text, never as markup."""
    obs, reply = HOSTILE
    records = [
        record(
            9,
            "failed",
            [
                {"role": "observation", "text": obs, "tokens": 3, "truncated": False, "in_sequence": True},
                {
                    "role": "assistant",
                    "text": reply,
                    "action": reply,
                    "reward": 0.0,
                    "done": False,
                    "tokens": 6,
                    "finish_reason": "stop",
                    "end_of_turn_appended": False,
                },
                {"role": "error", "text": obs},
            ],
            [{"kind": "model", "text": reply, "tokens": 6, "mask": 1}],
            error=obs,
        )
    ]
    records[0]["prompt_text"] = obs
    html = render_html(records, title=obs)
    assert html.count("<script") == 2  # the page's data block and its own script; nothing from the records
    assert html.count("<script>") == 1  # the only bare opening tag is the page's own script
    for text in HOSTILE:
        assert text not in html
    data = html.split('type="application/json">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)[0]["prompt_text"] == obs  # escaped in the page, intact as data
    script = html.rsplit("<script>", 1)[1].split("</script>", 1)[0]
    page = tmp_path / "page.js"
    page.write_text("const DATA = " + json.dumps(data) + ";\n" + DOM + script + DRIVE + WALK)
    out = subprocess.run([NODE, str(page)], capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()
    result, nodes = json.loads(out[0]), json.loads(out[1])
    (episode,) = result["episodes"]
    assert obs in episode and reply in episode and f"error: {obs}" in episode  # rendered as text content
    # Each hostile string is the whole text of a node of its own (prompt, observation, error, model text, token
    # segment), set through textContent; the page only ever builds its own kinds of element.
    texts = [text for _, text in nodes]
    assert texts.count(obs) >= 3 and texts.count(reply) >= 2
    assert {tag for tag, _ in nodes} <= {"div", "span", "details", "summary", "#text"}
