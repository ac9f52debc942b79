"""Make the CPU jobs of `tests/data/foreign-cpu/`: small jobs written with PyTorch's own APIs (not
tpscope's runtime), run on CPU with gloo and profiled with torch.profiler as users set it up.

    python3 tests/data/foreign-cpu/make.py [JOB ...]     # default: every job

Each job writes its ranks' traces (`rank<N>.<time>.pt.trace.json.gz`, from
`tensorboard_trace_handler(..., use_gzip=True)`) into `tests/data/foreign-cpu/<job>/`, replacing
the traces there. The jobs:

- ddp: DistributedDataParallel, 2 ranks.
- fsdp2: `fully_shard` on each layer and the root, 2 ranks.
- tp_sp: `parallelize_module` with SequenceParallel (the norm), ColwiseParallel and
  RowwiseParallel, 2 ranks.
- pipeline: `torch.distributed.pipelining`, 2 stages, GPipe over 4 microbatches.
- mesh2d: a 2-D DeviceMesh (dp=2 x tp=2, 4 ranks): TP on {0,1} and {2,3}, `fully_shard` on
  {0,2} and {1,3}.
- straggler: 2 ranks, gradients all-reduced by hand; rank 1 sleeps 50 ms in
  `record_function("straggle")` before each step's first all-reduce.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.profiler import tensorboard_trace_handler

HERE = Path(__file__).resolve().parent
DIM, HIDDEN, TOKENS = 128, 512, 64
STEPS = 5  # wait 1, warmup 1, active 3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


def _model(n_blocks: int = 2) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*(Block() for _ in range(n_blocks)))


def _profiler(out: Path, rank: int) -> profile:
    return profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        on_trace_ready=tensorboard_trace_handler(str(out), worker_name=f"rank{rank}", use_gzip=True),
        record_shapes=True,
    )


def _train(model: nn.Module, rank: int, out: Path, batch, before_step=None) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with _profiler(out, rank) as prof:
        for _ in range(STEPS):
            x = batch()
            loss = model(x).float().pow(2).mean()
            loss.backward()
            if before_step is not None:
                before_step()
            opt.step()
            opt.zero_grad()
            prof.step()


def _input(rank: int, tokens: int = TOKENS) -> torch.Tensor:
    torch.manual_seed(100 + rank)
    return torch.randn(4, tokens, DIM)


def job_ddp(rank: int, world: int, out: Path) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_model(), bucket_cap_mb=0.25)  # a few buckets: several all-reduces per step
    _train(model, rank, out, lambda: _input(rank))


def job_fsdp2(rank: int, world: int, out: Path) -> None:
    from torch.distributed.fsdp import fully_shard

    model = _model()
    for block in model:
        fully_shard(block)
    fully_shard(model)
    _train(model, rank, out, lambda: _input(rank))


def _tp_model(mesh) -> nn.Module:
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    model = _model()
    for block in model:
        parallelize_module(
            block,
            mesh,
            {
                "norm": SequenceParallel(),
                "up": ColwiseParallel(input_layouts=Shard(1)),
                "down": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            },
        )
    return model


def _sequence_shard(x: torch.Tensor, mesh):
    """The input as a sequence-sharded DTensor (every TP rank gets the same batch)."""
    from torch.distributed.tensor import DTensor, Shard

    rank, n = mesh.get_local_rank(), mesh.size()
    local = x.chunk(n, dim=1)[rank]
    return DTensor.from_local(local, mesh, [Shard(1)], run_check=False)


def job_tp_sp(rank: int, world: int, out: Path) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    model = _tp_model(mesh)
    _train(model, rank, out, lambda: _sequence_shard(_input(0), mesh))


def job_mesh2d(rank: int, world: int, out: Path) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    tp, dp = mesh["tp"], mesh["dp"]
    model = _tp_model(tp)
    for block in model:
        fully_shard(block, mesh=dp)
    fully_shard(model, mesh=dp)
    dp_rank = dp.get_local_rank()
    _train(model, rank, out, lambda: _sequence_shard(_input(dp_rank), tp))


def job_pipeline(rank: int, world: int, out: Path) -> None:
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    torch.manual_seed(0)
    stage_model = _model(n_blocks=2)
    stage = PipelineStage(stage_model, rank, world, torch.device("cpu"))
    schedule_ = ScheduleGPipe(
        stage, n_microbatches=4, loss_fn=lambda y, _t: y.float().pow(2).mean()
    )
    opt = torch.optim.SGD(stage_model.parameters(), lr=1e-3)
    with _profiler(out, rank) as prof:
        for _ in range(STEPS):
            x = _input(0, tokens=32)
            target = torch.zeros(4, 1)
            if rank == 0:
                schedule_.step(x)
            else:
                schedule_.step(target=target)
            opt.step()
            opt.zero_grad()
            prof.step()


def job_straggler(rank: int, world: int, out: Path) -> None:
    model = _model()

    def all_reduce_grads() -> None:
        if rank == 1:
            with record_function("straggle"):
                time.sleep(0.05)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world

    _train(model, rank, out, lambda: _input(rank), before_step=all_reduce_grads)


JOBS = {
    "ddp": (job_ddp, 2),
    "fsdp2": (job_fsdp2, 2),
    "tp_sp": (job_tp_sp, 2),
    "pipeline": (job_pipeline, 2),
    "mesh2d": (job_mesh2d, 4),
    "straggler": (job_straggler, 2),
}


def _worker(rank: int, world: int, name: str, out: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        JOBS[name][0](rank, world, Path(out))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make(name: str) -> Path:
    out = HERE / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    world = JOBS[name][1]
    mp.spawn(_worker, args=(world, name, str(out), _free_port()), nprocs=world, join=True)
    return out


if __name__ == "__main__":
    for job in sys.argv[1:] or list(JOBS):
        folder = make(job)
        sizes = sum(f.stat().st_size for f in folder.iterdir())
        print(f"{job}: {len(list(folder.iterdir()))} files, {sizes / 1024:.0f} KiB", flush=True)
