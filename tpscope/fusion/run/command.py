"""`tpscope run`: instrumented fused-TP training that writes a run folder.

On one node it starts torchrun itself (`--nproc` workers); inside a torchrun the user started
(RANK and WORLD_SIZE set, e.g. across nodes) this process is a rank and joins it. No torch is
imported until `main` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

from tpscope.errors import UserError
from tpscope.fusion.model.config import MODEL_DEFAULTS, ModelConfig
from tpscope.fusion.run.config import RUN_DEFAULTS, RunConfig, config_to_json, default_chunks
from tpscope.runfolder.fusion_choice import (
    ALL_MODES,
    CHUNKED_MODES,
    CUDA_ONLY_MODES,
    FusionChoice,
    Mode,
    Regime,
)

# every option's default is the config's (the one place they live)
R, M = (
    RUN_DEFAULTS,
    MODEL_DEFAULTS,
)
F = RUN_DEFAULTS["fusion"]  # a run's default FusionChoice


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Model and batch options shared by `run` and `sweep`."""
    m = parser.add_argument_group("model")
    m.add_argument(
        "--layers", type=int, default=M["layers"], help="transformer blocks (default %(default)s)"
    )
    m.add_argument(
        "--hidden", type=int, default=M["hidden"], help="model width H (default %(default)s)"
    )
    m.add_argument("--ffn", type=int, default=M["ffn"], help="MLP width F (default %(default)s)")
    m.add_argument(
        "--heads", type=int, default=M["heads"], help="attention heads (default %(default)s)"
    )
    m.add_argument(
        "--vocab", type=int, default=M["vocab"], help="synthetic vocabulary (default %(default)s)"
    )
    m.add_argument(
        "--seq-len",
        type=int,
        default=R["seq_len"],
        help="tokens per sequence (default %(default)s)",
    )
    m.add_argument(
        "--batch",
        type=int,
        default=R["batch"],
        help="sequences per step, global (default %(default)s)",
    )
    m.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default=None,
        help="default: bfloat16 on cuda, float32 on cpu",
    )
    m.add_argument(
        "--lr",
        type=float,
        default=R["lr"],
        help="AdamW peak learning rate (default %(default)s; linear warm-up, then cosine decay to "
        f"{R['decay_to']:g} of it)",
    )
    m.add_argument(
        "--warmup-steps",
        type=int,
        default=R["warmup_steps"],
        help="learning-rate warm-up steps (default: a tenth of --steps, at least 1)",
    )
    m.add_argument(
        "--grad-clip",
        type=float,
        default=R["grad_clip"],
        help="clip the global gradient norm to this (default %(default)s; 0: off, which lets the "
        "embedding gradient travel beside the optimizer on CUDA)",
    )
    m.add_argument(
        "--seed", type=int, default=R["seed"], help="weights and tokens seed (default %(default)s)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="workers on this node (default: GPUs seen, or 2 with --device cpu)",
    )
    parser.add_argument(
        "--mode", choices=ALL_MODES, default=F.mode, help="fusion mode (default %(default)s)"
    )
    parser.add_argument(
        "--chunks",
        type=int,
        default=None,
        help=f"row chunks: chunked (default {default_chunks('chunked')}), ring transfers per step "
        f"(default {default_chunks('ring')}), copy_engine copies per peer "
        f"(default {default_chunks('copy_engine')})",
    )
    parser.add_argument(
        "--regime",
        choices=[r.value for r in Regime],
        default=R["regime"],
        help="NCCL environment standing for an interconnect: nvlink (none), shm (NCCL_P2P_DISABLE=1), "
        "socket (also NCCL_SHM_DISABLE=1); docs/runtime.md (default: keep the inherited one)",
    )
    parser.add_argument(
        "--steps", type=int, default=R["steps"], help="training steps (default %(default)s)"
    )
    parser.add_argument(
        "--profile-steps",
        type=int,
        default=R["profile_active"],
        help=f"steps written to the traces (default %(default)s) after {R['profile_wait']} wait and "
        f"{R['profile_warmup']} warm-up step (0: no profiler)",
    )
    parser.add_argument("--out", default=None, help="run folder (default runs/<time>-<mode>)")
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="default: cuda if torch sees a GPU, else cpu",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the run in an existing folder"
    )
    add_rank_arguments(parser)
    add_resource_arguments(parser)
    add_node_arguments(parser)
    add_model_arguments(parser)


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    """The ranks' collective timeout and `--mode auto`'s probe file (shared by `run` and `sweep`)."""
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=R["timeout_s"],
        help="collective timeout: a dead rank fails the others after this long (default %(default)s s)",
    )
    parser.add_argument(
        "--auto-cache",
        default=R["auto_cache"],
        metavar="FILE",
        help="file of --mode auto probes (default $XDG_CACHE_HOME/tpscope/auto_probe.json, "
        "else ~/.cache/tpscope/auto_probe.json)",
    )


