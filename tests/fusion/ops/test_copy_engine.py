"""Mode copy_engine's bookkeeping on CPU: the workspace's handle and the tensors over it are made
once per storage, made again when torch's workspace grows, and never kept for a storage torch
dropped. (The transfers need CUDA peer access: `tpscope bench` checks their output on the GPU
machine, docs/runtime.md.)"""

from __future__ import annotations

import torch
import torch.distributed._symmetric_memory as symm

from tpscope.fusion.ops import compat, copy_engine


class FakeHandle:
    def __init__(self, storage: torch.Tensor) -> None:
        self.storage = storage
        self.made: list[tuple] = []

    def get_buffer(self, rank, shape, dtype, storage_offset=0):
        self.made.append((rank, shape, dtype, storage_offset))
        return torch.zeros(shape, dtype=dtype)


def _fake_symm(monkeypatch):
    workspaces: dict[str, torch.Tensor] = {}
    calls: list[int] = []

    def get_symm_mem_workspace(name, min_size):
        calls.append(min_size)
        t = workspaces.get(name)
        if t is None or t.numel() < min_size:  # torch's rule: grow to the larger size
            t = workspaces[name] = torch.empty(
                max(min_size, 0 if t is None else t.numel()), dtype=torch.uint8
            )
        return FakeHandle(t)  # a new Python handle object on every call, as pybind gives

    monkeypatch.setattr(symm, "get_symm_mem_workspace", get_symm_mem_workspace)
    monkeypatch.setattr(symm, "_group_name_to_workspace_tensor", workspaces, raising=False)
    monkeypatch.setattr(compat, "enable_symm_mem", lambda group: "g0")
    monkeypatch.setattr(copy_engine, "_VIEWS", {})
    return workspaces, calls


def test_views_are_made_once_per_workspace_storage(monkeypatch):
    _, calls = _fake_symm(monkeypatch)
    group = object()
    ws = copy_engine._workspace(group, 64)
    a = copy_engine._buffer(ws, 1, (4, 4), torch.float32)
    again = copy_engine._workspace(group, 32)  # smaller: the same storage, no lookup in torch
    assert calls == [64] and again[0] is ws[0]
    assert copy_engine._buffer(again, 1, (4, 4), torch.float32) is a
    assert ws[0].made == [(1, (4, 4), torch.float32, 0)]
    b = copy_engine._buffer(again, 1, (4, 4), torch.float32, 16)  # another offset: another view
    assert b is not a and len(ws[0].made) == 2


def test_a_grown_workspace_drops_the_old_views(monkeypatch):
    workspaces, calls = _fake_symm(monkeypatch)
    group = object()
    ws = copy_engine._workspace(group, 64)
    a = copy_engine._buffer(ws, 0, (2, 2), torch.float32)
    grown = copy_engine._workspace(group, 128)
    assert calls == [64, 128] and grown[0] is not ws[0] and grown[0].storage.numel() == 128
    assert copy_engine._buffer(grown, 0, (2, 2), torch.float32) is not a
    # torch's symm_mem ops grow the same workspace behind our back: seen by the storage changing
    workspaces["g0"] = torch.empty(256, dtype=torch.uint8)
    moved = copy_engine._workspace(group, 64)
    assert calls == [64, 128, 64] and moved[0].storage is workspaces["g0"]


def test_without_torch_s_workspace_table_every_call_asks_torch(monkeypatch):
    _, calls = _fake_symm(monkeypatch)
    monkeypatch.delattr(symm, "_group_name_to_workspace_tensor")
    group = object()
    copy_engine._workspace(group, 8)
    copy_engine._workspace(group, 8)
    assert calls == [8, 8]
