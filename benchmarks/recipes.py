"""The benchmarks as named recipes: what each measures, on what hardware, and the commands it runs.

A recipe is data. `python benchmarks/run.py NAME` runs one (docs/benchmarks.md, "Reproducing");
`python benchmarks/run.py --list` lists them. Every command goes through the public CLI
(`python -m tpscope.cli run|bench|sweep|calibrate`) or a script of this folder, so that a recipe
runs on a GPU machine that has torch and NCCL but not the analyzer's libraries.

In a step's arguments `{out}` is the result folder. A step's JSON (`tpscope bench --out DIR`'s `bench.json`, a
sweep's or a run's folder) is what the runner turns into the tables of the result's README.
No torch and nothing of tpscope is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

HARDWARE = {
    "h200x2": "2 x NVIDIA H200 of one host (NVLink), torch 2.11 + NCCL",
    "h200x1": "1 x NVIDIA H200, torch 2.11",
    "cpu": "CPU only (gloo for the runtime; the analyzer's libraries for the analyzer recipes)",
}
"""The machines a recipe names, in words."""

REGIMES = ("nvlink", "shm", "socket", "gloo", "-")
"""`tpscope --regime` values, plus gloo (a CPU run) and '-' (no communication)."""

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""Set for every step: NVLink multicast is not available on the GPU machines used."""


@dataclass(frozen=True)
class Step:
    """One command of a recipe."""

    argv: tuple[str, ...]
    """Arguments after the program; `{out}` is replaced by the result folder."""
    program: str = "tpscope"
    """`tpscope` (run as `python -m tpscope.cli`) or a script of benchmarks/ (`nested_ranges_loop.py`)."""
    limit_s: int = 300
    """Wall-clock limit of this step: one hang cannot eat the whole call."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment of this step (beside MULTICAST_OFF)."""
    torchrun: tuple[str, ...] = ()
    """For a script: arguments of `python -m torch.distributed.run` that launches it on several
    processes (empty: the script runs as one process)."""


@dataclass(frozen=True)
class Recipe:
    """A named benchmark: hardware, regime, shape, what is compared, and its steps."""

    name: str
    hardware: str
    """A key of HARDWARE."""
    regime: str
    """The regimes it runs in, comma-separated (values of REGIMES)."""
    shape: str
    """The problem shape or model, in words."""
    compares: str
    """What is compared, in words (the README's first line)."""
    steps: tuple[Step, ...]


def tp(*argv: str, limit_s: int = 300, env: dict[str, str] | None = None) -> Step:
    """A `python -m tpscope.cli` step."""
    return Step(tuple(argv), "tpscope", limit_s, tuple(sorted((env or {}).items())))


def script(
    name: str,
    *argv: str,
    limit_s: int = 300,
    env: dict[str, str] | None = None,
    torchrun: tuple[str, ...] = (),
) -> Step:
    """A step that runs a script of benchmarks/ (under torchrun with `torchrun`'s arguments)."""
    return Step(tuple(argv), name, limit_s, tuple(sorted((env or {}).items())), tuple(torchrun))


# The reference model: its MLP is the reference bench shape (S 8192 = seq 8192 x batch 1, H 8192,
# F 28672), 2 blocks, vocabulary 32000, bf16; the same model and global batch in every sweep.
REF_MODEL = (
    "--layers",
    "2",
    "--hidden",
    "8192",
    "--ffn",
    "28672",
    "--heads",
    "64",
    "--vocab",
    "32000",
    "--seq-len",
    "8192",
    "--batch",
    "1",
)
DEEP_MODEL = ("--layers", "8", *REF_MODEL[2:])
SHAPES4 = ("--shape", "ref", "--shape", "s4096", "--shape", "s16384", "--shape", "8b")
BENCH = ("--reps", "20", "--warmup", "5")


def sweep(
    regime: str,
    variants: str,
    *,
    model: tuple[str, ...] = REF_MODEL,
    steps: int = 16,
    profile: int = 3,
    name: str | None = None,
    limit_s: int = 300,
) -> Step:
    """`tpscope sweep` on 2 GPUs: the unfused baseline, then each variant; without the analyzer
    (the GPU machine has none; run `python benchmarks/run.py --analyze DIR` where it is)."""
    return tp(
        "sweep",
        "--nproc",
        "2",
        "--regime",
        regime,
        *model,
        "--steps",
        str(steps),
        "--profile-steps",
        str(profile),
        "--no-analyze",
        "--auto-cache",
        "{out}/auto_probe.json",
        "--out",
        f"{{out}}/sweep-{name or regime}",
        "--variants",
        variants,
        limit_s=limit_s,
    )


