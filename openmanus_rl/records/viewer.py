"""A static HTML viewer of trajectory records: one self-contained file, no server needed.

    python -m openmanus_rl.records.viewer runs/exp/rollouts -o viewer.html   # every step_*.jsonl there
    python -m openmanus_rl.records.viewer step_000003.jsonl -o step3.html

The page lists episodes (filter by status, success, step or text) and shows
each one turn by turn: observations, the model's text, the parsed action and
whether it was valid, the step reward and done flag, the reward breakdown,
and the token sequence coloured by loss mask (trained model tokens,
observation tokens, appended end-of-turn tokens).  Records are embedded as
JSON and rendered with ``textContent`` only, so no record text can inject markup.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from .jsonl import read_jsonl

# a backslash at the end of a line below joins the next line to it (the page keeps its long lines)
_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font-family:system-ui,sans-serif;margin:1rem;background:#fafafa;color:#222}
#bar{position:sticky;top:0;background:#fafafa;padding:.5rem 0;border-bottom:1px solid #ccc}
.ep{background:#fff;border:1px solid #ddd;border-radius:6px;margin:.6rem 0;padding:.4rem .8rem}
.ep>summary{cursor:pointer;font-weight:600}
.ok{color:#16794a}.bad{color:#b3261e}.muted{color:#777;font-weight:400}
.turn{border-left:4px solid #bbb;margin:.4rem 0;padding:.2rem .6rem;\
white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.85rem}
.turn.assistant{border-color:#2e7d32;background:#f1f8f1}.turn.observation{border-color:#607d8b;background:#f4f6f7}
.turn.error{border-color:#b3261e;background:#fdecea}
.meta{font-family:system-ui,sans-serif;font-size:.8rem;color:#555;margin-top:.2rem}
.tokens{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.8rem;line-height:1.5}
.seg-model{background:#c8e6c9}.seg-observation{background:#eceff1;color:#555}.seg-end_of_turn{background:#ffe0b2}
.legend span{padding:0 .4rem;margin-right:.4rem}
</style></head><body>
<h2>__TITLE__</h2>
<div id="bar">
 <input id="q" placeholder="search text / task id / uid" size="30">
 <select id="status"><option value="">any status</option><option>done</option><option>turn_limit</option>\
<option>truncated</option><option>failed</option></select>
 <select id="succ"><option value="">any outcome</option><option value="1">success</option>\
<option value="0">no success</option></select>
 <span id="count" class="muted"></span>
 <span class="legend"> &nbsp;loss mask: <span class="seg-model">1 model</span>\
<span class="seg-observation">0 observation</span><span class="seg-end_of_turn">0 appended end-of-turn</span></span>
</div>
<div id="list"></div>
<script id="data" type="application/json">__DATA__</script>
<script>
const records = JSON.parse(document.getElementById('data').textContent);
function el(tag, cls, text){const e=document.createElement(tag); if(cls) e.className=cls;\
 if(text!==undefined) e.textContent=text; return e;}
function fmt(x){return (typeof x==='number')? (Math.round(x*1000)/1000).toString() : String(x);}
function episode(r){
  const d=el('details','ep'); const s=el('summary');
  s.appendChild(el('span', r.success?'ok':(r.failed?'bad':''), (r.success?'\\u2714 ':r.failed?'\\u2716 ':'\\u2022 ')));
  s.appendChild(document.createTextNode(`step ${r.global_step} \\u00b7 task ${r.task_id}\
 \\u00b7 copy ${r.copy} \\u00b7 ${r.status}`));
  s.appendChild(el('span','muted',`  reward ${fmt(r.reward_total)} \\u00b7 env ${fmt(r.env_reward)}\
 \\u00b7 ${r.num_turns} turns \\u00b7 ${r.invalid_actions} invalid \\u00b7 uid ${r.uid}`));
  d.appendChild(s);
  d.addEventListener('toggle', ()=>{ if(d.open && !d.dataset.filled){ fill(d,r); d.dataset.filled='1'; } });
  return d;
}
function fill(d,r){
  const info=el('div','meta');
  info.textContent=`server ${r.server||'-'} \\u00b7 seed ${r.seed}\
 \\u00b7 breakdown ${JSON.stringify(r.reward_breakdown)}`\
+(r.error?` \\u00b7 error: ${r.error}`:'');
  d.appendChild(info);
  const p=el('details'); p.appendChild(el('summary','muted','prompt ('+r.prompt_tokens+' tokens)'));\
 p.appendChild(el('div','turn',r.prompt_text)); d.appendChild(p);
  for(const t of r.turns){
    const b=el('div','turn '+t.role); b.appendChild(el('div','meta',t.role));\
 b.appendChild(document.createTextNode(t.text));
    const m=[];
    if(t.role==='assistant'){ m.push('action: '+(t.action===null?'(none: invalid)':t.action));\
 if(t.reward!==undefined) m.push('reward '+fmt(t.reward)); if(t.done) m.push('done');\
 m.push(t.tokens+' tokens, '+t.finish_reason+(t.end_of_turn_appended?', end-of-turn appended':'')); }
    if(t.role==='observation'){ m.push(t.tokens+' tokens'+(t.truncated?' (truncated)':'')\
+(t.in_sequence?'':' \\u00b7 not in the training sequence')); }
    if(m.length) b.appendChild(el('div','meta',m.join(' \\u00b7 ')));
    d.appendChild(b);
  }
  const tk=el('details'); tk.appendChild(el('summary','muted','response tokens by loss mask'));
  const box=el('div','tokens'); for(const sg of r.segments){ const s=el('span','seg-'+sg.kind, sg.text);\
 s.title=`${sg.kind}: ${sg.tokens} tokens, mask ${sg.mask}`; box.appendChild(s);}\
 tk.appendChild(box); d.appendChild(tk);
}
function render(){
  const q=document.getElementById('q').value.toLowerCase(), st=document.getElementById('status').value,\
 sc=document.getElementById('succ').value;
  const list=document.getElementById('list'); list.replaceChildren(); let n=0;
  for(const r of records){
    if(st && r.status!==st) continue;
    if(sc && String(r.success?1:0)!==sc) continue;
    if(q && !JSON.stringify([r.task_id,r.uid,r.turns]).toLowerCase().includes(q)) continue;
    list.appendChild(episode(r)); n++;
  }
  document.getElementById('count').textContent=`${n} of ${records.length} episodes`;
}
for(const id of ['q','status','succ']) document.getElementById(id).addEventListener('input', render);
render();
</script></body></html>
"""


def render_html(records: Sequence[dict[str, Any]], title: str = "Rollouts") -> str:
    """The viewer page with ``records`` embedded."""
    data = json.dumps(list(records), ensure_ascii=False, default=str).replace("<", "\\u003c")
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _PAGE.replace("__TITLE__", safe_title).replace("__DATA__", data)


def write_viewer(records: Sequence[dict[str, Any]], path: str | Path, title: str = "Rollouts") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(records, title), encoding="utf-8")
    return path


def _collect(paths: Sequence[str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for name in paths:
        path = Path(name)
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            records += read_jsonl(file)
    return records


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a static HTML viewer of trajectory JSONL records")
    parser.add_argument("paths", nargs="+", help="JSONL files or directories of step_*.jsonl files")
    parser.add_argument("-o", "--output", default="rollouts.html", help="HTML file to write (default %(default)s)")
    parser.add_argument("--title", default="Rollouts")
    args = parser.parse_args(argv)
    records = _collect(args.paths)
    print(write_viewer(records, args.output, args.title), f"({len(records)} episodes)")


if __name__ == "__main__":
    main()
