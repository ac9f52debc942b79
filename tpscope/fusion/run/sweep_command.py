"""`tpscope sweep`: the tuning method as a command. A baseline without fusion first, then one
change at a time (mode, chunk count, regime, an NCCL setting), each a run folder of the same
model and global batch, then one comparison (tokens/s, exposed communication, contention, peak
memory).

Exposed communication and contention come from `tpscope analyze RUN --json`, run as a separate
process (the runtime never imports the analyzer); where it is not installed those columns are
null and the report says why. No torch is imported here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

from tpscope.errors import UserError
from tpscope.fusion.run.command import add_node_arguments, config_from_args, preflight
from tpscope.fusion.run.config import RunConfig, config_to_json, default_chunks
from tpscope.fusion.run.options import add_field_options
from tpscope.runfolder.fusion_choice import ALL_MODES, CHUNKED_MODES, FusionChoice, Mode, Regime
from tpscope.runfolder.regimes import RECORDED_PREFIXES, REGIME_KEYS, SAFETY_ENV


@dataclass(frozen=True, kw_only=True, slots=True)
class Variant:
    """One change against the baseline: a mode (with chunks, option changes and NCCL settings)
    or a regime. `changes` are the RunConfig fields it sets (FusionChoice's sm_margin,
    comm_ctas, bwd_overlap, ring_all_gather; the run's embed_overlap), in the order given; every
    other keeps the sweep's own (`--sm-margin`, ...). `env` is set in the variant's workers only,
    over the runtime's defaults."""

    name: str
    mode: str
    """One of ALL_MODES (`auto` included)."""
    chunks: int
    regime: str
    changes: tuple[tuple[str, int | bool], ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def config(self, base: RunConfig, out_dir: str) -> RunConfig:
        """The run of this variant: `base` (the sweep's options) with this variant's changes."""
        auto = self.mode == Mode.AUTO.value
        changes = dict(self.changes)
        fusion_changes = {k: v for k, v in changes.items() if k in FUSION_FIELDS}
        mode = Mode.NONE.value if auto else self.mode
        fusion = replace(
            base.fusion,
            mode=mode,
            chunks=self.chunks if mode in CHUNKED_MODES else 1,
            **fusion_changes,
        )
        return replace(
            base,
            out_dir=out_dir,
            fusion=fusion,
            auto=auto,
            regime=self.regime,
            **{k: v for k, v in changes.items() if k not in FUSION_FIELDS},
        )


FUSION_FIELDS = frozenset(f.name for f in fields(FusionChoice))


_OPTIONS = {
    "margin": "sm_margin",
    "ctas": "comm_ctas",
    "bwd": "bwd_overlap",
    "embed": "embed_overlap",
    "agx": "ring_all_gather",
}
_SWITCHES = ("bwd", "embed", "agx")


def _option(token: str, item: str) -> tuple[str, int | bool]:
    key, sep, value = item.partition("=")
    if not sep or key not in _OPTIONS:
        raise UserError(
            f"--variants: {item!r} in {token!r} is not margin=N, ctas=N, bwd=on|off, embed=on|off, "
            "agx=on|off or NCCL_*=VALUE"
        )
    if key in _SWITCHES:
        if value not in ("on", "off"):
            raise UserError(f"--variants: {key} in {token!r} must be on or off")
        return _OPTIONS[key], value == "on"
    try:
        n = int(value)
    except ValueError:
        raise UserError(f"--variants: {key} in {token!r} is not an int") from None
    if n < 0:
        raise UserError(f"--variants: {key} in {token!r} must be >= 0")
    return _OPTIONS[key], n


def _setting(token: str, key: str, value: str) -> tuple[str, str]:
    """An NCCL variable for one variant's workers (the variables a manifest records)."""
    if key in REGIME_KEYS or key in SAFETY_ENV:
        raise UserError(
            f"--variants: {key} in {token!r} is set by the regime or always: use regime=NAME"
        )
    if not value:
        raise UserError(f"--variants: {key} in {token!r} has no value")
    return key, value


def _is_setting(item: str) -> bool:
    key, sep, _ = item.partition("=")
    return bool(sep) and key.startswith(RECORDED_PREFIXES)


def parse_variants(text: str, base_regime: str) -> list[Variant]:
    """`chunked:4,ring,ring:2,symm_mem,auto,regime=shm,chunked:8:margin=8:ctas=4:bwd=off,
    ring:4:NCCL_P2P_PCI_CHUNKSIZE=131072` -> variants (baseline not included)."""
    out = []
    for token in (t.strip() for t in text.split(",") if t.strip()):
        if token.startswith("regime="):
            regime = token.split("=", 1)[1]
            if regime not in {r.value for r in Regime}:
                raise UserError(f"--variants: unknown regime {regime!r}")
            out.append(Variant(name=f"none-{regime}", mode="none", chunks=1, regime=regime))
            continue
        mode, *rest = token.split(":")
        if mode not in ALL_MODES:
            raise UserError(
                f"--variants: {token!r} is not MODE[:CHUNKS][:OPTION=VALUE...] or regime=NAME"
            )
        k = rest.pop(0) if rest and "=" not in rest[0] else ""
        try:
            chunks = int(k) if k else default_chunks(mode)
        except ValueError:
            raise UserError(f"--variants: chunk count in {token!r} is not an int") from None
        options = dict(_option(token, item) for item in rest if not _is_setting(item))
        env = tuple(_setting(token, *item.split("=", 1)) for item in rest if _is_setting(item))
        name = mode + (f"-k{chunks}" if mode in CHUNKED_MODES else "")
        name += "".join(f"-{_SHORT[field]}{_suffix(v)}" for field, v in options.items())
        name += "".join(f"-{key}{value}" for key, value in env)
        out.append(
            Variant(
                name=name,
                mode=mode,
                chunks=chunks,
                regime=base_regime,
                changes=tuple(options.items()),
                env=env,
            )
        )
    return out


_SHORT = {field: key for key, field in _OPTIONS.items()}


def _suffix(value: int | bool) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


NOT_SWEPT_OPTIONS = frozenset({"out_dir", "fusion.mode", "fusion.chunks"})
"""RunConfig's fields that are options of `run` and not of `sweep`: its runs' folders are its
own, their modes and chunks its variants'."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variants",
        default="chunked:2,chunked:4,ring,auto",
        help="changes to try after the unfused baseline: MODE[:CHUNKS][:OPTION=VALUE...] "
        "(margin, ctas, bwd, embed, agx, or an NCCL_* variable) or regime=NAME, "
        "comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--nproc", type=int, default=None, help="workers (default: GPUs seen, 2 on cpu)"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        required=True,
        help="folder of the sweep (one run folder per variant)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the runs in an existing sweep folder (other files stay)",
    )
    parser.add_argument(
        "--no-analyze", action="store_true", help="skip `tpscope analyze` on each run"
    )
    add_field_options(parser, RunConfig, skip=NOT_SWEPT_OPTIONS)
    add_node_arguments(parser)
    parser.set_defaults(mode="none", chunks=1)


def _analyze(run_dir: Path) -> tuple[dict | None, str | None]:
    cmd = [sys.executable, "-m", "tpscope.cli", "analyze", str(run_dir), "--json"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"tpscope analyze did not finish: {exc}"
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["tpscope analyze failed"])[-1][:300]
    try:
        return json.loads(done.stdout).get("summary"), None
    except ValueError:
        return None, "tpscope analyze printed no JSON"


def compare(rows: list[dict]) -> str:
    """The comparison as a Markdown table (baseline first)."""
    base = rows[0]["tokens_per_s"]
    lines = [
        "| run | regime | mode | tokens/s | vs baseline | exposed comm ratio | contention slowdown | peak memory GiB |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def f(v, fmt):
        return "–" if v is None else format(v, fmt)

    for r in rows:
        s = r.get("analyze") or {}
        ratio = r["tokens_per_s"] / base if r["tokens_per_s"] and base else None
        mem = r["peak_memory_bytes"] / 2**30 if r["peak_memory_bytes"] else None
        lines.append(
            f"| {r['run']} | {r['regime']} | {r['mode']} | {f(r['tokens_per_s'], ',.0f')} | "
            f"{f(ratio, '.3f')}× | {f(s.get('exposed_comm_ratio'), '.3f')} | "
            f"{f(s.get('contention_slowdown'), '.3f')} | {f(mem, '.2f')} |"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from tpscope.fusion.launch.out_dir import prepare_out_dir
    from tpscope.fusion.launch.torchrun import launch
    from tpscope.fusion.run.command import _device, _nproc, claim_run_dir, rendezvous_from_args
    from tpscope.progress import working
    from tpscope.runfolder.manifest import read_manifest

    device = _device(args)
    nproc = _nproc(args, device)
    rdzv = rendezvous_from_args(args)
    base_cfg: RunConfig = config_from_args(args, device, "")
    variants = [Variant(name="none", mode="none", chunks=1, regime=args.regime)]
    variants += parse_variants(args.variants, args.regime)
    root = prepare_out_dir(args.out, args.overwrite, clear=False)
    runs, failed = [], []
    for i, v in enumerate(variants):
        run_dir = root / f"{i:02d}-{v.name}"
        cfg = v.config(base_cfg, str(run_dir))
        preflight(cfg, nproc, rdzv.max_nodes)
        claim = claim_run_dir(str(run_dir), args.overwrite, rdzv)
        print(f"tpscope sweep: [{i + 1}/{len(variants)}] {v.name} -> {run_dir}", flush=True)
        command = ["tpscope", "sweep", *sys.argv[2:]] if len(sys.argv) > 1 else []
        rc = launch(
            nproc,
            "tpscope.fusion.run.worker",
            ["--config-json", config_to_json(cfg), "--command-json", json.dumps(command)],
            cfg.regime,
            extra_env=dict(v.env),
            out_dir=str(run_dir),
            command=command,
            rdzv=rdzv,
        )
        if claim is not None:
            claim.release()
        if rc > 128:  # stopped by a signal (launch printed which): the sweep stops too
            return rc
        if rc != 0:
            if i == 0:
                raise UserError(
                    f"{run_dir}: the baseline run failed (exit {rc}); see its output above"
                )
            print(
                f"tpscope sweep: variant {v.name} failed (exit {rc}); the sweep goes on without it",
                file=sys.stderr,
                flush=True,
            )
            failed.append(v.name)
            continue
        runs.append((v, run_dir))
    if rdzv.node_rank != 0:
        print(
            f"tpscope sweep: node {rdzv.node_rank} done; node 0 analyzes and compares the runs",
            flush=True,
        )
        return 1 if failed else 0
    rows = []
    for v, run_dir in runs:
        manifest = read_manifest(run_dir)
        with working(f"tpscope sweep: analyzing {run_dir}"):
            summary, why = (
                (None, "skipped (--no-analyze)") if args.no_analyze else _analyze(run_dir)
            )
        rows.append(
            {
                "run": run_dir.name,
                "mode": v.mode,
                "chunks": v.chunks,
                "regime": manifest.regime,
                "sm_margin": manifest.sm_margin,
                "comm_ctas": manifest.comm_ctas,
                "bwd_overlap": manifest.bwd_overlap,
                "embed_overlap": manifest.embed_overlap,
                "ring_all_gather": manifest.ring_all_gather,
                "env": dict(v.env),
                "tokens_per_s": manifest.tokens_per_s,
                "median_step_time_ms": manifest.median_step_time_ms,
                "peak_memory_bytes": manifest.peak_memory_bytes,
                "fusion_by_layer": manifest.fusion_by_layer,
                "analyze": summary,
                "analyze_note": why,
            }
        )
    table = compare(rows)
    (root / "sweep.json").write_text(
        json.dumps({"baseline": rows[0]["run"], "runs": rows, "failed": failed}, indent=1) + "\n"
    )
    (root / "sweep.md").write_text(f"# tpscope sweep\n\n{table}\n")
    print(table)
    notes = {r["analyze_note"] for r in rows if r["analyze_note"]}
    for note in sorted(notes):
        print(f"tpscope sweep: analyze: {note}", file=sys.stderr)
    if failed:
        print(f"tpscope sweep: failed variants: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
