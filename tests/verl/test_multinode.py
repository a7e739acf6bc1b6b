"""Beyond one machine, simulated: a Ray cluster of four nodes on this box (`ray.cluster_utils.Cluster`: each node its
own raylet with its own CPUs and labels) trains PPO with ``trainer.nnodes=2``. The actor, reference and critic ranks sit
on the two nodes labelled for the policy, one rank per node (asked from inside each rank), FSDP2 runs across them over
gloo, the env server runs on the node labelled for the envs, supervised there (``agent.server_nodes``), and the
checkpoint written on the cluster resumes on a single-node Ray. A server killed on the env node is restarted there; a
cluster without the labelled nodes is refused before any worker starts."""

from __future__ import annotations

import json
import os
import re
from typing import Iterator

import pytest
from test_trainer_e2e import main_ppo, run_main
from trainer_runs import by_step, last_line, metric_rows, run_python

from agentgym.spawn import free_port

pytestmark = pytest.mark.slow

POLICY_LABELS = {"role": "policy"}


@pytest.fixture(scope="module")
def cluster(cache_dir, shop) -> Iterator[tuple[str, list[str], str]]:
    """(address, the two policy nodes' ids, the env node's id): a head for the driver, two policy nodes, an env node.
    The nodes' processes inherit this session's cache (``cache_dir``), where ``shop`` generated WebShop's catalogue."""
    from ray.cluster_utils import Cluster

    os.environ.setdefault(
        "RAY_raylet_start_wait_time_s", "120"
    )  # raylets start slowly while other tests load the cores
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "labels": {"role": "driver"}})
    policy = [c.add_node(num_cpus=1, labels=POLICY_LABELS) for _ in range(2)]
    env = c.add_node(num_cpus=1, labels={"role": "env"})
    c.wait_for_nodes()
    try:
        yield c.address, [n.node_id for n in policy], env.node_id
    finally:
        c.shutdown()


