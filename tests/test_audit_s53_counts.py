"""Audit s53: spike counts end to end (observation models, the count notes of the verbs)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch


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


@pytest.mark.parametrize("name", ["poisson", "bernoulli", "gaussian"])
def test_data_and_latents_of_different_lengths_are_refused_by_name(name):
    """x of 5 bins with z of 4 states failed inside torch ("The size of tensor a (5) must match
    ..."); the message now names `x` and `z` and their shapes."""
    from dsident.observations import make_observation

    obs = make_observation(name, 3, 2)
    x, z = torch.ones(5, 3), torch.zeros(4, 2)
    for method in (obs.log_prob, obs.grad_log_prob, obs.hess_log_prob):
        with pytest.raises(ValueError, match=r"`x` \(5,\) and `z` \(4,\)"):
            method(x, z)
    # a leading sample dimension of z still broadcasts against the data
    assert obs.log_prob(torch.ones(4, 3), torch.zeros(7, 4, 2)).shape == (7, 4)


def test_numpy_integer_sizes_are_accepted_and_booleans_refused():
    """bin_size=np.int64(2) (read from a config or an array) was refused as "not a positive finite
    bin width", while bin_size=True was taken as 1.0; likewise Gaussian's noise_var."""
    from dsident.observations import Gaussian, Poisson

    obs = Poisson(3, 2, bin_size=np.int64(2))
    assert obs.bin_size == 2.0 and isinstance(obs.bin_size, float)
    # the rate per bin is the rate per unit time times the bin: exp(0) * 2
    assert torch.allclose(obs.rate(torch.zeros(1, 2)), torch.full((1, 3), 2.0))
    assert Gaussian(3, 2, noise_var=np.int32(3)).noise_var == 3.0
    for bad in (True, np.bool_(True)):
        with pytest.raises(ValueError, match="`bin_size` must be a positive finite bin width"):
            Poisson(3, 2, bin_size=bad)
        with pytest.raises(ValueError, match="`noise_var` must be a positive finite variance"):
            Gaussian(3, 2, noise_var=bad)
