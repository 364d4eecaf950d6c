"""Every tutorial runs end to end in fast mode (DSIDENT_FAST=1) and writes its figures; none is left unlisted."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each is a fresh interpreter importing torch and pyro: ~10-50 s

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"

#: tutorial -> figures it must write (relative to its output folder)
EXPECTED = {
    "01_lorenz63_rplrnn_fixed_points.py": ["01_lorenz63/reconstruction.png", "01_lorenz63/flow_field.png"],
    "02_bursting_neuron_ltc_svi.py": ["02_bursting_neuron/smoothed_latents.png", "02_bursting_neuron/spectra.png"],
    "03_spike_counts_poisson.py": ["03_spikes/latent_vs_truth.png"],
    "04_your_ecg_recording.py": ["04_ecg/reconstruction.png", "04_ecg/model"],
    "05_spikes_nwb.py": ["raster_rates.png", "psth.png", "latents.png"],
    "06_bursting_voltage_slow_channels.py": ["06_bursting_voltage/bursts.png",
                                             "06_bursting_voltage/fit/reconstruction.png",
                                             "06_bursting_voltage/fit/config.json"],
}


def test_every_tutorial_is_listed():
    """A new tutorial must be added to EXPECTED (and so run in CI)."""
    mine = {p.name for p in TUTORIALS.glob("[0-9][0-9]_*.py")}
    assert mine == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tutorial_runs_in_fast_mode(name, tmp_path):
    env = {**os.environ, "DSIDENT_FAST": "1", "DSIDENT_TUTORIAL_OUT": str(tmp_path), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(TUTORIALS / name)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rel in EXPECTED[name]:
        assert (tmp_path / rel).exists(), f"{name} did not write {rel}"
