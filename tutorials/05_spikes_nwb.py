# %% [markdown]
# # Spikes in an NWB file → binned counts → Poisson PLRNN → rates, latents, fixed points, bits per spike
#
# The path a neuroscience lab takes with dsident:
#
# 1. an NWB file with a `Units` table (spike times) and a `trials` table (one condition per trial);
# 2. `dsident.data.importers.from_nwb(path, bin_size=...)` bins the spike times (half-open bins,
#    NaN outside the recorded intervals) into the canonical dataset `x(trial, time, unit)`;
# 3. a PLRNN with a Poisson observation model is fitted by stochastic variational inference;
# 4. the fitted model gives smoothed latents, firing rates and fixed points, and the Neural Latents
#    Benchmark scores: co-smoothing bits per spike on held-out neurons, forward-prediction bits per
#    spike, PSTH R².
#
# The recording is simulated here (and written with pynwb when it is installed, otherwise the spike
# times are binned straight from arrays), so the script runs offline. Set `DSIDENT_FAST=1` for a
# quick smoke run; figures go to `DSIDENT_TUTORIAL_OUT` (default: a temporary folder).

# %%
from __future__ import annotations

import datetime
import importlib.util
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

import dsident
from dsident.data.importers import from_nwb
from dsident.data.spikes import bin_spikes
from dsident.metrics.population import (
    bits_per_spike, co_smoothing_bps, forward_prediction_bps, held_out_mask, psth, psth_r2, split_forward,
)
from dsident.plotting_spikes import plot_latents_by_condition, plot_psth, plot_raster_rates

FAST = os.environ.get("DSIDENT_FAST", "0") == "1"
OUT = Path(os.environ.get("DSIDENT_TUTORIAL_OUT") or tempfile.mkdtemp(prefix="dsident_tutorial05_"))
OUT.mkdir(parents=True, exist_ok=True)
torch.set_num_threads(1)             # the model is small: extra threads only wait for each other

# %% [markdown]
# ## 1. A simulated recording
#
# A 2-D latent state rotates and decays from a condition-dependent start (four "reach directions");
# 24 neurons fire as inhomogeneous Poisson processes with rates `exp(C z + b)` (Hz), sampled at
# 1 ms. Each trial lasts 1 s; trials are 1.5 s apart.

# %%
rng = np.random.default_rng(0)
N_NEURONS, N_CONDITIONS = 24, 4
N_TRIALS = 16 if FAST else 48
TRIAL_S, GAP_S, STEP_S = 1.0, 0.5, 0.001
loading = rng.normal(0.0, 0.7, size=(N_NEURONS, 2))
baseline = np.log(rng.uniform(8.0, 25.0, size=N_NEURONS))          # log Hz


def latent_path(condition: int, t: np.ndarray) -> np.ndarray:
    """(time, 2): rotation at 1.5 Hz from the condition's start angle, decaying by half over a trial."""
    angle = 2 * np.pi * condition / N_CONDITIONS + 2 * np.pi * 1.5 * t
    return np.stack([np.cos(angle), np.sin(angle)], axis=1) * (1.0 - 0.5 * t[:, None])


t_fine = np.arange(0.0, TRIAL_S, STEP_S)
spike_times: list[list[float]] = [[] for _ in range(N_NEURONS)]
starts = np.arange(N_TRIALS) * (TRIAL_S + GAP_S)
conditions = np.arange(N_TRIALS) % N_CONDITIONS
for start, condition in zip(starts, conditions):
    rate_hz = np.exp(latent_path(condition, t_fine) @ loading.T + baseline)          # (time, neuron)
    fired = rng.random(rate_hz.shape) < rate_hz * STEP_S
    for j in range(N_NEURONS):
        spike_times[j].extend((start + t_fine[fired[:, j]] + rng.uniform(0, STEP_S, fired[:, j].sum())).tolist())
spike_times = [np.sort(np.asarray(s)) for s in spike_times]
print(f"{N_TRIALS} trials, {N_NEURONS} neurons, {sum(len(s) for s in spike_times)} spikes")

# %% [markdown]
# ## 2. Write and read the NWB file
#
# With pynwb (`pip install 'dsident[nwb]'`) the spikes go into a `Units` table and the trials into
# a `trials` table with a `condition` column; `from_nwb` reads both back. Without pynwb the same
# binning runs on the arrays with `bin_spikes`.

