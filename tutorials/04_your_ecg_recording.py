# %% [markdown]
# # 4. Your own recording, end to end: an ECG array
#
# From a plain array of samples and a sampling rate to a fitted model, its scores and its
# figures — the path a lab takes with its own data. Here the "recording" is a synthetic ECG
# saved as `.npy` (so the tutorial runs offline); put your own file in its place.
#
# The same pipeline from the command line::
#
#     dsident inspect my_ecg.npy --dt 0.002857     # what the file holds, before a fit
#     dsident fit my_ecg_embedded.nc --model shplrnn --method bptt --out fits/ecg
#     dsident evaluate fits/ecg my_ecg_test.nc
#     dsident generate fits/ecg --steps 20000
#
# A raw array in its own units works too: `dsident fit my_recording.npy --dt 0.00143 --zscore
# --test-fraction 0.3 ...` standardises it with the first 70 % (the constants are saved with
# the fit) and scores the model on the last 30 %, which the fit never saw.
#
# A PhysioNet record (WFDB: `100.hea` with its `100.dat`) is read as it is, in its physical
# units, its invalid samples masked: `dsident inspect 100.hea --read channels=MLII`, or
# `dsident.data.load_any("100.hea", channels=["MLII"])` in place of the array below (needs the
# `ecg` extra: `pip install 'dsident[ecg]'`).
#
# `DSIDENT_FAST=1` runs everything on tiny settings in seconds (used by the test suite).

# %%
import os
from pathlib import Path

import numpy as np

import dsident
from dsident import metrics, plotting
from dsident.data import ecg

FAST = os.environ.get("DSIDENT_FAST") == "1"
OUT = Path(os.environ.get("DSIDENT_TUTORIAL_OUT", "tutorial_outputs")) / "04_ecg"
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. The recording: one lead, 350 Hz

# %%
seconds = 20 if FAST else 300
signal = ecg.synthetic_ecg(seconds, sampling_rate=350.0, seed=1)["x"].values[0, :, 0]
np.save(OUT / "my_ecg.npy", signal)                      # stands in for your own file
recording = ecg.from_array(np.load(OUT / "my_ecg.npy"), sampling_rate=350.0, name="my_ecg")
print(recording.sizes, "dt =", recording.attrs["dt"], "s")

# %% [markdown]
# Before fitting anything, what does the file hold as dsident reads it? `describe` gives the
# sizes, the sampling step and its unit (seconds: the rate was given in Hz), each channel's
# statistics and period (here one heartbeat), and notes on what would hurt a fit or a score
# (a constant channel, channels on very different scales, missing samples, an evaluation window
# that spans few periods of the slowest rhythm); this clean lead has none.

# %%
from dsident.data.summary import describe, describe_markdown

summary = describe(recording)
print(describe_markdown(summary))
beat = summary["per_channel"][0]["period"]
print(f"one heartbeat every {beat:.3g} s: {60 / beat:.0f} beats per minute")

# %% [markdown]
# ## 2. Preprocessing: resample to 700 Hz, z-score, smooth, delay-embed
# `delays="auto"` chooses a uniform embedding from the average mutual information and false
# nearest neighbours and records the choice in `attrs["preprocessing"]`; the published ECG
# benchmark used the fixed delays (0, 20, 68, 55, 10) samples at 700 Hz (the default).

# %%
embedded = ecg.ecg_pipeline(recording, sampling_rate=700.0)
n = embedded.sizes["time"]
train, test = ecg.split_contiguous(embedded, int(0.7 * n))
print("embedded:", embedded.sizes, "train", train.sizes["time"], "test", test.sizes["time"])
dsident.data.save_dataset(train, OUT / "my_ecg_embedded.nc")   # the files the command-line route above reads
dsident.data.save_dataset(test, OUT / "my_ecg_test.nc")

# %% [markdown]
# ## 3. Fit, score, draw
# A shallow PLRNN with the identity readout (one latent unit per embedding coordinate plus
# hidden ones), trained by BPTT on short windows.

# %%
channels = embedded.sizes["channel"]
est = dsident.models.ShallowPLRNN(latent_dim=channels, hidden_dim=16 if FAST else 100, seed=0)
est.fit(train, method="bptt", progress=not FAST,
        **(dict(n_epochs=1, seq_len=20) if FAST else dict(n_epochs=150, seq_len=50, lr=3e-3, lr_end=3e-4)))
test_eval = test.isel(time=slice(0, min(test.sizes["time"], 10_000)))
scores = metrics.evaluate(est, test_eval)
print({name: round(float(scores[name]), 4) for name in ("state_space_divergence", "power_spectrum_distance",
                                                         "prediction_error")}, "diverged:", bool(scores.diverged))
