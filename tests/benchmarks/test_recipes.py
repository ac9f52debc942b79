"""Every recipe of benchmarks/recipes.py is well-formed: its commands parse with the CLI it calls,
write only into the result folder, and say what its fields say."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from recipes import BY_NAME, HARDWARE, MULTICAST_OFF, RECIPES, REGIMES  # noqa: E402

from tpscope.cli import build_parser  # noqa: E402

TP_STEPS = [
    (r.name, i, s) for r in RECIPES for i, s in enumerate(r.steps) if s.program == "tpscope"
]
SCRIPT_STEPS = [
    (r.name, i, s) for r in RECIPES for i, s in enumerate(r.steps) if s.program != "tpscope"
]


def test_names_are_unique_and_fields_are_from_their_tables():
    assert len(BY_NAME) == len(RECIPES)
    for r in RECIPES:
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", r.name), r.name
        assert r.hardware in HARDWARE, r.name
        assert r.regime and set(r.regime.split(",")) <= set(REGIMES), r.name
        assert r.shape and r.compares and r.steps, r.name
        for s in r.steps:
            assert s.limit_s > 0 and not set(dict(s.env)) & set(MULTICAST_OFF), r.name


def test_the_headline_comparisons_have_a_recipe():
    for name in (
        "fusion-bench-nvlink",
        "fusion-bench-shm",
        "fusion-sweep-nvlink",
        "fusion-sweep-shm",
        "training-check",
        "calibrate",
        "nested-ranges-loop",
        "analyzer-speed",
        "ray-scale-local",
        "cpu-smoke",
    ):
        assert name in BY_NAME
    shapes = {a for r in RECIPES for s in r.steps for a in s.argv}
    assert {"ref", "8b", "s4096", "s16384"} <= shapes
    variants = ",".join(
        s.argv[s.argv.index("--variants") + 1]
        for r in RECIPES
        for s in r.steps
        if "--variants" in s.argv
    )
    assert {"auto", "copy_engine:1", "ring:4:margin=4", "chunked:8:margin=16"} <= set(
        variants.split(",")
    )


@pytest.mark.parametrize(("name", "i", "step"), TP_STEPS, ids=[f"{n}-{i}" for n, i, _ in TP_STEPS])
def test_tpscope_steps_parse_and_match_their_recipe(name, i, step):
    recipe = BY_NAME[name]
    # argparse exits on a bad option: the test fails
    args = build_parser().parse_args(list(step.argv))
    assert args.command == step.argv[0]
    if getattr(args, "regime", None):
        assert args.regime in recipe.regime.split(","), (name, args.regime)
    on_cpu = getattr(args, "device", None) == "cpu"
    # a GPU recipe never runs on the CPU, nor the reverse
    assert on_cpu == (recipe.hardware == "cpu"), name
    nproc = getattr(args, "nproc", None)
    if recipe.hardware == "h200x1":
        assert nproc in (None, 1), name
    if recipe.hardware == "h200x2" and args.command in ("run", "sweep"):
        assert nproc in (1, 2), name
    for opt in ("--json", "--out", "--auto-cache"):
        if opt in step.argv:
            assert step.argv[step.argv.index(opt) + 1].startswith("{out}/"), (name, opt)
    for opt in ("--plan",):
        if opt in step.argv:
            assert (ROOT / step.argv[step.argv.index(opt) + 1]).is_file(), (name, opt)


def test_output_paths_differ_within_a_recipe():
    for r in RECIPES:
        outs = [
            s.argv[s.argv.index(o) + 1] for s in r.steps for o in ("--json", "--out") if o in s.argv
        ]
        assert len(outs) == len(set(outs)), r.name


@pytest.mark.parametrize(
    ("name", "i", "step"), SCRIPT_STEPS, ids=[f"{n}-{i}" for n, i, _ in SCRIPT_STEPS]
)
def test_script_steps_name_a_script_and_its_options(name, i, step):
    source = (ROOT / "benchmarks" / step.program).read_text()
    for a in step.argv:
        if a.startswith("--"):
            assert f'"{a}"' in source, (name, step.program, a)


def test_the_training_check_runs_the_reference_model_50_steps_per_mode():
    r = BY_NAME["training-check"]
    parsed = [build_parser().parse_args(list(s.argv)) for s in r.steps]
    assert [(a.nproc, a.mode) for a in parsed] == [
        (1, "none"),
        (2, "none"),
        (2, "chunked"),
        (2, "ring"),
        (2, "copy_engine"),
        (2, "symm_mem"),
    ]
    assert {(a.steps, a.profile_steps, a.hidden, a.ffn, a.seq_len, a.batch) for a in parsed} == {
        (50, 0, 8192, 28672, 8192, 1)
    }


@pytest.mark.parametrize(
    ("name", "i", "step"),
    [t for t in TP_STEPS if t[2].argv[0] == "run"],
    ids=[f"{n}-{i}" for n, i, s in TP_STEPS if s.argv[0] == "run"],
)
def test_run_steps_make_configs_whose_world_divides(name, i, step):
    """A GPU recipe runs where no one watches: each `tpscope run` must pass the runtime's own checks."""
    from tpscope.fusion.run.command import config_from_args

    args = build_parser().parse_args(list(step.argv))
    cfg = config_from_args(
        args, args.device or ("cpu" if BY_NAME[name].hardware == "cpu" else "cuda"), "out"
    )
    cfg.check_world(args.nproc)


@pytest.mark.parametrize(
    ("name", "i", "step"),
    [t for t in TP_STEPS if t[2].argv[0] == "sweep"],
    ids=[f"{n}-{i}" for n, i, s in TP_STEPS if s.argv[0] == "sweep"],
)
def test_sweep_variants_parse(name, i, step):
    """Each sweep's --variants is what the sweep's own parser accepts (it fails only at run time)."""
    from tpscope.fusion.run.sweep_command import parse_variants

    args = build_parser().parse_args(list(step.argv))
    variants = parse_variants(args.variants, args.regime)
    assert len(variants) == len(args.variants.split(","))


def test_docs_name_every_recipe_and_only_recipes():
    """docs/benchmarks.md's "Reproducing" table lists every recipe; the recipe names the docs and the
    result folders' READMEs cite exist."""
    table = (ROOT / "docs" / "benchmarks.md").read_text().split("### Reproducing", 1)[1]
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.M))
    assert listed == set(BY_NAME)
    pages = [
        ROOT / "docs" / "decisions.md",
        ROOT / "benchmarks" / "results" / "README.md",
        *(ROOT / "benchmarks" / "results").glob("**/README.md"),
    ]
    for page in pages:
        for cited in re.findall(
            r"`((?:fusion|lever|nccl|tp|training|cpu|gpu|ray|analyzer|nested)-[a-z0-9-]+)`",
            page.read_text(),
        ):
            assert cited in BY_NAME, (page.relative_to(ROOT), cited)
