"""rPLRNN (τ > 0) vs PLRNN (τ = 0) by Laplace-EM on the bursting-neuron short data: the protocol
of Fig. 3 of Schmidt, Koppe et al. (ICLR 2021).

Protocol (paper §4.2 and the reference code's sweep):

- Data: ``load("bursting_neuron", split="short")``, 3 trials of T = 1 501 (V, n, h), each
  z-scored. Each model is fitted on one trial.
- Models: M ∈ {8, …, 18} latent units, M_reg = M/2 (rounded up), one fit per (M, trial):
  11 × 3 = 33 runs per τ, as in the paper's n = 33. The fit seed is 100·trial + M.
- τ grid: the paper's {0, 10¹, 10², 10³, 10⁴, 10⁵}/T with T = 1 500, i.e. model τ ∈ {0, 0.0067,
  0.067, 0.667, 6.67, 66.7}. The default compares τ = 0 with the paper's best τ values by
  D_KL (0.667 and 66.7; Fig. 3A).
- Full annealing protocol of ``method="laplace-em"`` (LDS init; Σ = 1, 0.1, 0.01, 0.001).

Evaluation of every fit (all with the package's own metric functions):

- A free run of 100 000 steps from μ0 without process noise; the first 1 000 steps are
  dropped. Regime of the run, from the voltage channel of the noise-free orbit (last 20 000
  steps): ``diverged`` (non-finite or |x| ≥ 10), ``fixed point`` (std < 0.05), ``bursting``
  (spike trains with inter-burst gaps), ``tonic`` (spikes, no gaps) or ``other``.
  The same classifier is applied to the training trial itself.
- D_stsp, ``state_space_divergence`` (binned, 30 bins per channel, α = 1e-5), against the
  trial the model was fitted on, in two forms:
  ``D_stsp obs``: the generated observations are drawn with the model's observation noise Γ,
  i.e. samples of the model's distribution of observations, like the data;
  ``D_stsp clean``: the noise-free orbit B φ(z) + b (what the paper's scripts simulate).
  The training data carry observation noise (variances 0.17, 0.001, 3e-5 before z-scoring;
  the h channel is ≈ 95 % noise), so the clean form scores even the true system at
  12.5–15.5 nats (``--floor`` prints these reference values).
- D_H, ``power_spectrum_distance`` (σ = 20), of the noisy generated observations against the
  training trial, averaged over 10 windows of 1 501 steps.
- Diverged runs are left out of the means (as in the paper) and count as losses in the
  paired comparison.

Run:  python benchmarks/bench_rplrnn_bursting.py [--taus 0,0.667,66.7] [--latents 8-18] [--seeds 0-4]
      [--select bounded|likelihood|dstsp]
      [--trials 0,1,2] [--floor] [--manifold-init] [--out rows.jsonl]
The default is 99 fits: 30–70 min on 2 shared cores (most fits take 5–50 s; some at M ≥ 17 take
minutes). ``--taus 0,0.667 --latents 8,10,12,14,16`` (30 fits, ≈ 8 min) is the smaller run
reported in docs/laplace_em.md.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

#: observation-noise variances of the short split before z-scoring (its provenance "noise")
SHORT_NOISE_VAR = np.array([0.17, 0.001, 3e-5])
N_STEPS, BURN_IN, TAIL = 100_000, 1_000, 20_000


def spike_times(v: np.ndarray) -> np.ndarray:
    """Spike peaks of a voltage trace in z-units: local maxima above 1 with a prominence of at least 0.3."""
    from scipy.signal import find_peaks

    return find_peaks(v, height=1.0, prominence=0.3)[0]


#: an inter-spike interval longer than this many median intervals separates two bursts
BURST_GAP = 3


def burst_groups(v: np.ndarray) -> list[np.ndarray]:
    """The spike indices of a voltage trace (time,) in z-units, split into bursts at long gaps.

    The first and last groups may be cut off by the trace's ends; ``[1:-1]`` are the complete
    bursts, and every group after the first begins with a burst's first spike. No group for
    fewer than three spikes.
    """
    sp = spike_times(v)
    if sp.size < 3:
        return []
    isi = np.diff(sp)
    return np.split(sp, np.flatnonzero(isi > BURST_GAP * np.median(isi)) + 1)


def regime(x: np.ndarray) -> str:
    """Regime of an orbit (time, channel) in z-units, judged on its voltage channel (channel 0)."""
    if not np.all(np.isfinite(x)) or np.abs(x).max() >= 10:
        return "diverged"
    v = x[:, 0]
    if v.std() < 0.05:
        return "fixed point"
    sp = spike_times(v)
    if sp.size < 5:
        return "other"
    isi = np.diff(sp)
    gaps = isi > 3 * np.median(isi)
    # bursts: several long gaps, and on average more than one spike per burst
    if gaps.sum() >= 2 and gaps.mean() < 0.5:
        return "bursting"
    return "tonic"


def evaluate_fit(est, trial_x: np.ndarray, seed: int) -> dict:
    """Free run of the fitted estimator; regime, both D_stsp forms and D_H against the training trial."""
    import torch

    from dsident.metrics import power_spectrum_distance, state_space_divergence

    gen = est.generate(N_STEPS, seed=seed, observation_noise=True)
    x_obs = gen["x"].values[0]
    z = torch.as_tensor(gen["z"].values[0])
    with torch.no_grad():
        x_clean = est.model_.decode(z.to(next(est.model_.parameters()).dtype)).double().numpy()
    reg = "diverged" if gen.attrs["diverged"] else regime(x_clean[-TAIL:])
    res = {"regime": reg, "d_obs": float("nan"), "d_clean": float("nan"), "d_h": float("nan")}
    if reg == "diverged":
        return res
    res["d_obs"] = state_space_divergence(trial_x, x_obs[BURN_IN:], method="bins", n_bins=30)
    res["d_clean"] = state_space_divergence(trial_x, x_clean[BURN_IN:], method="bins", n_bins=30)
    T = trial_x.shape[0]
    res["d_h"] = float(np.mean([power_spectrum_distance(trial_x, x_obs[BURN_IN + k * T:BURN_IN + (k + 1) * T])
                                for k in range(10)]))
    return res


def floor(data) -> None:
    """The true system as the 'model': its noise-free and noisy orbits scored like a fit."""
    from dsident.data.systems import get_system, simulate
    from dsident.metrics import power_spectrum_distance, state_space_divergence

    prov = json.loads(data.attrs["provenance"])
    system = get_system("bursting_neuron")
    rng = np.random.default_rng(0)
    print("reference: the true system, run 50 s from each trial's initial condition")
    for i in range(data.sizes["trial"]):
        traj = simulate(system, 2001 + BURN_IN + N_STEPS // 2, 0.5, x0=np.asarray(prov["x0"][i]))
        noisy_short = traj[500:2001] + rng.normal(size=(1501, 3)) * np.sqrt(SHORT_NOISE_VAR)
        mean, std = noisy_short.mean(0), noisy_short.std(0)
        clean = (traj[2001 + BURN_IN:] - mean) / std
        obs = clean + rng.normal(size=clean.shape) * np.sqrt(SHORT_NOISE_VAR) / std
        x = data["x"].values[i]
        print(f"  trial {i}: regime of the data {regime(x)}, of the true orbit {regime(clean[-TAIL:])}; "
              f"D_stsp obs {state_space_divergence(x, obs, method='bins', n_bins=30):.2f}, "
              f"clean {state_space_divergence(x, clean, method='bins', n_bins=30):.2f}; "
              f"D_H {np.mean([power_spectrum_distance(x, obs[k * 1501:(k + 1) * 1501]) for k in range(10)]):.3f}",
              flush=True)


def run(taus: list[float], latents: list[int], trials: list[int], *, do_floor: bool = False,
        select: str = "bounded", seeds: list[int] | None = None, manifold_init: bool = False,
        out: str | None = None) -> None:
    from scipy.stats import binomtest

    import dsident
    from dsident.datasets import load

    data = load("bursting_neuron", split="short")
    print("regime of each training trial:", {i: regime(data["x"].values[i]) for i in range(data.sizes["trial"])})
    if do_floor:
        floor(data)
    rows: dict[tuple, dict] = {}
    # one run per (M, trial) with the seed 100·trial + M, or one per (M, trial, seed) with --seeds
    cells = [(M, t, s) for M in latents for t in trials for s in (seeds if seeds else [100 * t + M])]
    for tau in taus:
        for M, trial, seed in cells:
            ds = data.isel(trial=[trial])
            est = dsident.models.PLRNN(latent_dim=M, tau=tau, seed=seed)
            t0 = time.perf_counter()
            est.fit(ds, method="laplace-em", progress=False, select=select, manifold_init=manifold_init)
            fit_s = time.perf_counter() - t0
            r = evaluate_fit(est, data["x"].values[trial], seed)
            r["fit_s"] = fit_s
            r["loglik"] = float(est.history_["log_likelihood"][-1])
            rows[(tau, M, trial, seed)] = r
            if out:
                with open(out, "a") as fh:
                    fh.write(json.dumps({"tau": tau, "M": M, "trial": trial, "seed": seed, "select": select,
                                         "manifold_init": manifold_init, **r}) + "\n")
            print(f"tau={tau:<7g} M={M:2d} trial={trial} seed={seed:<3d} fit {fit_s:5.1f} s  regime={r['regime']:<11}  "
                  f"D_stsp obs {r['d_obs']:6.2f}  clean {r['d_clean']:6.2f}  D_H {r['d_h']:.3f}", flush=True)
    print("\nsummary (means over non-diverged runs ± SEM; n = runs)")
    print("| τ | runs | diverged | fixed point | tonic | bursting | other | D_stsp obs | D_stsp clean | D_H |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tau in taus:
        r = [rows[(tau, *c)] for c in cells]
        counts = {k: sum(x["regime"] == k for x in r)
                  for k in ("diverged", "fixed point", "tonic", "bursting", "other")}

        def ms(key: str) -> str:
            v = np.array([x[key] for x in r if np.isfinite(x[key])])
            if v.size == 1:         # no SEM from one run, but its value is still the mean
                return f"{v[0]:.2f}"
            return f"{v.mean():.2f} ± {v.std(ddof=1) / np.sqrt(v.size):.2f}" if v.size > 1 else "n/a"
        print(f"| {tau:g} | {len(r)} | {counts['diverged']} | {counts['fixed point']} | {counts['tonic']} | "
              f"{counts['bursting']} | {counts['other']} | {ms('d_obs')} | {ms('d_clean')} | {ms('d_h')} |")
    for tau in taus:
        if tau == 0 or 0.0 not in taus:
            continue
        for key in ("d_obs", "d_clean", "d_h"):
            wins = ties = 0
            for c in cells:
                a = np.nan_to_num(rows[(tau, *c)][key], nan=np.inf)
                b = np.nan_to_num(rows[(0.0, *c)][key], nan=np.inf)
                wins += a < b
                ties += a == b
            # one-sided sign test over the untied pairs: how surprising are this many wins if
            # τ made no difference (each pair a fair coin)?
            p = binomtest(int(wins), int(len(cells) - ties), 0.5, alternative="greater").pvalue \
                if len(cells) > ties else float("nan")
            print(f"tau={tau:g} lower {key} than tau=0 (paired by M, trial and seed): {wins}/{len(cells)}"
                  f" (ties {ties}; sign test p = {p:.3f})")
    for t in trials:
        mine = [c for c in cells if c[1] == t]
        print(f"trial {t}: bursting runs " + ", ".join(
            f"tau={tau:g}: {sum(rows[(tau, *c)]['regime'] == 'bursting' for c in mine)}/{len(mine)}"
            for tau in taus))
        for tau in taus:
            dh = [rows[(tau, *c)]['d_h'] for c in mine if rows[(tau, *c)]['regime'] == 'bursting']
            if dh:
                print(f"  tau={tau:g}: D_H of the bursting runs " + ", ".join(f"{v:.3f}" for v in dh))
    print(f"mean fit time {np.mean([r['fit_s'] for r in rows.values()]):.1f} s")


def _int_list(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(v) for v in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(v) for v in text.split(",")]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--taus", default="0,0.667,66.7", help="comma-separated model τ (paper grid: 0,0.0067,"
                    "0.067,0.667,6.67,66.7)")
    ap.add_argument("--latents", default="8-18", help="M values: 'lo-hi' or comma-separated")
    ap.add_argument("--trials", default="0,1,2")
    ap.add_argument("--floor", action="store_true", help="also score the true system (≈ 45 s)")
    ap.add_argument("--seeds", default=None, help="fit seeds ('lo-hi' or comma-separated): one run per "
                    "(M, trial, seed) instead of one per (M, trial) with seed 100·trial + M")
    ap.add_argument("--select", default="bounded", choices=["likelihood", "bounded", "dstsp"],
                    help="which EM iterate each annealing stage keeps (fit_laplace_em's `select`)")
    ap.add_argument("--manifold-init", action="store_true",
                    help="start the regularized units at A = 1, W = 0, h = 0 instead of the LDS values "
                         "(fit_laplace_em's manifold_init; the default start is the reference code's)")
    ap.add_argument("--out", default=None, help="append one JSON line per fit to this file")
    a = ap.parse_args()
    print(f"select = {a.select}, manifold_init = {a.manifold_init}")
    run([float(v) for v in a.taus.split(",")], _int_list(a.latents), _int_list(a.trials), do_floor=a.floor,
        select=a.select, seeds=_int_list(a.seeds) if a.seeds else None, manifold_init=a.manifold_init,
        out=a.out)