generated = est.generate(test_eval.sizes["time"], x0=test_eval["x"].values[0, 0], seed=0)
plotting.plot_reconstruction(test_eval, generated, save=OUT / "reconstruction.png")
plotting.plot_power_spectra(test_eval, generated, save=OUT / "spectra.png")
est.save(OUT / "model")                                  # reload with ShallowPLRNN.load(...)
print("model and figures in", OUT)

# %% [markdown]
# ## 4. A rhythm slower than the windows: breathing
# A recording with respiratory baseline wander carries a 4 s rhythm that a 0.1 s embedding
# cannot hold. `dsident.data.add_slow_channels` hands it to the model as two more observed
# channels (the embedding's channel 0 below 0.4 Hz, or 0.6 Hz for a short recording, and its
# quadrature), which `metrics.evaluate` does not score; the test split reuses the training
# split's scale. On the shipped ECG this took the benchmark cell from D_stsp 6.83 to 2.19,
# and 300 epochs to 2.06, within 3× the floor (docs/teacher_forcing.md, "The breathing as two
# slow channels"). Each trial must span three periods of the cutoff (7.5 s at 0.4 Hz). The
# filter needs samples on both sides: the test split is filtered across the training split it
# continues (`before=train`), and the series' remaining ends are continued by a forecast of the
# slow band (`edges="predict"`, the default; docs/data.md "Slow channels").

# %%
seconds = min(train.sizes["time"], test_eval.sizes["time"]) * float(train.attrs["dt"])
cutoff = 0.4 if seconds >= 3 / 0.4 else 0.6        # a short recording: a 0.6 Hz band needs 5 s
if seconds >= 3 / cutoff:
    train_slow, slow = dsident.data.add_slow_channels(train, cutoff=cutoff)
    # the test split continues the training split: filter across the join, then cut
    test_slow, _ = dsident.data.add_slow_channels(test, cutoff=cutoff, scale=slow["scale"], before=train)
    test_slow = test_slow.isel(time=slice(0, test_eval.sizes["time"]))
    breathing = dsident.models.ShallowPLRNN(latent_dim=channels + 2, hidden_dim=16 if FAST else 100, seed=0)
    breathing.fit(train_slow, method="bptt", progress=not FAST,
                  **(dict(n_epochs=1, seq_len=20) if FAST else dict(n_epochs=150, seq_len=50, lr=3e-3, lr_end=3e-4)))
    slow_scores = metrics.evaluate(breathing, test_slow)             # the ECG channels only
    print(f"with slow channels below {cutoff} Hz:", round(float(slow_scores.state_space_divergence), 4),
          "scored channels:", [str(c) for c in slow_scores["channel"].values])
else:
    print(f"the recording ({seconds:.1f} s) is too short for a slow band; skipped")

# %% [markdown]
# ## 5. Where the model misses, and from which starts
# The binned D_stsp is almost all "test samples in bins the free run never visits":
# `scores.state_space_coverage` is the share it does visit (D_stsp ≈ 12 × (1 − coverage) at
# 10 000 samples), and `metrics.state_space_coverage(..., per_sample=True)` marks each test
# sample, so you can see whether the misses sit on the fast QRS complexes or on the slow rest
# of the beat. `metrics.evaluate_starts` repeats the whole protocol from several starts spread
# over the test data: a model that settles on a fixed point from some states shows up as
# `at_rest`, and the spread says how much one stretch's score can be trusted
# (docs/metrics.md; `dsident evaluate fits/ecg my_ecg_test.nc --starts 8`).

# %%
print("coverage of the test stretch:", round(float(scores.state_space_coverage), 3))
_, scored_run = metrics.evaluate(est, test_eval, return_run=True)
covered = metrics.state_space_coverage(test_eval, scored_run, per_sample=True)[0]
r_peaks = np.flatnonzero(test_eval["x"].values[0, :, 0] > np.percentile(test_eval["x"].values[0, :, 0], 98))
near = np.zeros(covered.shape, dtype=bool)
for offset in range(-30, 31):                              # ±30 samples (±43 ms) around the tallest samples
    near[np.clip(r_peaks + offset, 0, covered.size - 1)] = True
print(f"uncovered near the R peaks: {1 - np.nanmean(covered[near]):.2f}, elsewhere: {1 - np.nanmean(covered[~near]):.2f}")
window = min(test.sizes["time"] // 2, 10_000)
starts = metrics.evaluate_starts(est, test, n_starts=3 if FAST else 8, length=window)
print("D_stsp per start:", np.round(starts.state_space_divergence.values, 3),
      f"at rest: {starts.attrs['fraction_at_rest']:.0%}, diverged: {starts.attrs['fraction_diverged']:.0%}")