# %%
BIN_S = 0.02
trials_table = {"start_time": starts, "stop_time": starts + TRIAL_S, "condition": conditions}
if importlib.util.find_spec("pynwb"):
    import pynwb

    nwb = pynwb.NWBFile(session_description="dsident tutorial 05: simulated rotation task",
                        identifier="dsident-tutorial-05",
                        session_start_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
    for times in spike_times:
        nwb.add_unit(spike_times=times, obs_intervals=[[0.0, float(starts[-1] + TRIAL_S)]])
    nwb.add_trial_column("condition", "start direction of the latent rotation (0-3)")
    for start, condition in zip(starts, conditions):
        nwb.add_trial(start_time=float(start), stop_time=float(start + TRIAL_S), condition=int(condition))
    nwb_path = OUT / "rotation_task.nwb"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # pynwb's notes about optional metadata
        with pynwb.NWBHDF5IO(str(nwb_path), "w") as io:
            io.write(nwb)
    data = from_nwb(nwb_path, bin_size=BIN_S)
    print(f"read {nwb_path.name} with from_nwb")
else:
    data = bin_spikes(spike_times, BIN_S, 0.0, float(starts[-1] + TRIAL_S), trials=trials_table)
    print("pynwb not installed: binned the arrays with bin_spikes")
print(data)

# %% [markdown]
# The counts are `x(trial, time, channel)` with `dt = bin_size = 0.02` s; `condition(trial)` came
# from the trials table. Bins are half-open `[t, t + 0.02)`: a spike exactly at a trial's stop time
# belongs to no bin (the provenance counts such spikes).

# %% [markdown]
# ## 3. Train / evaluation trials and held-out neurons (the NLB protocol)
#
# Three quarters of the trials train the model with every neuron. On the evaluation trials the last
# 6 neurons are *held out*: masked (NaN) when the latents are inferred, then predicted from the
# held-in neurons alone (co-smoothing). The last 10 bins of every evaluation trial form the
# *forward* window, predicted by running the fitted dynamics on from the last inferred state.

# %%
held_out = list(range(N_NEURONS - 6, N_NEURONS))
n_train = 3 * N_TRIALS // 4
train = data.isel(trial=slice(0, n_train))
evaluation = data.isel(trial=slice(n_train, None))
N_FORWARD = 10
eval_observed, eval_forward = split_forward(evaluation, N_FORWARD)
eval_input = held_out_mask(eval_observed, held_out)

# %% [markdown]
# ## 4. Fit a Poisson PLRNN by stochastic variational inference

# %%
model = dsident.models.PLRNN(latent_dim=4, observation="poisson", readout="linear", seed=0)
model.fit(train, method="svi", n_steps=120 if FAST else 1500, window=50, batch_size=16, lr=0.01,
          progress=False, n_threads=1, eval_every=50)
print(f"SVI: {model.history_['n_steps_run']} steps, stop reason: {model.history_['stop_reason']}")

# %% [markdown]
# ## 5. Latents and rates, and the bits-per-spike scores

# %%
observation = model.model_.observation


def rates_of(latents: np.ndarray) -> np.ndarray:
    """Expected counts per bin, (trial, time, neuron), from latents (trial, time, latent)."""
    with torch.no_grad():
        return observation.rate(torch.as_tensor(latents, dtype=torch.float32)).double().numpy()


train_latents = model.smooth(train)
train_rates = rates_of(train_latents["z"].values)
eval_latents = model.smooth(eval_input)                 # held-out neurons are NaN: inferred from held-in ones
eval_rates = rates_of(eval_latents["z"].values)

# forward window: run the dynamics on from each trial's last inferred state
last_state = eval_latents["z"].values[:, -1]
ahead = model.model_.generate(N_FORWARD + 1, n_trials=len(last_state), z0=last_state)
forward_rates = ahead["x"].values[:, 1:]

scores = {
    "bits/spike (train, all neurons)": bits_per_spike(train_rates, train),
    "co-bps (eval, held-out neurons)": co_smoothing_bps(eval_rates, eval_observed, held_out),
    "fp-bps (eval, forward window)": forward_prediction_bps(forward_rates, eval_forward),
}
# the simulation's true rates (expected counts per bin) give the ceiling of each score
bins = np.arange(0, TRIAL_S, BIN_S)
true_rates = {c: np.exp(latent_path(c, bins) @ loading.T + baseline) * BIN_S for c in range(N_CONDITIONS)}
true_train = np.stack([true_rates[c] for c in train["condition"].values])
true_eval = np.stack([true_rates[c] for c in evaluation["condition"].values])
ceiling = {
    "bits/spike (train, all neurons)": bits_per_spike(true_train, train),
    "co-bps (eval, held-out neurons)": co_smoothing_bps(true_eval[:, :-N_FORWARD], eval_observed, held_out),
    "fp-bps (eval, forward window)": forward_prediction_bps(true_eval[:, -N_FORWARD:], eval_forward),
}
# PSTH R²: the per-condition averages of the inferred rates against the true PSTH
conditions_train = train["condition"].values
scores["psth R² (train)"] = psth_r2(train_rates, conditions_train, psth(true_train, conditions_train))
ceiling["psth R² (train)"] = 1.0
print(f"{'score':34s} {'model':>7s} {'truth':>7s}")
for key, value in scores.items():
    print(f"{key:34s} {value: 7.3f} {ceiling[key]: 7.3f}")

# %% [markdown]
# Positive bits per spike mean the model predicts the spikes better than each neuron's mean rate
# over the evaluated bins; co-bps scores neurons the model never saw on those trials. The "truth"
# column (the simulation's own rates) is the best any model can reach on these spikes. The
# forward window is the hardest: the null model there knows each neuron's mean over exactly those
# bins, while the model must run on 200 ms from its last inferred state. The training-set score is
# in-sample (the smoothed latents have seen those very spikes), so it can exceed the truth's; the
# held-out scores are the honest ones.

# %% [markdown]
# ## 6. Fixed points of the fitted dynamics

# %%
fixed = dsident.analysis.fixed_points(model)
for point, kind in zip(fixed.points[:, 0], fixed.kind):
    print(f"{kind:14s} z* = {np.round(point, 2)}")

# %% [markdown]
# ## 7. Figures

# %%
plot_raster_rates(train, train_rates, trial=0, held_out=held_out, save=OUT / "raster_rates.png",
                  title="trial 0: spikes and inferred rates")
plot_psth(train, "condition", rates=train_rates, neurons=[0, 1, 2, 3], save=OUT / "psth.png")
plot_latents_by_condition(train_latents, train["condition"].values, dims=(0, 1), save=OUT / "latents.png")
print(f"figures in {OUT}")