# The tiny CPU model of the runner's own test: seconds on two cores.
CPU_MODEL = (
    "--layers",
    "1",
    "--hidden",
    "64",
    "--ffn",
    "128",
    "--heads",
    "2",
    "--vocab",
    "128",
    "--seq-len",
    "32",
    "--batch",
    "2",
)

TRAINING_VARIANTS = (
    ("none", "1"),
    ("chunked", "4"),
    ("ring", "4"),
    ("copy_engine", "1"),
    ("symm_mem", "1"),
)

# The table is kept as written (one command per line or two): the formatter leaves it alone.
# fmt: off
RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "cpu-smoke", "cpu", "gloo", "256 x 128 x 512 bench shape; a 1-block model of width 64",
        "unfused against chunked k=2 and the ring, bench and sweep, on CPU: checks that the modes run "
        "and the runner works; its times say nothing about a GPU",
        (tp("bench", "--device", "cpu", "--shape", "small", "--modes", "chunked,ring", "--chunks", "2",
            "--reps", "3", "--warmup", "1", "--out", "{out}/bench-cpu", limit_s=120),
         tp("sweep", "--device", "cpu", "--nproc", "2", *CPU_MODEL, "--steps", "3", "--profile-steps", "1",
            "--out", "{out}/sweep-cpu", "--variants", "chunked:2", limit_s=180)),
    ),
    Recipe(
        "gpu-smoke", "h200x2", "nvlink,shm", "2048 x 1024 x 4096; a 2-block model of width 2048",
        "every mode once at a small shape, and one short training run: a first call on a new machine",
        (tp("bench", "--shape", "2048,1024,4096", "--reps", "5", "--warmup", "2", "--chunks", "2,4",
            "--out", "{out}/bench-nvlink", limit_s=120),
         tp("bench", "--regime", "shm", "--shape", "2048,1024,4096", "--reps", "3", "--warmup", "1",
            "--chunks", "4", "--modes", "chunked,ring", "--out", "{out}/bench-shm", limit_s=120),
         tp("run", "--nproc", "2", "--mode", "chunked", "--chunks", "4", "--steps", "6", "--layers", "2",
            "--hidden", "2048", "--ffn", "8192", "--heads", "16", "--vocab", "8192", "--seq-len", "2048",
            "--batch", "2", "--out", "{out}/run-chunked", limit_s=120)),
    ),
    Recipe(
        "fusion-bench-nvlink", "h200x2", "nvlink", "ref, s4096, s16384 and 8b (S,H,F of docs/benchmarks.md)",
        "unfused against every fused mode (chunked, ring, copy_engine pulling and pushing, torch's "
        "symm_mem) per shape and side, GPU fed 5 ms ahead, round robin",
        (tp("bench", "--regime", "nvlink", *SHAPES4, "--modes", "copy_engine,symm_mem,chunked,ring",
            "--chunks", "1,2", "--ring-chunks", "1,2", "--copy-push", "0,1", *BENCH,
            "--out", "{out}/bench-nvlink", limit_s=240),),
    ),
    Recipe(
        "fusion-bench-shm", "h200x2", "shm", "ref and 8b",
        "unfused against chunked and the ring at SM margins 4 and 16 (send/recv in 512 KiB steps, the "
        "runtime's default)",
        (tp("bench", "--regime", "shm", "--shape", "ref", "--shape", "8b", "--modes", "chunked,ring",
            "--chunks", "4,8", "--ring-chunks", "4,8", "--sm-margins", "4,16", *BENCH,
            "--out", "{out}/bench-shm", limit_s=240),),
    ),
    Recipe(
        "fusion-bench-shm-sizes", "h200x2", "shm", "s4096 and s16384",
        "unfused against chunked and the ring at SM margins 4 and 16, at half and twice the reference tokens",
        (tp("bench", "--regime", "shm", "--shape", "s4096", "--shape", "s16384", "--modes", "chunked,ring",
            "--chunks", "4,8", "--ring-chunks", "2,4,8", "--sm-margins", "4,16", *BENCH,
            "--out", "{out}/bench-shm-sizes", limit_s=240),),
    ),
    Recipe(
        "fusion-bench-socket", "h200x2", "socket", "ref, 8b and s4096",
        "unfused against chunked and the ring at SM margins 0 and 16, 30 repetitions (the socket "
        "transport's spread is as large as the saving)",
        (tp("bench", "--regime", "socket", "--shape", "ref", "--modes", "chunked,ring", "--chunks", "2",
            "--ring-chunks", "2,4,8", "--sm-margins", "0,16", "--reps", "30", "--warmup", "3",
            "--out", "{out}/bench-socket-ref", limit_s=200),
         tp("bench", "--regime", "socket", "--shape", "8b", "--shape", "s4096", "--modes", "chunked",
            "--chunks", "2,4", "--sm-margins", "0,16", "--reps", "30", "--warmup", "3",
            "--out", "{out}/bench-socket-8b-s4096", limit_s=200)),
    ),
    Recipe(
        "fusion-sweep-nvlink", "h200x2", "nvlink", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "tokens/s end to end: unfused against copy_engine k=1 and k=2 and `auto`, one sweep",
        (sweep("nvlink", "copy_engine:1,copy_engine:2,auto", steps=20, limit_s=300),),
    ),
    Recipe(
        "fusion-sweep-shm", "h200x2", "shm", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "tokens/s end to end: unfused against the ring k=4 at margin 4, chunked k=8 at margin 16 and "
        "`auto`, one sweep",
        (sweep("shm", "ring:4:margin=4,chunked:8:margin=16,auto", limit_s=300),),
    ),
    Recipe(
        "fusion-sweep-socket", "h200x2", "socket", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "tokens/s end to end: unfused against chunked k=2 at margin 16 and `auto` (its probe's clear-win "
        "rule over the socket transport's spread)",
        (sweep("socket", "chunked:2:margin=16,auto", steps=12, profile=2, limit_s=420),),
    ),
    Recipe(
        "fusion-sweep-8blocks", "h200x2", "nvlink,shm", "8 blocks of the reference width (the embedding and head weigh less)",
        "tokens/s end to end on a deeper model: unfused against the best fixed mode of each regime and `auto`",
        (sweep("nvlink", "copy_engine:1,auto", model=DEEP_MODEL, steps=12, profile=0, name="nvlink-8blocks",
               limit_s=240),
         sweep("shm", "ring:4:margin=4,auto", model=DEEP_MODEL, steps=10, profile=0, name="shm-8blocks",
               limit_s=240)),
    ),
    Recipe(
        "nccl-p2p-chunksize-shm", "h200x2", "shm", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "the runtime's 512 KiB send/recv steps against NCCL's own 128 KiB, the ring k=4 at margin 4, "
        "one sweep",
        (sweep("shm", "ring:4:margin=4,ring:4:margin=4:NCCL_P2P_PCI_CHUNKSIZE=131072", limit_s=240),),
    ),
    Recipe(
        "lever-high-priority", "h200x2", "nvlink,shm", "ref and 8b",
        "NCCL's streams at default and at high priority (TORCH_NCCL_HIGH_PRIORITY=0 and 1), the same bench "
        "side by side in one call, nvlink and shm",
        tuple(tp("bench", "--regime", regime, "--shape", "ref", "--shape", "8b", "--modes", "chunked,ring",
                 "--chunks", "1,2,8", "--ring-chunks", "2,4", *BENCH, "--out", f"{{out}}/bench-{regime}-prio{p}",
                 limit_s=150, env={"TORCH_NCCL_HIGH_PRIORITY": p})
              for regime in ("nvlink", "shm") for p in ("0", "1")),
    ),
    Recipe(
        "lever-sm-margin-shm", "h200x2", "shm", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "the SM margin of the GEMMs beside a transfer end to end: chunked k=4 at margins 0, 8, 16 and 24, one sweep",
        (sweep("shm", "chunked:4,chunked:4:margin=8,chunked:4:margin=16,chunked:4:margin=24", profile=0,
               limit_s=360),),
    ),
    Recipe(
        "lever-overlaps-shm", "h200x2", "shm", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "the backward overlap and the embedding's all-gather beside the optimizer, each on and off: chunked k=4 "
        "at margin 16, one sweep",
        (sweep("shm", "chunked:4:margin=16,chunked:4:margin=16:bwd=off,chunked:4:margin=16:embed=off", profile=0,
               limit_s=300),),
    ),
    Recipe(
        "lever-ring-schedules-shm", "h200x2", "shm", "ref",
        "the ring's and chunked's pieces even against tapered, and the ring's GEMM-RS swapping pieces by "
        "send/recv against by all-gather, at margins 4 and 16",
        (tp("bench", "--regime", "shm", "--shape", "ref", "--modes", "chunked,ring", "--chunks", "4,8",
            "--ring-chunks", "4,8", "--sm-margins", "4,16", "--taper", "0,1", *BENCH,
            "--out", "{out}/bench-shm-taper", limit_s=200),
         tp("bench", "--regime", "shm", "--shape", "ref", "--sides", "rs", "--modes", "ring", "--ring-chunks", "4,8",
            "--sm-margins", "4,16", "--ring-all-gather", "0,1", "--reps", "40", "--warmup", "5",
            "--out", "{out}/bench-shm-rs-exchange", limit_s=200)),
    ),
    Recipe(
        "tp-scaling", "h200x2", "nvlink,shm", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "TP=1 on one GPU against TP=2 unfused and `auto` (scaling efficiency: tokens/s per GPU over TP=1's)",
        (tp("run", "--nproc", "1", "--mode", "none", *REF_MODEL, "--steps", "12", "--profile-steps", "0",
            "--out", "{out}/run-tp1-none", limit_s=120),
         sweep("nvlink", "auto", steps=12, profile=0, limit_s=200),
         sweep("shm", "auto", steps=12, profile=0, limit_s=200)),
    ),
    Recipe(
        "training-check", "h200x2", "nvlink", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step), 50 steps",
        "does the reference model train at TP=1 (the mean loss of the last 5 steps at least 20 % below "
        "the first 5's), and does each fused mode follow unfused's losses at TP=2 in bf16",
        (tp("run", "--nproc", "1", "--mode", "none", "--steps", "50", "--profile-steps", "0", *REF_MODEL,
            "--out", "{out}/run-tp1-none", limit_s=150),
         *(tp("run", "--nproc", "2", "--regime", "nvlink", "--mode", mode, "--chunks", k, "--steps", "50",
              "--profile-steps", "0", *REF_MODEL, "--out", f"{{out}}/run-tp2-{mode}", limit_s=90)
           for mode, k in TRAINING_VARIANTS)),
    ),
    Recipe(
        "calibrate", "h200x1", "-", "the GEMM calls of the four fused sample runs (benchmarks/calibrate_plans/)",
        "each sample run's GEMMs replayed alone at SM margin 0 and at the run's margins: the contention "
        "baselines of metrics.md §8",
        tuple(tp("calibrate", "--plan", f"benchmarks/calibrate_plans/h200x2-{run}.json", "--samples", "10",
                 "--per-sample", "5", limit_s=120, env={"TPSCOPE_CACHE_DIR": "{out}/cache"})
              for run in ("shm-chunked", "shm-auto", "nvlink-ring", "nvlink-copy_engine")),
    ),
    Recipe(
        "nested-ranges-loop", "h200x1", "-", "4 layers of width 4096, 4096 tokens, 200 small kernels per step",
        "a plain training loop in nested record_function ranges (not tpscope's runtime): its traces and "
        "per-step times, the analyzer's input for sample_traces/h200x1-nested-loop",
        (script("nested_ranges_loop.py", "--out", "{out}/nested-loop", limit_s=180),),
    ),
    Recipe(
        "foreign-gpu-loops", "h200x1", "-", "an MLP fed by a side-stream prefetch; GPT-2 (4 layers, width 1024 "
        "and 512) with gradient accumulation and DataLoader workers, eager and compiled",
        "training loops written with PyTorch's own APIs (not tpscope's runtime): their traces and per-step "
        "periods, the analyzer's input for sample_traces/h200x1-foreign-*",
        (script("foreign_gpu_loops.py", "--loop", "prefetch", "--out", "{out}/prefetch", limit_s=180),
         script("foreign_gpu_loops.py", "--loop", "gpt2", "--hidden", "1024", "--seq", "1024", "--micro-batch",
                "16", "--active", "3", "--out", "{out}/gpt2", limit_s=240),
         script("foreign_gpu_loops.py", "--loop", "gpt2-compiled", "--hidden", "1024", "--seq", "1024",
                "--micro-batch", "16", "--active", "3", "--out", "{out}/gpt2-compiled", limit_s=240),
         script("foreign_gpu_loops.py", "--loop", "gpt2", "--out", "{out}/gpt2-cpubound", limit_s=240)),
    ),
    Recipe(
        "host-staged-one-gpu", "h200x1", "-", "ref and 8b at TP=2 (pieces of 1, 2 and 4 per shard)",
        "what one GPU shows of host_staged: D2H/H2D bandwidth through the registered shared file, each GEMM "
        "alone, beside the copy engines and beside an SM copy of the same bytes, and two processes on the "
        "one GPU checked against references and timed",
        (script("host_staged_one_gpu.py", "--out", "{out}/host_staged_one_gpu.json", limit_s=300),),
    ),
    Recipe(
        "host-staged-shm", "h200x2", "shm", "ref and 8b; reference model (2 blocks, H 8192, F 28672, 8192 tokens per step)",
        "host_staged over shm beside the ring (today's best fixed mode) and unfused: the mode on two GPUs, "
        "op-level attained saving at both shapes, and one end-to-end sweep with auto and NCCL's "
        "cudaMemcpy shm transport (last: it has been seen to hang)",
        (script("host_staged_one_gpu.py", "--gpus", "2", "--out", "{out}/host_staged_two_gpu.json", limit_s=240),
         tp("bench", "--nproc", "2", "--regime", "shm", "--shape", "ref", "--shape", "8b",
            "--modes", "ring,host_staged", "--ring-chunks", "1,2,4,8", *BENCH, "--out", "{out}/bench-shm",
            limit_s=400),
         sweep("shm", "ring:4:margin=4,host_staged:1,host_staged:2,host_staged:4,auto,"
               "ring:4:margin=4:NCCL_SHM_USE_CUDA_MEMCPY=1", steps=20, limit_s=560)),
    ),
    Recipe(
        "sample-runs", "h200x2", "nvlink,shm", "reference model (2 blocks, H 8192, F 28672, 8192 tokens per step), 24 steps",
        "the sample runs of sample_traces/: none, the best fixed mode and auto in nvlink and shm, 6 profiled "
        "steps each (each folder under 2 MB: else again with --layers 1), and a 2-rank plain loop in nested "
        "record_function ranges",
        (sweep("nvlink", "copy_engine:1,auto", steps=24, profile=6, name="samples-nvlink", limit_s=400),
         sweep("shm", "ring:4:margin=4,host_staged:2,auto", steps=24, profile=6, name="samples-shm", limit_s=420),
         script("nested_ranges_loop.py", "--out", "{out}/nested-loop-2rank", "--active", "6", limit_s=120,
                torchrun=("--standalone", "--nproc-per-node", "2"))),
    ),
    Recipe(
        "analyzer-speed", "cpu", "-", "sample_traces/h200x2-shm-chunked tiled to 0.1-3 M events per rank, 1-64 ranks",
        "`tpscope analyze` against HTA's load + get_comm_comp_overlap: wall time and peak memory",
        (script("analyzer_speed.py", "--out", "{out}/analyzer_speed.json", limit_s=3600),),
    ),
    Recipe(
        "ray-scale-local", "cpu", "-", "1,024 ranks tiled from tests/data/h200-shm-chunked4 (2.5 M events)",
        "the map over 1,024 rank files on the local process pool at 2 and 1 tasks at a time: map and "
        "reduce seconds, driver and worker memory",
        (script("ray_scale.py", "--engine", "local", "--source", "tests/data/h200-shm-chunked4", "--ranks",
                "1024", "--events", "1", "--concurrency", "2", "1", "--out", "{out}/ray_scale.json",
                limit_s=1200),),
    ),
    Recipe(
        "ray-scale-112m", "cpu", "-", "1,024 ranks tiled from sample_traces/h200x2-shm-chunked (112.6 M events)",
        "the map over 1,024 rank files on Ray (when installed) and on the local process pool at 16, 8 and 4 "
        "tasks at a time: map and reduce seconds, driver and worker memory",
        (script("ray_scale.py", "--engine", "ray", "--ranks", "1024", "--events", "100000", "--concurrency",
                "16", "--out", "{out}/ray_scale_ray_1024_16cpu.json", limit_s=600),
         script("ray_scale.py", "--engine", "local", "--ranks", "1024", "--events", "100000", "--concurrency",
                "16", "--out", "{out}/ray_scale_local_1024_16cpu.json", limit_s=600),
         script("ray_scale.py", "--engine", "local", "--ranks", "1024", "--events", "100000", "--concurrency",
                "8", "--out", "{out}/ray_scale_local_1024_8cpu.json", limit_s=600),
         script("ray_scale.py", "--engine", "local", "--ranks", "1024", "--events", "100000", "--concurrency",
                "4", "--out", "{out}/ray_scale_local_1024_4cpu.json", limit_s=600)),
    ),
)

# fmt: on

BY_NAME = {r.name: r for r in RECIPES}
