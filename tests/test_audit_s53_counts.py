"""Audit s53: spike counts end to end (observation models, the count notes of the verbs)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest


def test_benchmark_on_a_file_of_counts_with_the_gaussian_default_warns_as_fit_does(tmp_path):
    """`dsident fit` warned that a Gaussian fit of spike counts models the wrong thing;
    `dsident benchmark` on the same file said nothing."""
    from dsident.cli import main

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "counts.npz", x=rng.poisson(1.0, size=(1500, 6)).astype(float), dt=0.01)
    grid = ["benchmark", "--datasets", str(tmp_path / "counts.npz"), "--models", "shplrnn", "--seeds", "1",
            "--out", str(tmp_path / "bench"), "--dry-run", "--no-progress"]
    with pytest.warns(UserWarning, match=r"counts\.npz.*every channel holds counts .* --param observation=poisson"):
        assert main(grid) == 0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main([*grid, "--param", "observation=poisson"]) == 0
    assert not any("holds counts" in str(w.message) for w in seen)
    np.savez(tmp_path / "signal.npz", x=rng.normal(size=(1500, 2)).cumsum(axis=0) * 0.1, dt=0.01)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main([*grid[:2], str(tmp_path / "signal.npz"), *grid[3:]]) == 0
    assert not any("holds counts" in str(w.message) for w in seen)