def placement(stdout: str) -> dict[str, list[str]]:
    """Each worker group's rank -> node (8-character id prefixes), from the trainer's placement line."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith("[trainer] placement: "))
    return {
        name: re.findall(r"'([0-9a-f]{8})'", nodes)
        for name, nodes in re.findall(r"(\w+) ranks on nodes (\[[^\]]*\])", line)
    }


def test_two_policy_nodes_train_ppo_and_the_checkpoint_resumes_on_one(
    cluster, tiny_model_path, webshop_tasks, server, tmp_path
):
    address, policy_nodes, env_node = cluster
    out = tmp_path / "run"
    # the random tiny model scores 0 and the fresh critic says 0: the entropy bonus gives the update a gradient
    recipe = (
        "actor_rollout_ref.rollout.name=hf",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.entropy_coeff=0.01",
        "trainer.val_before_train=false",
        "trainer.test_freq=0",
    )
    on_cluster = (
        f"ray_init.address={address}",
        "trainer.nnodes=2",
        "trainer.n_workers_per_node=1",
        "trainer.cpus_per_worker=0.5",
        "trainer.policy_nodes={role:policy}",
        "agent.manage_servers=true",
        "agent.server_nodes={role:env}",
    )
    port = free_port()  # the run starts its own server there, on the env node
    first = main_ppo(
        tiny_model_path,
        webshop_tasks,
        f"http://127.0.0.1:{port}",
        out,
        *recipe,
        *on_cluster,
        "trainer.stop_after_step=1",
    )
    assert first.returncode == 0, (
        f"main_ppo failed ({first.returncode}):\n{first.stdout[-3000:]}\n{first.stderr[-5000:]}"
    )
    node_ip = address.rsplit(":", 1)[0]
    assert (
        f"[env-supervisor] webshop server http://127.0.0.1:{port} runs on Ray node {env_node[:8]} at "
        f"http://{node_ip}:{port}"
    ) in first.stdout
    assert (out / "env_logs" / f"server_{port}.log").is_file()
    where = placement(first.stdout)
    # PPO with a KL loss: the actor group holds actor, rollout and reference; the critic shares its bundles
    assert sorted(where["ActorRolloutRefWorker"]) == sorted(n[:8] for n in policy_nodes)  # one rank on each policy node
    assert where["CriticWorker"] == where["ActorRolloutRefWorker"]
    rows = metric_rows(out)
    assert [r["step"] for r in rows] == [1]
    step1 = by_step(rows, 1)
    assert "actor/kl_loss" in step1 and "critic/vf_loss" in step1 and step1["actor/grad_norm"] > 0
    assert abs(step1["rollout/logprob_diff_vs_trainer"]) < 0.05  # the 2-rank FSDP2 forward matches the engine's samples
    ckpt = out / "checkpoints" / "global_step_1"
    assert (ckpt / "actor" / "actor.pt").is_file() and (ckpt / "critic" / "critic.pt").is_file()
    # each rank keeps its own RNG state beside the full weights rank 0 wrote
    assert sorted(p.name for p in (ckpt / "actor").glob("actor_rng_rank*.pt")) == [
        "actor_rng_rank0.pt",
        "actor_rng_rank1.pt",
    ]

    resumed = run_main(tiny_model_path, webshop_tasks, server, out, *recipe)  # a local single-node Ray, one rank
    assert [r["step"] for r in resumed] == [1, 2]
    assert (out / "checkpoints" / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert by_step(resumed, 2)["actor/grad_norm"] > 0


def test_a_cluster_without_the_labelled_nodes_is_refused_before_any_worker_starts(
    cluster, tiny_model_path, webshop_tasks, server, tmp_path
):
    address, _, _ = cluster
    proc = main_ppo(
        tiny_model_path,
        webshop_tasks,
        server,
        tmp_path / "run",
        f"ray_init.address={address}",
        "trainer.nnodes=2",
        "trainer.cpus_per_worker=0.5",
        "trainer.policy_nodes={role:gpu}",
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        "resource error: resource pool 'actor_rollout_ref' needs 2 distinct node(s) with labels {'role': 'gpu'}, "
        "node i holding process_on_nodes[i] = [1, 1] ranks of {'CPU': 0.5}; found 0. The cluster's alive nodes: "
    ) in proc.stderr
    assert "labels {'role': 'policy'} 1 CPU" in proc.stderr and "labels {'role': 'env'} 1 CPU" in proc.stderr
    assert "[trainer] workers:" not in proc.stdout and not (tmp_path / "run" / "metrics.jsonl").exists()


RESTART_DRILL = """
import json, os, signal, sys, time
from pathlib import Path
import ray
from agentgym.spawn import free_port, healthy
from openmanus_rl.envs import ServerAddresses
from openmanus_rl.envs.server_host import remote_supervisors

ray.init(address=sys.argv[1], log_to_driver=False)
book, port = ServerAddresses(), free_port()
policy = {"max_restarts": 2, "hang_s": 5.0, "poll_s": 0.2, "backoff_s": 0.1}
[host] = remote_supervisors("maze", [port], {"role": "env"}, Path(sys.argv[2]), "http://127.0.0.1", policy, book)
host.start()
url = book.resolve(f"http://127.0.0.1:{port}")
before = host.pids()
os.kill(before[0], signal.SIGKILL)  # the simulated node is this box: its server is a process here
deadline = time.monotonic() + 60
while host.metrics().get("env_server/restarts", 0.0) < 1 and time.monotonic() < deadline:
    time.sleep(0.2)
found = {"node": host.node_id, "url": url, "ready": host.wait_ready(60), "healthy": healthy(url),
         "restarts": host.metrics()["env_server/restarts"], "new_pid": host.pids()[0] != before[0]}
host.close()
found["answers_after_close"] = healthy(url)
print(json.dumps(found))
"""


def test_a_server_killed_on_the_env_node_is_restarted_there(cluster, tmp_path):
    address, _, env_node = cluster
    found = json.loads(last_line(run_python(["-c", RESTART_DRILL, address, str(tmp_path / "logs")], timeout_s=300)))
    port = found["url"].rsplit(":", 1)[1]
    assert found == {
        "node": env_node,
        "url": f"http://{address.rsplit(':', 1)[0]}:{port}",
        "ready": None,
        "healthy": True,
        "restarts": 1.0,
        "new_pid": True,
        "answers_after_close": False,
    }
