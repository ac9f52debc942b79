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
from tpscope.fusion.model.config import ModelConfig
from tpscope.fusion.run.config import DEFAULT_FUSION, RunConfig, config_to_json, default_chunks
from tpscope.fusion.run.options import add_field_options, flag_of_field, option_values
from tpscope.runfolder.fusion_choice import CHUNKED_MODES, CUDA_ONLY_MODES, Mode

NODE_OPTIONS = (
    "--nnodes",
    "--node-rank",
    "--rdzv-endpoint",
    "--rdzv-backend",
    "--rdzv-id",
    "--rdzv-timeout-s",
)
"""torchrun's multi-node options (launch.torchrun.Rendezvous's fields)."""


NON_FIELD_OPTIONS = ("--nproc", "--overwrite", *NODE_OPTIONS)
"""The options of `run` that set no field of RunConfig (every other one is a field's:
tpscope.fusion.run.options)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="workers on this node (default: GPUs seen, or 2 with --device cpu)",
    )
    add_field_options(parser, RunConfig)
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the run in an existing folder"
    )
    add_node_arguments(parser)


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


def config_from_args(args: argparse.Namespace, device: str, out_dir: str) -> RunConfig:
    """A RunConfig from parsed options; a bad combination is a UserError."""
    try:
        auto = args.mode == Mode.AUTO.value
        fusion = replace(
            DEFAULT_FUSION,
            **{
                **option_values(args, RunConfig, "fusion."),
                "mode": Mode.NONE.value if auto else args.mode,
                "chunks": default_chunks(args.mode) if args.chunks is None else args.chunks,
            },
        )
        values = {
            **option_values(args, RunConfig, ""),
            "out_dir": out_dir,
            "fusion": replace(fusion, chunks=1) if fusion.mode not in CHUNKED_MODES else fusion,
            "auto": auto,
            "device": device,
            "dtype": args.dtype or ("bfloat16" if device == "cuda" else "float32"),
            "model": ModelConfig(**option_values(args, RunConfig, "model.")),
        }
        if not args.profile_steps:  # no profiler: no schedule either
            values.update(profile_wait=0, profile_warmup=0)
        return RunConfig(**values)
    except ValueError as exc:
        raise UserError(option_message(str(exc))) from None


OPTION_OF_FIELD = flag_of_field(RunConfig)
"""RunConfig's field names -> the options that set them, so that a refusal names the option."""


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
