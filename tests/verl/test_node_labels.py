"""Node-label helpers on node dicts shaped as ``ray.nodes()`` reports them."""

from verl.utils.node_labels import carries, describe, is_label_selector

POLICY = {
    "NodeID": "3fc1d810aa",
    "Alive": True,
    "Labels": {"role": "policy", "ray.io/node-id": "3fc1d810aa"},
    "Resources": {"CPU": 1.0, "memory": 2e10},
}
DEAD = {"NodeID": "cb4bfedcbb", "Alive": False, "Labels": {"role": "policy"}, "Resources": {"CPU": 2.0}}


def test_a_node_carries_a_selector_only_alive_and_with_every_label():
    assert carries(POLICY, {}) and carries(POLICY, {"role": "policy"})
    assert not carries(POLICY, {"role": "env"}) and not carries(POLICY, {"role": "policy", "zone": "a"})
    assert not carries(DEAD, {"role": "policy"})


def test_selectors_and_the_node_description():
    assert is_label_selector(None) and is_label_selector({}) and is_label_selector({"node-type": "gpu"})
    assert not is_label_selector({"gpus": 8}) and not is_label_selector(["role"])
    assert describe([POLICY, DEAD], ["CPU", "GPU"]) == (
        "3fc1d810 labels {'role': 'policy'} 1 CPU, 0 GPU; cb4bfedc labels {'role': 'policy'} 2 CPU, 0 GPU"
    )
    assert describe([POLICY]) == "3fc1d810 labels {'role': 'policy'}"