def add_node_arguments(parser: argparse.ArgumentParser) -> None:
    """torchrun's multi-node options, passed through (shared by `run` and `sweep`)."""
    n = parser.add_argument_group(
        "several nodes, as torchrun takes them (docs/runtime.md); run one launcher per node"
    )
    n.add_argument(
        "--nnodes",
        default="1",
        help="nodes: N, or MIN:MAX for an elastic range (default 1: this node alone)",
    )
    n.add_argument(
        "--node-rank", type=int, default=0, help="this node's rank, 0 to N-1 (default 0)"
    )
    n.add_argument(
        "--rdzv-endpoint",
        default="",
        metavar="HOST:PORT",
        help="where the launchers meet: a host every node reaches and a free port",
    )
    n.add_argument(
        "--rdzv-backend",
        default="",
        help="torchrun's rendezvous backend: c10d or static (default: torchrun's)",
    )
    n.add_argument(
        "--rdzv-id",
        default="",
        help="a name shared by the launchers of one job (default: torchrun's)",
    )
    n.add_argument(
        "--rdzv-timeout-s",
        type=float,
        default=300.0,
        metavar="S",
        help="give up, naming the endpoint, when the nodes have not met after S seconds "
        "(default %(default)g)",
    )


def rendezvous_from_args(args: argparse.Namespace):
    """The launch.Rendezvous of the multi-node options; a bad one is a UserError."""
    from tpscope.fusion.launch.torchrun import Rendezvous

    return Rendezvous(
        nnodes=str(args.nnodes),
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_backend=args.rdzv_backend,
        rdzv_id=args.rdzv_id,
        rdzv_timeout_s=args.rdzv_timeout_s,
    )


def add_resource_arguments(parser: argparse.ArgumentParser) -> None:
    """How fused ops share the GPU with their collectives (shared by `run` and `sweep`)."""
    r = parser.add_argument_group("fusion resources (docs/runtime.md)")
    r.add_argument(
        "--sm-margin",
        type=int,
        default=F.sm_margin,
        help="SMs the GEMMs beside a transfer leave to the collective (default %(default)s; 0: none)",
    )
    r.add_argument(
        "--comm-ctas",
        type=int,
        default=F.comm_ctas,
        help="most CTAs for the fused ops' NCCL kernels, own communicator (default %(default)s; "
        "0: NCCL's choice)",
    )
    r.add_argument(
        "--no-bwd-overlap",
        dest="bwd_overlap",
        action="store_false",
        default=F.bwd_overlap,
        help="backward: do not overlap the collective with the weight-gradient GEMM",
    )
    r.add_argument(
        "--no-embed-overlap",
        dest="embed_overlap",
        action="store_false",
        default=R["embed_overlap"],
        help="do not run the embedding gradient's all-gather beside the optimizer update",
    )
    r.add_argument(
        "--ring-all-gather",
        action="store_true",
        default=F.ring_all_gather,
        help="ring GEMM-RS at two ranks: swap each piece by one all-gather instead of send/recv",
    )


def config_from_args(args: argparse.Namespace, device: str, out_dir: str) -> RunConfig:
    """A RunConfig from parsed options; a bad combination is a UserError."""
    try:
        model = ModelConfig(
            layers=args.layers, hidden=args.hidden, ffn=args.ffn, heads=args.heads, vocab=args.vocab
        )
        auto = args.mode == Mode.AUTO.value
        fusion = FusionChoice(
            mode=Mode.NONE.value if auto else args.mode,
            chunks=default_chunks(args.mode) if args.chunks is None else args.chunks,
            sm_margin=args.sm_margin,
            comm_ctas=args.comm_ctas,
            bwd_overlap=args.bwd_overlap,
            ring_all_gather=args.ring_all_gather,
        )
        return RunConfig(
            out_dir=out_dir,
            fusion=replace(fusion, chunks=1) if fusion.mode not in CHUNKED_MODES else fusion,
            auto=auto,
            regime=args.regime,
            device=device,
            dtype=args.dtype or ("bfloat16" if device == "cuda" else "float32"),
            model=model,
            seq_len=args.seq_len,
            batch=args.batch,
            steps=args.steps,
            profile_wait=R["profile_wait"] if args.profile_steps else 0,
            profile_warmup=R["profile_warmup"] if args.profile_steps else 0,
            profile_active=args.profile_steps,
            lr=args.lr,
            seed=args.seed,
            warmup_steps=args.warmup_steps,
            grad_clip=args.grad_clip,
            timeout_s=args.timeout_s,
            auto_cache=getattr(args, "auto_cache", R["auto_cache"]),
            embed_overlap=args.embed_overlap,
        )
    except ValueError as exc:
        raise UserError(option_message(str(exc))) from None


