# %% [markdown]
# # 2. A latent LTC (or gnODE) fitted with SVI on the bursting neuron
#
# The bursting neuron of Durstewitz (2009) spikes fast (a few samples apart) on top of a slow
# ≈ 150 ms burst cycle: a multiple-time-scale limit cycle. We fit a continuous-time latent
# model — a liquid time-constant network (LTC; Hasani et al. 2021) — as a stochastic
# state-space model by stochastic variational inference (pyro, structured Markov guide), then
# look at the smoothed latent paths, the free run and the scores. Replace `LTC` by
# `GatedNODE` for the gated neural ODE (Kim et al. 2023); nothing else changes.
#
# `DSIDENT_FAST=1` runs everything on tiny settings in seconds (used by the test suite).

# %%
import os
from pathlib import Path

import dsident
from dsident import metrics, plotting
from dsident.experiments import load_data

FAST = os.environ.get("DSIDENT_FAST") == "1"
OUT = Path(os.environ.get("DSIDENT_TUTORIAL_OUT", "tutorial_outputs")) / "02_bursting_neuron"
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Data: V, n, h sampled every 0.5 ms, z-scored

# %%
n_train, n_test = (400, 300) if FAST else (20_000, 10_000)
train = load_data("bursting_neuron", split="train", length=n_train)
test = load_data("bursting_neuron", split="test", length=n_test)
print(train.sizes, "dt =", train.attrs["dt"], "ms")

# %% [markdown]
# ## Model and SVI
# The LTC's state follows `dz/dt = -[1/τ + f(z)] z + f(z) A` (integrated with the fused
# semi-implicit step between samples); observations are a linear readout of the latent plus
# Gaussian noise. SVI trains the model and an amortised guide q(z_t | z_{t-1}, x) on random
# windows; `device="auto"` uses a GPU when there is one.

# %%
model_cls = dsident.models.LTC          # or dsident.models.GatedNODE
est = model_cls(latent_dim=4 if FAST else 12, seed=0)
svi_options = (dict(n_steps=3, window=50, batch_size=4, eval_every=2) if FAST
               else dict(n_steps=3000, window=200, batch_size=32))
est.fit(train, method="svi", progress=not FAST, **svi_options)

# %% [markdown]
# ## Smoothed latents, free run, scores

# %%
posterior = est.smooth(test.isel(time=slice(0, min(n_test, 2_000))))
plotting.plot_latent_trajectories(posterior, save=OUT / "smoothed_latents.png")

scores = metrics.evaluate(est, test)
print({name: round(float(scores[name]), 4) for name in ("state_space_divergence", "power_spectrum_distance",
                                                         "prediction_error")}, "diverged:", bool(scores.diverged))
generated = est.generate(n_test, x0=test["x"].values[0, 0], seed=0)
plotting.plot_time_series(test, generated, n_steps=min(n_test, 3_000), save=OUT / "time_series.png")
plotting.plot_power_spectra(test, generated, save=OUT / "spectra.png")
print("figures in", OUT)
