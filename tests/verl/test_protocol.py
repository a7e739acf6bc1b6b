"""DataProto: construction, indexing, key operations, split/merge, padding, io."""

import numpy as np
import pytest
import torch

from verl.protocol import DataProto, DataProtoItem


def make(n: int = 4) -> DataProto:
    return DataProto.from_dict(
        tensors={"obs": torch.arange(n * 2).view(n, 2), "act": torch.arange(n) * 10},
        non_tensors={"uid": [f"u{i}" for i in range(n)], "traj": [[i] * (i + 1) for i in range(n)]},
        meta_info={"temperature": 1.0},
    )


def rows(d: DataProto) -> list[int]:
    return d.batch["act"].div(10).long().tolist()


def test_from_dict_keeps_ragged_lists_per_sample():
    d = make()
    assert len(d) == 4
    assert d.non_tensor_batch["traj"].dtype == object
    assert d.non_tensor_batch["traj"].shape == (4,)
    assert d.non_tensor_batch["traj"][2] == [2, 2, 2]


def test_length_mismatch_names_key_and_lengths():
    with pytest.raises(ValueError, match=r"'uid' has length 3 but 'obs' has length 4"):
        DataProto.from_dict(tensors={"obs": torch.zeros(4, 2)}, non_tensors={"uid": ["a", "b", "c"]})
    with pytest.raises(ValueError, match=r"'b' has length 2 but 'a' has length 3"):
        DataProto.from_dict(tensors={"a": torch.zeros(3), "b": torch.zeros(2)})
    with pytest.raises(TypeError, match="tensor 'a' must be a torch.Tensor"):
        DataProto.from_dict(tensors={"a": [1, 2]})


def test_from_single_dict_splits_by_type():
    d = DataProto.from_single_dict(
        {"x": torch.ones(2, 3), "name": np.array(["p", "q"], dtype=object)}, meta_info={"k": 1}
    )
    assert list(d.batch) == ["x"] and list(d.non_tensor_batch) == ["name"] and d.meta_info == {"k": 1}


def test_getitem_int_slice_mask_tensor():
    d = make()
    item = d[1]
    assert isinstance(item, DataProtoItem)
    assert item.batch["obs"].tolist() == [2, 3] and item.non_tensor_batch["uid"] == "u1"
    assert d[-1].non_tensor_batch["uid"] == "u3"
    with pytest.raises(IndexError, match="index 4 out of range"):
        d[4]
    assert rows(d[1:3]) == [1, 2]
    assert rows(d[torch.tensor([3, 0])]) == [3, 0]
    assert rows(d[np.array([True, False, True, False])]) == [0, 2]
    assert list(d[[2, 2]].non_tensor_batch["uid"]) == ["u2", "u2"]
    assert d[1:3].meta_info == {"temperature": 1.0}
    with pytest.raises(ValueError, match=r"boolean mask has shape \(2,\), expected \(4,\)"):
        d[np.array([True, False])]


def test_select_and_pop():
    d = make()
    s = d.select(batch_keys=["obs"], non_tensor_batch_keys=[], meta_info_keys=["temperature"])
    assert list(s.batch) == ["obs"] and s.non_tensor_batch == {} and s.meta_info == {"temperature": 1.0}
    with pytest.raises(KeyError, match=r"batch keys \['nope'\] not present"):
        d.select(batch_keys=["nope"])
    popped = d.pop(batch_keys=["act"], non_tensor_batch_keys=["uid"])
    assert list(popped.batch) == ["act"] and list(popped.non_tensor_batch) == ["uid"]
    assert list(d.batch) == ["obs"] and list(d.non_tensor_batch) == ["traj"]


def test_union_merges_and_detects_conflicts():
    d = make()
    other = DataProto.from_dict(tensors={"act": torch.arange(4) * 10, "new": torch.ones(4)}, meta_info={"step": 3})
    d.union(other)
    assert set(d.batch) == {"obs", "act", "new"} and d.meta_info == {"temperature": 1.0, "step": 3}
    with pytest.raises(ValueError, match="batch key 'act' differs"):
        make().union(DataProto.from_dict(tensors={"act": torch.zeros(4)}))
    with pytest.raises(ValueError, match="meta_info key 'temperature' differs"):
        make().union(DataProto.from_dict(meta_info={"temperature": 0.5}))
    with pytest.raises(ValueError, match="lengths 4 and 3"):
        make().union(make(3))


def test_chunk_split_concat():
    d = make(6)
    parts = d.chunk(3)
    assert [rows(p) for p in parts] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="length 6 into 4 equal parts"):
        d.chunk(4)
    assert [rows(p) for p in d.split(4)] == [[0, 1, 2, 3], [4, 5]]
    back = DataProto.concat(parts)
    assert rows(back) == [0, 1, 2, 3, 4, 5]
    assert list(back.non_tensor_batch["uid"]) == [f"u{i}" for i in range(6)]
    assert back.non_tensor_batch["traj"][5] == [5] * 6
    with pytest.raises(ValueError, match="part 1 has keys"):
        DataProto.concat([make(2), make(2).select(batch_keys=["obs"])])


def test_repeat_and_reorder():
    d = make(2)
    assert rows(d.repeat(3, interleave=True)) == [0, 0, 0, 1, 1, 1]
    assert list(d.repeat(2, interleave=False).non_tensor_batch["uid"]) == ["u0", "u1", "u0", "u1"]
    d = make(3)
    d.reorder(torch.tensor([2, 0, 1]))
    assert rows(d) == [2, 0, 1] and list(d.non_tensor_batch["uid"]) == ["u2", "u0", "u1"]
    with pytest.raises(ValueError, match="reorder needs 3 indices, got 2"):
        d.reorder([0, 1])


def test_make_iterator_is_deterministic_given_seed():
    d = make(8)

    def order(seed: int) -> list:
        return [rows(mb) for mb in d.make_iterator(mini_batch_size=4, epochs=2, seed=seed, shuffle=True)]

    first = order(7)
    assert first == order(7)
    assert len(first) == 4 and all(len(mb) == 4 for mb in first)
    assert sorted(first[0] + first[1]) == list(range(8)) and sorted(first[2] + first[3]) == list(range(8))
    assert first != order(8)
    assert [rows(mb) for mb in d.make_iterator(4, epochs=1)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="mini_batch_size 3 does not divide the batch of 8"):
        next(d.make_iterator(3))


def test_pad_to_divisor_and_unpad():
    d = make(5)
    padded, pad = d.pad_to_divisor(4)
    assert pad == 3 and rows(padded) == [0, 1, 2, 3, 4, 0, 1, 2]
    assert rows(padded.unpad(pad)) == [0, 1, 2, 3, 4]
    same, pad0 = d.pad_to_divisor(5)
    assert pad0 == 0 and same is d
    tiny, pad = make(1).pad_to_divisor(3)
    assert pad == 2 and rows(tiny) == [0, 0, 0]


def test_to_moves_every_tensor_and_returns_self():
    d = make()
    assert d.to("cpu") is d and all(v.device.type == "cpu" for v in d.batch.values())
