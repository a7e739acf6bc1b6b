"""`DataProto`: the batch that moves between the driver, the agent and the workers.

A `DataProto` of B samples has three parts:

* ``batch``: a dict of tensors that all share dim 0 (= B), e.g. ``input_ids``
  ``(B, L)``, ``response_mask`` ``(B, T)``;
* ``non_tensor_batch``: a dict of numpy arrays of length B (object dtype for
  strings, dicts and lists), e.g. ``uid``, ``data_source``, ``trajectory``;
* ``meta_info``: a plain dict that is not batched (temperature, step, metrics).

Every constructor and every method checks that all parts agree on B and raises
``ValueError`` naming the offending key and both lengths when they do not.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import torch

__all__ = ["DataProto", "DataProtoItem"]


def _as_batch_array(key: str, value: Any) -> np.ndarray:
    """Turn a list / tuple / array into a numpy array whose dim 0 is the batch.

    Lists become 1-D object arrays (one element per sample, even when each
    element is itself a list), so ragged per-sample data stays per-sample.
    """
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise ValueError(f"non-tensor '{key}' is a 0-d array; it needs a batch dimension")
        return value
    if isinstance(value, (list, tuple)):
        arr = np.empty(len(value), dtype=object)
        arr[:] = list(value) if len(value) else []
        return arr
    raise TypeError(f"non-tensor '{key}' must be a numpy array or a list, got {type(value).__name__}")


def _values_equal(a: Any, b: Any) -> bool:
    """Element equality that also works for nested arrays and tensors."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return False
        if a.dtype == object or b.dtype == object:
            return all(_values_equal(x, y) for x, y in zip(a.ravel(), b.ravel()))
        return bool(np.array_equal(a, b))
    return bool(a == b)


def _index_array(idx: Any, length: int) -> np.ndarray:
    """Normalise a slice / list / bool mask / index tensor to integer positions."""
    if isinstance(idx, slice):
        return np.arange(length)[idx]
    if isinstance(idx, torch.Tensor):
        idx = idx.detach().cpu().numpy()
    idx = np.asarray(idx)
    if idx.dtype == bool:
        if idx.shape != (length,):
            raise ValueError(f"boolean mask has shape {idx.shape}, expected ({length},)")
        return np.nonzero(idx)[0]
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"index must be an int, slice, bool mask or 1-D integer index, got dtype {idx.dtype}")
    return idx


