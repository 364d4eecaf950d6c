"""The continuous-time latent models on the benchmark (issue #9, item 2: defaults per cell).

Runs the cells (dataset × model × method × seed) of the gnODE (``gnode``), the LTC (``ltc``),
ODE-RFWP (``rfwp``) and ORGaNICs (``organics``) through the runner ``dsident benchmark`` uses
(:func:`dsident.experiments.config.resolve_config` → :func:`dsident.experiments.runner.run_point`),
so each fit uses exactly the settings the benchmark resolves for that cell (``PAIR_DEFAULTS``),
and prints one table: per cell, D_stsp and D_H as median [min, max] over seeds, the fraction
of diverged free runs and the median fit time (wall seconds), next to the floor of the
benchmark at the evaluation length.

The evaluation is the benchmark's (SPEC-metrics §4) on the first ``--eval-length`` test
samples (default 10 000, where the Lorenz-63 floor is D_stsp 0.446, D_H 0.027). A cell
reconstructs when D_stsp is within 3× the floor, D_H <= 0.15 and the free run stays bounded.

Run::

    python benchmarks/bench_ct_models.py                      # Lorenz-63, 4 models, default methods, 1 seed
    python benchmarks/bench_ct_models.py --methods teacher-forcing --seeds 3
    python benchmarks/bench_ct_models.py --models gnode --set '{"fit_options": {"n_steps": 300}}'

``--set`` overlays a JSON run configuration (``model_params``, ``fit_options``,
``train_length``) on every cell, for trying settings; the table then says so. One torch
thread by default (``--threads``): the models are small and the machine is shared.
Points are written under ``--out`` (one folder per point; a finished point is re-used on a
re-run with the same settings, ``--fresh`` refits).
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from dsident import metrics
from dsident.experiments.config import default_method, resolve_config
from dsident.experiments.runner import DONE, apply_thread_limit, point_id, read_record, run_point

MODELS = ("gnode", "ltc", "rfwp", "organics")


def cell_configs(dataset: str, model: str, method: str, seeds: list[int], eval_length: int,
                 extra: dict[str, Any]) -> list[dict[str, Any]]:
    """The benchmark's resolved configurations of one cell, one per seed (``extra`` overlaid)."""
    return [resolve_config(dataset, model, method, overrides={**extra, "seed": s, "eval_length": eval_length})
            for s in seeds]


def run_cell(configs: list[dict[str, Any]], out: Path, fresh: bool) -> list[dict[str, Any]]:
    """Run (or re-read) every point of a cell; prints one line per seed."""
    records = []
    for cfg in configs:
        rec = None if fresh else read_record(out / "points" / point_id(cfg))
        if rec is None or rec.get("status") != DONE:
            rec = run_point(cfg, out, progress=False, keep_model=False)
        s = rec["scores"]
        err = f"  error: {rec['error']}" if rec.get("error") else ""
        print(f"  {cfg['dataset']:>15} {cfg['model']:>8} {cfg['method']:>15} seed {cfg['seed']}: "
              f"D_stsp {s['D_stsp']:.3f}  D_H {s['D_H']:.3f}  diverged {s['diverged']:.0f}  "
              f"fit {rec['fit_time']:.0f} s{err}", flush=True)
        records.append(rec)
    return records


def summary(values: list[float], fmt: str = "{:.3g}") -> str:
    """``median [min, max]`` over the finite values (``nan`` when there are none)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return "nan"
    if len(finite) == 1:
        return fmt.format(finite[0])
    return f"{fmt.format(statistics.median(finite))} [{fmt.format(min(finite))}, {fmt.format(max(finite))}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["lorenz63"])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--methods", nargs="+", default=None, help="default: the benchmark's method per (dataset, model)")
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first .. first + n - 1")
    parser.add_argument("--eval-length", type=int, default=10_000)
    parser.add_argument("--set", default="{}", help="JSON overlaid on every cell's configuration (trials)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="result folder (default: a temporary one)")
    parser.add_argument("--fresh", action="store_true", help="refit points already in --out")
    args = parser.parse_args()
    apply_thread_limit(args.threads)
    extra = json.loads(args.set)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_ct_models_"))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    print(f"points in {out}; {args.threads} torch thread(s); evaluation on the first {args.eval_length} "
          f"test samples" + (f"; settings overlaid: {json.dumps(extra)}" if extra else "; the benchmark's defaults"))

    rows = []
    for dataset in args.datasets:
        for model in args.models:
            for method in args.methods or [default_method(model, dataset)]:
                configs = cell_configs(dataset, model, method, seeds, args.eval_length, extra)
                print(f"{dataset} / {model} / {method}: model_params {json.dumps(configs[0]['model_params'])}, "
                      f"fit_options {json.dumps(configs[0]['fit_options'])}, train_length "
                      f"{configs[0].get('train_length')}", flush=True)
                recs = run_cell(configs, out, args.fresh)
                scores = [r["scores"] for r in recs]
                rows.append((dataset, model, method, len(recs),
                             summary([s["D_stsp"] for s in scores]), summary([s["D_H"] for s in scores]),
                             summary([s["diverged"] for s in scores], "{:.2f}"),
                             summary([r["fit_time"] for r in recs], "{:.0f}"),
                             sum(r.get("status") != DONE for r in recs)))

    print("\n| dataset | model | method | seeds | D_stsp | D_H | diverged | fit time (s) | failed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(v) for v in row) + " |")
    for dataset in args.datasets:
        fa = metrics.floor(dataset, length=args.eval_length).attrs
        print(f"floor {dataset} at {args.eval_length} samples: D_stsp {fa['state_space_divergence_mean']:.3g}, "
              f"D_H {fa['power_spectrum_distance_mean']:.3g}")
    print("D_stsp / D_H / diverged / fit time: median [min, max] over seeds")
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
