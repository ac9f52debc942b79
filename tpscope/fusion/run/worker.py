"""One rank of `tpscope run`: join the process group, train, write traces and the manifest.

Started by torchrun (`python -m tpscope.fusion.run.worker --config-json ...`) or called in-process
by `tpscope run` inside a torchrun the user started.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys

import torch
import torch.distributed as dist

from tpscope.errors import UserError
from tpscope.fusion.launch.lifetime import die_with_parent
from tpscope.fusion.launch.process import join_group
from tpscope.fusion.launch.torchrun import exit_now
from tpscope.fusion.run.config import RunConfig, config_from_json
from tpscope.fusion.run.manifest import build_manifest
from tpscope.fusion.run.train import StepRecord, train
from tpscope.runfolder.fusion_choice import FusionChoice, Mode
from tpscope.runfolder.manifest import write_manifest
from tpscope.runfolder.regimes import regime_env

_PEER_TROUBLE = re.compile(
    r"connection (reset|closed|refused)|broken pipe|timed out|timeout|gloo|nccl|"
    r"processgroup|watchdog",
    re.IGNORECASE,
)


def collective_failure(exc: BaseException) -> str | None:
    """One line for an error that a collective raised because a peer died or hung (a gloo
    connection reset, a timeout, an NCCL error); None for any other error (a bug keeps its traceback)."""
    if not (
        isinstance(exc, dist.DistError)
        or (isinstance(exc, RuntimeError) and _PEER_TROUBLE.search(str(exc)))
    ):
        return None
    text = str(exc).strip()
    first = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0]) if text else type(exc).__name__
    first = first.split(". This is typically")[0][:200]
    return f"a collective failed ({first}): a peer rank died, or hung past --timeout-s"


def out_of_memory(exc: BaseException) -> bool:
    """An allocation that failed: torch's OutOfMemoryError (CUDA), its CPU allocator's
    RuntimeError, or Python's MemoryError."""
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)
    )


def _print_step(steps: int, rec: StepRecord) -> None:
    print(
        f"step {rec.step + 1}/{steps}  loss {rec.loss:.4f}  {rec.step_time_ms:.1f} ms  "
        f"{rec.tokens_per_s:,.0f} tok/s",
        flush=True,
    )


def _plan(cfg: RunConfig, tp: int, device: torch.device, regime: str, rank: int = 0):
    """(plan, fusion per layer record, auto record): a fixed mode, or `auto`'s probe (rank 0
    says what it probes and chooses)."""
    chosen: dict[str, dict] = {}
    if cfg.mode == Mode.AUTO.value:
        from tpscope.fusion.run.auto import auto_plan

        def say(line: str) -> None:
            if rank == 0:
                print(f"tpscope run: {line}", flush=True)

        plan_fn, auto_info = auto_plan(cfg, tp, device, regime, say)
    else:
        fixed = cfg.choice(cfg.fusion.mode, cfg.fusion.chunks)
        plan_fn, auto_info = (lambda _label: fixed), None

    def plan(label: str) -> FusionChoice:
        choice = plan_fn(label)
        chosen[label] = choice.as_record()
        return choice

    return plan, chosen, auto_info


def run_rank(cfg: RunConfig, command: list[str]) -> int:
    """Everything one rank does; rank 0 prints progress and writes the manifest."""
    joined = join_group(cfg.regime, cfg.device, cfg.timeout_s)
    rank, world, device, backend, regime = (
        joined.rank,
        joined.world,
        joined.device,
        joined.backend,
        joined.regime,
    )
    try:
        try:
            cfg.check_world(world)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if rank == 0:
            print(
                f"tpscope run: tp={world} mode={cfg.mode} regime={regime} device={device.type} "
                f"-> {cfg.out_dir}",
                flush=True,
            )
        plan, chosen, auto_info = _plan(cfg, world, device, regime, rank)
        result = train(
            cfg,
            rank=rank,
            tp=world,
            device=device,
            plan=plan,
            on_step=lambda rec: _print_step(cfg.steps, rec),
        )
        gathered: list = [None] * world
        dist.all_gather_object(gathered, (result.step_times_ms, result.peak_memory_bytes))
        if rank == 0:
            manifest = build_manifest(
                cfg=cfg,
                regime=regime,
                regime_env=regime_env(regime),
                tp=world,
                world_size=world,
                backend=backend,
                device=device,
                losses=result.losses,
                step_times_ms_by_rank=[g[0] for g in gathered],
                peak_memory_by_rank=[g[1] for g in gathered],
                peak_memory_kind=result.peak_memory_kind,
                profiled=result.profiled_steps,
                fusion_by_layer=chosen,
                auto=auto_info,
                command=command,
                embed_overlap=result.embed_overlap,
            )
            path = write_manifest(cfg.out_dir, manifest)
            tps, trend = manifest.tokens_per_s, manifest.loss_trend
            if trend:
                print(
                    f"tpscope run: loss {trend['first_mean']:.4f} -> {trend['last_mean']:.4f} (mean of the "
                    f"first and last {trend['window_steps']} steps): "
                    f"{'fell' if trend['fell'] else 'did NOT fall'}",
                    flush=True,
                )
            print(
                f"tpscope run: wrote {path.parent} ({tps:,.0f} tok/s median)"
                if tps
                else f"tpscope run: wrote {path.parent}",
                flush=True,
            )
        dist.barrier()
    except Exception as exc:
        if not out_of_memory(exc):
            reason = collective_failure(exc)
            if reason is None:
                raise
            _error_line(f"tpscope run: error: rank {rank}: {reason}")
            return 1
        # the model or batch is too large for this machine: the user's input
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        _error_line(
            f"tpscope run: error: rank {rank}: out of memory ({first}); use a smaller model or --batch"
        )
        return 2
    finally:
        dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config-json", required=True)
    parser.add_argument("--command-json", default="[]")
    args = parser.parse_args(argv)
    die_with_parent(signal.SIGKILL)  # torchrun's agent gone (even by SIGKILL): no rank trains on
    try:
        return run_rank(config_from_json(args.config_json), json.loads(args.command_json))
    except UserError as exc:
        _error_line(f"tpscope run: error: {exc}")
        return 2


def _error_line(text: str) -> None:
    """`text` and its newline in one write: every rank writes to the same stream at once, and
    print's two writes (the text, then the newline) from two ranks can interleave."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    exit_now(main())