# RunConfig's field names -> the options that set them, so that a refusal names the option
OPTION_OF_FIELD = {
    "chunks": "--chunks",
    "timeout_s": "--timeout-s",
    "lr": "--lr",
    "seq_len": "--seq-len",
    "batch": "--batch",
    "steps": "--steps",
    "profile_active": "--profile-steps",
}


def option_message(message: str) -> str:
    """RunConfig's message with its leading field name spelled as the option (`--chunks must ...`)."""
    field_name = message.split(" ", 1)[0]
    return (
        OPTION_OF_FIELD[field_name] + message[len(field_name) :]
        if field_name in OPTION_OF_FIELD
        else message
    )


def _device(args: argparse.Namespace) -> str:
    if args.device:
        return args.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _nproc(args: argparse.Namespace, device: str) -> int:
    if args.nproc is not None:
        if args.nproc < 1:
            raise UserError(f"--nproc must be >= 1, not {args.nproc}")
        return args.nproc
    if device == "cpu":
        return 2
    import torch

    return max(1, torch.cuda.device_count())


def _refuse_cuda_only_on_cpu(cfg: RunConfig) -> None:
    if cfg.mode in CUDA_ONLY_MODES and cfg.device == "cpu":
        raise UserError(
            f"--mode {cfg.mode} needs --device cuda (torch's symmetric memory has no CPU path)"
        )


def _refuse_host_local_across_nodes(mode: str, nodes: int) -> None:
    from tpscope.fusion.ops.validate import FusionShapeError, check_nodes

    try:
        check_nodes(mode, nodes)
    except FusionShapeError as exc:
        raise UserError(str(exc)) from None


def claim_run_dir(out_dir: str, overwrite: bool, rdzv):
    """The run folder of this node: node 0 holds it (launch.out_dir.claim_out_dir: checked, cleared with
    --overwrite, refused while another run holds it); the other nodes' ranks write into it beside
    node 0's (one folder with every rank when the nodes share it) and hold nothing (None)."""
    from tpscope.fusion.launch.out_dir import claim_out_dir, join_out_dir

    if rdzv.node_rank == 0:
        return claim_out_dir(out_dir, overwrite)
    join_out_dir(out_dir, overwrite)
    return None


def preflight(cfg: RunConfig, nproc: int, nodes: int = 1) -> None:
    """Refuse, before any process starts, what would fail in every rank (`nodes` launchers of
    `nproc` workers each)."""
    _refuse_cuda_only_on_cpu(cfg)
    _refuse_host_local_across_nodes(cfg.mode, nodes)
    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda but torch sees no GPU (use --device cpu)")
        if nproc > torch.cuda.device_count():
            raise UserError(
                f"--nproc {nproc} but only {torch.cuda.device_count()} GPUs are visible"
            )
    try:
        cfg.check_world(nproc * nodes)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    from tpscope.fusion.run.fits import check_fits

    check_fits(cfg, nproc)


def main(args: argparse.Namespace) -> int:
    from tpscope.fusion.launch.out_dir import prepare_out_dir, unique_out_dir
    from tpscope.fusion.launch.torchrun import exit_now, inside_torchrun, launch

    device = _device(args)
    default_stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{args.mode}"
    out_dir = args.out or os.path.join("runs", default_stem)
    command = (
        ["tpscope", *sys.argv[1:]]
        if sys.argv and sys.argv[0].endswith(("tpscope", "cli.py"))
        else sys.argv
    )
    if inside_torchrun(os.environ):
        cfg = config_from_args(args, device, out_dir)
        _refuse_cuda_only_on_cpu(cfg)
        _refuse_host_local_across_nodes(
            cfg.mode,
            int(os.environ.get("WORLD_SIZE", "1"))
            // int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("WORLD_SIZE", "1")),
        )
        local_zero = os.environ.get("LOCAL_RANK", "0") == "0"
        prepare_out_dir(out_dir, args.overwrite, clear=local_zero)
        from tpscope.fusion.run.worker import run_rank

        # a rank of the user's torchrun ends here (launch.exit_now)
        exit_now(run_rank(cfg, command))
    nproc = _nproc(args, device)
    rdzv = rendezvous_from_args(args)
    cfg = config_from_args(args, device, out_dir)
    preflight(cfg, nproc, rdzv.max_nodes)
    if not args.out:  # the default name, made unique when another run took it in the same second
        cfg = replace(cfg, out_dir=unique_out_dir("runs", default_stem))
    claim = claim_run_dir(cfg.out_dir, args.overwrite, rdzv)  # held until the workers are done
    try:
        worker_args = ["--config-json", config_to_json(cfg), "--command-json", json.dumps(command)]
        return launch(
            nproc,
            "tpscope.fusion.run.worker",
            worker_args,
            cfg.regime,
            out_dir=cfg.out_dir,
            command=command,
            rdzv=rdzv,
        )
    finally:  # 0, 1, 2 or 128+N; on failure launch() printed why and marked the folder incomplete
        if claim is not None:
            claim.release()
