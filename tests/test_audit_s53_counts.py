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


def _rotating_counts(n=400, n_neurons=10, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 0.05
    z = np.stack([np.sin(t), np.cos(t)], 1)
    return rng, rng.poisson(np.exp(z @ rng.normal(size=(2, n_neurons)) * 0.5 + 0.5)).astype(float)


def _laplace_poisson(x, **options):
    import dsident
    from dsident import as_dataset

    est = dsident.models.PLRNN(latent_dim=3, observation="poisson", readout="linear", seed=0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        est.fit(as_dataset(x, dt=0.01), method="laplace-em", progress=False, restarts=0, **options)
    return est, [str(w.message) for w in seen]


def test_laplace_em_starts_a_poisson_model_from_log_rates_so_a_busy_neuron_does_not_overflow():
    """The LDS start of laplace-em took the PCA of the raw counts, so b was the mean count and the
    rate exp(mean count): a neuron of ~240 spikes per bin overflowed, the first E-step failed, and
    the fit returned that start (b = 240, rates of e^240) with only a warning."""
    rng, x = _rotating_counts()
    x[:, 8] = rng.poisson(240.0, size=len(x))
    est, said = _laplace_poisson(x, n_iter_per_stage=3, anneal=(1.0,), check_steps=2000)
    assert not est.history_["diverged"], est.history_["message"]
    assert not any("diverged" in s for s in said)
    # exp link, linear readout: the fitted rate of a neuron without modulation is its mean count
    obs = est.model_.observation
    z = torch.as_tensor(est.smooth(x[None])["z"].values[0], dtype=obs.B.dtype)
    assert float(obs.rate(z)[:, 8].mean().detach()) == pytest.approx(x[:, 8].mean(), rel=0.05)


def test_laplace_em_keeps_its_annealing_with_a_silent_neuron():
    """A silent neuron (all counts 0) gave the bounded selection a box of width 1e-6 around 0 that
    every positive expected count leaves: the first stage warned that no free run stayed in the
    data's range and the annealing stopped after it."""
    _, x = _rotating_counts()
    x[:, 7] = 0.0
    est, said = _laplace_poisson(x, n_iter_per_stage=3, anneal=(1.0, 0.1), check_steps=2000)
    assert not any("data's range" in s for s in said), said
    assert est.history_["annealing_stopped"] is None
    assert sorted(set(est.history_["stage"])) == [0, 1]
    assert est.history_["stage_exit"][0][est.history_["stage_kept"][0]] == -1
    # a box of counts is at least one count wide; a continuous channel keeps its own range
    from dsident.inference.laplace_em.selection import data_box

    box = data_box(np.zeros((5, 2)) + [0.0, 3.0], np.ones((5, 2), dtype=bool), 1.0, min_width=1.0)
    assert np.allclose(box.lo, [-1.0, 2.0]) and np.allclose(box.hi, [1.0, 4.0])


def test_teacher_forcing_scores_a_count_models_free_runs_by_draws_as_evaluate_does():
    """The epoch kept by teacher forcing / BPTT was chosen by the D_stsp of the expected counts,
    which sit between the integers the data take; `evaluate` scores a count model's draws, so the
    kept epoch was chosen by another number than the test's."""
    import dsident
    from dsident import as_dataset
    from dsident.inference.teacher_forcing import _FreeRunScorer
    from dsident.metrics import state_space_divergence

    _, x = _rotating_counts(n=300, n_neurons=4)
    ds = as_dataset(x, dt=0.01)
    est = dsident.models.PLRNN(latent_dim=3, observation="poisson", readout="linear", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(ds, method="bptt", progress=False, n_epochs=1, seq_len=20)
    scorer = _FreeRunScorer(ds, eval_steps=200, burn_in=50)
    gen = scorer.free_run(est.model_, seed=3)["x"].values[0]
    assert np.all(gen == np.round(gen)) and gen.min() >= 0
    draws = est.model_.generate(250, x0=x[0], seed=3, observation_noise=True)["x"].values[0, 50:]
    assert scorer.score(est.model_, seed=3)[0] == pytest.approx(state_space_divergence(x[:200], draws))


def test_fit_without_a_test_split_writes_a_count_models_free_run_as_draws(tmp_path):
    """`dsident fit` of a Poisson model on a file without a test split wrote generated.nc (and
    the reconstruction figure) as expected counts, while `dsident generate` writes draws."""
    import xarray as xr

    from dsident.cli import main

    _, x = _rotating_counts(n=300, n_neurons=4)
    np.savez(tmp_path / "counts.npz", x=x, dt=0.01)
    assert main(["fit", str(tmp_path / "counts.npz"), "--model", "shplrnn", "--method", "bptt", "--param",
                 "hidden_dim=8", "--param", "observation=poisson", "--param", "readout=linear", "--option",
                 "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--out", str(tmp_path / "fit")]) == 0
    gen = xr.load_dataset(tmp_path / "fit" / "generated.nc")["x"].values
    assert np.isfinite(gen).all() and np.all(gen == np.round(gen)) and gen.min() >= 0