@dataclass
class DataProtoItem:
    """One sample of a `DataProto` (what ``data[i]`` returns)."""

    batch: dict[str, torch.Tensor] = field(default_factory=dict)
    non_tensor_batch: dict[str, Any] = field(default_factory=dict)
    meta_info: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataProto:
    """A batch of B samples: tensors, per-sample numpy arrays, and shared meta info."""

    batch: dict[str, torch.Tensor] = field(default_factory=dict)
    non_tensor_batch: dict[str, np.ndarray] = field(default_factory=dict)
    meta_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.batch = dict(self.batch or {})
        self.non_tensor_batch = {k: _as_batch_array(k, v) for k, v in (self.non_tensor_batch or {}).items()}
        self.meta_info = dict(self.meta_info or {})
        self.check_consistency()

    # ------------------------------------------------------------------ build
    @classmethod
    def from_dict(
        cls,
        tensors: dict[str, torch.Tensor] | None = None,
        non_tensors: dict[str, Any] | None = None,
        meta_info: dict[str, Any] | None = None,
    ) -> "DataProto":
        """Build from separate dicts of tensors, per-sample arrays/lists and meta info."""
        for key, value in (tensors or {}).items():
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"tensor '{key}' must be a torch.Tensor, got {type(value).__name__}")
        return cls(batch=tensors or {}, non_tensor_batch=non_tensors or {}, meta_info=meta_info or {})

    @classmethod
    def from_single_dict(cls, data: dict[str, Any], meta_info: dict[str, Any] | None = None) -> "DataProto":
        """Split one dict into tensors (torch.Tensor values) and non-tensors (arrays / lists)."""
        tensors = {k: v for k, v in data.items() if isinstance(v, torch.Tensor)}
        non_tensors = {k: v for k, v in data.items() if not isinstance(v, torch.Tensor)}
        return cls.from_dict(tensors, non_tensors, meta_info)

    def check_consistency(self) -> None:
        """Raise ValueError unless every tensor and array has the same dim 0."""
        first_key, first_len = None, None
        for key, value in list(self.batch.items()) + list(self.non_tensor_batch.items()):
            if value.ndim == 0:
                raise ValueError(f"'{key}' is 0-dimensional; every entry needs a batch dimension")
            n = value.shape[0]
            if first_key is None:
                first_key, first_len = key, n
            elif n != first_len:
                raise ValueError(
                    f"batch size mismatch: '{key}' has length {n} but '{first_key}' has length {first_len}"
                )

    # ------------------------------------------------------------- inspect
    def __len__(self) -> int:
        for value in self.batch.values():
            return int(value.shape[0])
        for value in self.non_tensor_batch.values():
            return int(value.shape[0])
        return 0

    def __repr__(self) -> str:
        tensors = ", ".join(f"{k}: {tuple(v.shape)} {v.dtype}" for k, v in self.batch.items())
        arrays = ", ".join(self.non_tensor_batch)
        return (
            f"DataProto(len={len(self)}, batch={{{tensors}}}, non_tensor_batch=[{arrays}], "
            f"meta_info={list(self.meta_info)})"
        )

    def __getitem__(self, idx: Any) -> "DataProto | DataProtoItem":
        """``data[i]`` gives one `DataProtoItem`; a slice, index list/tensor or bool mask gives a `DataProto`."""
        if isinstance(idx, (int, np.integer)):
            n = len(self)
            if not -n <= idx < n:
                raise IndexError(f"index {idx} out of range for a DataProto of length {n}")
            return DataProtoItem(
                batch={k: v[idx] for k, v in self.batch.items()},
                non_tensor_batch={k: v[idx] for k, v in self.non_tensor_batch.items()},
                meta_info=self.meta_info,
            )
        return self._take(_index_array(idx, len(self)))

    def _take(self, positions: np.ndarray) -> "DataProto":
        index = torch.as_tensor(positions, dtype=torch.long)
        return DataProto(
            batch={k: v[index.to(v.device)] for k, v in self.batch.items()},
            non_tensor_batch={k: v[positions] for k, v in self.non_tensor_batch.items()},
            meta_info=dict(self.meta_info),
        )

    # ------------------------------------------------------------- keys
    @staticmethod
    def _missing(kind: str, wanted: Sequence[str] | None, have: dict) -> None:
        missing = [k for k in (wanted or []) if k not in have]
        if missing:
            raise KeyError(f"{kind} keys {missing} not present; available: {sorted(have)}")

    def select(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
        deepcopy: bool = False,
    ) -> "DataProto":
        """A new DataProto with only the named keys (None keeps every key of that part)."""
        self._missing("batch", batch_keys, self.batch)
        self._missing("non_tensor_batch", non_tensor_batch_keys, self.non_tensor_batch)
        self._missing("meta_info", meta_info_keys, self.meta_info)
        batch = {k: self.batch[k] for k in (self.batch if batch_keys is None else batch_keys)}
        non_tensors = {
            k: self.non_tensor_batch[k]
            for k in (self.non_tensor_batch if non_tensor_batch_keys is None else non_tensor_batch_keys)
        }
        meta = {k: self.meta_info[k] for k in (self.meta_info if meta_info_keys is None else meta_info_keys)}
        out = DataProto(batch=batch, non_tensor_batch=non_tensors, meta_info=meta)
        return copy.deepcopy(out) if deepcopy else out

    def pop(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
    ) -> "DataProto":
        """Remove the named keys from this DataProto and return them as a new one."""
        self._missing("batch", batch_keys, self.batch)
        self._missing("non_tensor_batch", non_tensor_batch_keys, self.non_tensor_batch)
        self._missing("meta_info", meta_info_keys, self.meta_info)
        return DataProto(
            batch={k: self.batch.pop(k) for k in batch_keys or []},
            non_tensor_batch={k: self.non_tensor_batch.pop(k) for k in non_tensor_batch_keys or []},
            meta_info={k: self.meta_info.pop(k) for k in meta_info_keys or []},
        )

    def union(self, other: "DataProto") -> "DataProto":
        """Merge ``other`` into this DataProto (in place, and returned).

        A key present in both must hold equal values; otherwise ValueError.
        """
        if self.batch or self.non_tensor_batch:
            if (other.batch or other.non_tensor_batch) and len(other) != len(self):
                raise ValueError(f"cannot union DataProtos of lengths {len(self)} and {len(other)}")
        for part, mine, theirs in (
            ("batch", self.batch, other.batch),
            ("non_tensor_batch", self.non_tensor_batch, other.non_tensor_batch),
            ("meta_info", self.meta_info, other.meta_info),
        ):
            for key, value in theirs.items():
                if key in mine and not _values_equal(mine[key], value):
                    raise ValueError(f"union conflict: {part} key '{key}' differs between the two DataProtos")
                mine[key] = value
        self.check_consistency()
        return self

    # --------------------------------------------------------- split/merge
    def chunk(self, chunks: int) -> list["DataProto"]:
        """Split into ``chunks`` equal parts; the length must divide evenly."""
        n = len(self)
        if chunks <= 0 or n % chunks != 0:
            raise ValueError(f"cannot chunk a DataProto of length {n} into {chunks} equal parts")
        return self.split(n // chunks)

    def split(self, split_size: int) -> list["DataProto"]:
        """Consecutive parts of ``split_size`` samples (the last may be shorter)."""
        if split_size <= 0:
            raise ValueError(f"split_size must be positive, got {split_size}")
        n = len(self)
        return [self._take(np.arange(start, min(start + split_size, n))) for start in range(0, n, split_size)]

    @staticmethod
    def concat(data: Sequence["DataProto"]) -> "DataProto":
        """Concatenate along the batch; every part needs the same keys. meta_info comes from the first."""
        if not data:
            raise ValueError("concat needs at least one DataProto")
        first = data[0]
        for i, d in enumerate(data[1:], start=1):
            if set(d.batch) != set(first.batch) or set(d.non_tensor_batch) != set(first.non_tensor_batch):
                raise ValueError(
                    f"concat: part {i} has keys {sorted(d.batch) + sorted(d.non_tensor_batch)}, "
                    f"part 0 has {sorted(first.batch) + sorted(first.non_tensor_batch)}"
                )
        return DataProto(
            batch={k: torch.cat([d.batch[k] for d in data], dim=0) for k in first.batch},
            non_tensor_batch={
                k: np.concatenate([d.non_tensor_batch[k] for d in data], axis=0) for k in first.non_tensor_batch
            },
            meta_info=dict(first.meta_info),
        )

    def repeat(self, repeat_times: int = 2, interleave: bool = True) -> "DataProto":
        """Repeat every sample. interleave: ``a a b b``; otherwise ``a b a b``."""
        if repeat_times < 1:
            raise ValueError(f"repeat_times must be >= 1, got {repeat_times}")
        n = len(self)
        positions = np.repeat(np.arange(n), repeat_times) if interleave else np.tile(np.arange(n), repeat_times)
        return self._take(positions)

    def reorder(self, indices: torch.Tensor | np.ndarray | Sequence[int]) -> None:
        """Permute the samples in place: sample i becomes old sample ``indices[i]``."""
        positions = _index_array(indices, len(self))
        if len(positions) != len(self):
            raise ValueError(f"reorder needs {len(self)} indices, got {len(positions)}")
        taken = self._take(positions)
        self.batch, self.non_tensor_batch = taken.batch, taken.non_tensor_batch

    def make_iterator(
        self, mini_batch_size: int, epochs: int = 1, seed: int | None = None, shuffle: bool = False
    ) -> Iterator["DataProto"]:
        """Yield mini-batches for ``epochs`` passes; the order is a function of ``seed`` alone.

        With ``shuffle`` each epoch draws a permutation from a generator seeded
        with ``seed`` (0 when None), so two iterators with the same seed agree.
        """
        n = len(self)
        if mini_batch_size <= 0 or n % mini_batch_size != 0:
            raise ValueError(f"mini_batch_size {mini_batch_size} does not divide the batch of {n}")
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator).numpy() if shuffle else np.arange(n)
            for start in range(0, n, mini_batch_size):
                yield self._take(order[start : start + mini_batch_size])

    def pad_to_divisor(self, divisor: int) -> tuple["DataProto", int]:
        """Pad (by repeating samples from the start) so the length divides by ``divisor``.

        Returns ``(padded, pad_size)``; ``padded.unpad(pad_size)`` undoes it.
        """
        if divisor <= 0:
            raise ValueError(f"divisor must be positive, got {divisor}")
        n = len(self)
        pad_size = (-n) % divisor
        if pad_size == 0:
            return self, 0
        if n == 0:
            raise ValueError("cannot pad an empty DataProto")
        return self._take(np.concatenate([np.arange(n), np.arange(pad_size) % n])), pad_size

    def unpad(self, pad_size: int) -> "DataProto":
        """Drop the last ``pad_size`` samples (added by `pad_to_divisor`)."""
        if pad_size < 0 or pad_size > len(self):
            raise ValueError(f"pad_size {pad_size} outside [0, {len(self)}]")
        return self if pad_size == 0 else self._take(np.arange(len(self) - pad_size))

    # ------------------------------------------------------------ device/io
    def to(self, device: str | torch.device) -> "DataProto":
        """Move every tensor to ``device`` (in place, and returned)."""
        self.batch = {k: v.to(device) for k, v in self.batch.items()}
        return self
