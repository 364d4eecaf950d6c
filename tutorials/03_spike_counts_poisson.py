# %% [markdown]
# # 3. Spike counts with the Poisson observation model
#
# Thirty neurons fire with rates `exp(C z + b)` driven by a hidden Lorenz-63 trajectory
# (`lorenz63_spikes`, which also ships the true latent path). We fit a PLRNN whose
# observation model is Poisson, infer the latent paths from the counts, and check them
# against the truth after the best affine map (the latent space of a fitted model is only
# defined up to such a map).
#
# `DSIDENT_FAST=1` runs everything on tiny settings in seconds (used by the test suite).

# %%
import os
from pathlib import Path

import numpy as np

import dsident
from dsident import plotting
from dsident.experiments import load_data

FAST = os.environ.get("DSIDENT_FAST") == "1"
OUT = Path(os.environ.get("DSIDENT_TUTORIAL_OUT", "tutorial_outputs")) / "03_spikes"
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Data: counts per 20 ms bin, shape (trial, time, neuron)

# %%
n_bins = 300 if FAST else 10_000
train = load_data("lorenz63_spikes", split="train", length=n_bins)
counts = train["x"].values[0]
print("counts:", counts.shape, "mean rate per bin:", counts.mean().round(3))

# %% [markdown]
# ## Model: PLRNN dynamics, Poisson observations with an exponential link
# Fitted by SVI (the variational engine handles any observation model). Laplace-EM with a
# Poisson likelihood (`method="laplace-em"`) is the rPLRNN paper's alternative.

# %%
est = dsident.models.PLRNN(latent_dim=3 if FAST else 6, observation="poisson", readout="linear", seed=0)
est.fit(train, method="svi", progress=not FAST,
        **(dict(n_steps=3, window=50, batch_size=4, eval_every=2) if FAST else dict(n_steps=3000, window=100)))

# %% [markdown]
# ## Inferred latents against the true Lorenz path

# %%
posterior = est.smooth(train)
z_hat = posterior["z"].values[0]
z_true = train["z_true"].values[0]
design = np.column_stack([z_hat, np.ones(len(z_hat))])
coef, *_ = np.linalg.lstsq(design, z_true, rcond=None)   # best affine map latent -> truth
aligned = design @ coef
r2 = 1 - ((z_true - aligned) ** 2).sum(0) / ((z_true - z_true.mean(0)) ** 2).sum(0)
print("R² of the affinely aligned latent per Lorenz coordinate:", np.round(r2, 3))

truth = dsident.as_dataset(z_true, dt=train.attrs["dt"], channel_names=["x", "y", "z"])
plotting.plot_time_series(truth, aligned, n_steps=min(n_bins, 1_000), save=OUT / "latent_vs_truth.png")
plotting.plot_latent_trajectories(posterior, save=OUT / "latents.png")
print("figures in", OUT)
