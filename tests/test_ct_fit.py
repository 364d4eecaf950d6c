"""A short deterministic BPTT fit of each continuous-time estimator reduces the loss on Lorenz data."""
import numpy as np
import pytest
import torch

pytest.importorskip("dsident.inference.bptt")

from dsident.data import as_dataset  # noqa: E402
from dsident.data.systems import get_system, simulate  # noqa: E402
from dsident.models.continuous import GatedNODE, LatentFeatureObservation, LTC, ORGaNICs, RecurrentFWP  # noqa: E402


@pytest.fixture(scope="module")
def lorenz_window():
    x = simulate(get_system("lorenz63"), 240, 0.01, transient=5.0, seed=0)
    x = (x - x.mean(0)) / x.std(0)
    return as_dataset(x.reshape(4, 60, 3), dt=0.01, name="lorenz63-window")


ESTIMATORS = {
    "GatedNODE": lambda: GatedNODE(5, hidden_dim=16, seed=0),
    "LTC": lambda: LTC(5, n_substeps=3, seed=0),
    "RecurrentFWP": lambda: RecurrentFWP(4, n_heads=2, hidden_dim=16, seed=0),
    "ORGaNICs": lambda: ORGaNICs(5, seed=0),
}
OPTIONS = {"n_epochs": 5, "seq_len": 20, "batch_size": 8, "lr": 1e-2, "progress": False, "val_fraction": 0.0}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_bptt_fit_reduces_the_loss_and_is_deterministic(name, lorenz_window):
    options = {**OPTIONS, "lr": 5e-2} if name == "LTC" else OPTIONS     # the LTC paper: larger rates for LTCs
    first = ESTIMATORS[name]().fit(lorenz_window, method="bptt", **options)
    losses = np.asarray(first.history_["train_loss"], dtype=float)
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.95 * losses[0], losses
    again = ESTIMATORS[name]().fit(lorenz_window, method="bptt", **options)
    assert np.allclose(again.history_["train_loss"], losses)
    gen = first.generate(30, seed=0)
    assert gen["x"].shape == (1, 30, 3) and gen.attrs["diverged"] == 0


def test_observations_read_only_the_observed_part_of_the_latent(lorenz_window):
    rfwp = RecurrentFWP(4, n_heads=2, hidden_dim=8, fast_weight_noise=1e-5, seed=0).fit(lorenz_window, method="bptt",
                                                                 **{**OPTIONS, "n_epochs": 1})
    obs = rfwp.model_.observation
    assert isinstance(obs, LatentFeatureObservation) and obs.n_read == 4 and obs.latent_dim == 4 + 2 * 2 * 2
    z = torch.randn(3, obs.latent_dim)
    z2 = z.clone()
    z2[:, 4:] += 5.0                                   # changing the fast weights leaves x unchanged
    assert torch.allclose(obs.mean(z), obs.mean(z2))
    # process noise acts on the vector part; the fast weights get their own small variance
    var = rfwp.model_.process_var.detach()
    assert float(var[4:].max()) < 1e-3 < float(var[:4].min())
    assert rfwp.get_params()["process_noise"] == 0.01          # the hyperparameter is untouched by fit
    org = ORGaNICs(5, seed=0).fit(lorenz_window, method="bptt", **{**OPTIONS, "n_epochs": 1})
    obs = org.model_.observation
    z = torch.randn(3, 10)
    assert torch.allclose(obs.mean(z), obs.inner.mean(torch.relu(z[:, :5]) ** 2))


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_default_svi_fit_runs_and_smooths_the_full_latent(name, lorenz_window):
    pytest.importorskip("dsident.inference.svi")
    est = ESTIMATORS[name]()
    assert est.default_method == "svi"
    est.fit(lorenz_window, n_steps=6, window=20, batch_size=4, progress=False, eval_every=3)
    assert np.isfinite(np.asarray(est.history_["loss"], dtype=float)).all()
    smoothed = est.smooth(lorenz_window)
    assert smoothed["z"].shape == (4, 60, est.model_.latent_dim)


def test_save_and_load_keep_the_wrapped_observation(lorenz_window, tmp_path):
    est = ORGaNICs(4, seed=1).fit(lorenz_window, method="bptt", **{**OPTIONS, "n_epochs": 1})
    est.save(tmp_path / "organics")
    back = ORGaNICs.load(tmp_path / "organics")
    assert isinstance(back.model_.observation, LatentFeatureObservation)
    a, b = est.generate(20, seed=3), back.generate(20, seed=3)
    assert np.allclose(a["x"].values, b["x"].values) and np.allclose(a["z"].values, b["z"].values)


def test_rfwp_tau_fast_reaches_the_dynamics_and_survives_save_and_load(lorenz_window, tmp_path):
    est = RecurrentFWP(4, n_heads=2, hidden_dim=8, tau=0.02, tau_fast=0.3, seed=0).fit(
        lorenz_window, method="bptt", **{**OPTIONS, "n_epochs": 1})
    assert est.model_.dynamics.tau == 0.02 and est.model_.dynamics.tau_fast == 0.3
    est.save(tmp_path / "rfwp")
    back = RecurrentFWP.load(tmp_path / "rfwp")
    assert back.model_.dynamics.tau_fast == 0.3 and back.tau_fast == 0.3
    np.testing.assert_allclose(back.generate(20, seed=1)["x"].values, est.generate(20, seed=1)["x"].values)
    # tau=None is the sampling step; tau_fast=None follows tau
    default = RecurrentFWP(4, n_heads=2, hidden_dim=8, seed=0).fit(lorenz_window, method="bptt",
                                                                   **{**OPTIONS, "n_epochs": 1})
    assert default.model_.dynamics.tau == 0.01 and default.model_.dynamics.tau_fast is None


def test_organics_can_read_its_modulators(lorenz_window):
    org = ORGaNICs(3, rate_readout=False, read_modulators=True, seed=0).fit(
        lorenz_window, method="bptt", **{**OPTIONS, "n_epochs": 1})
    obs = org.model_.observation
    assert obs.n_read == obs.latent_dim == 6
    z = torch.randn(4, 6)
    z2 = z.clone()
    z2[:, 3:] += 1.0                                   # the modulators now move the prediction
    assert not torch.allclose(obs.mean(z), obs.mean(z2))
    torch.testing.assert_close(obs.mean(z), obs.inner.mean(z))
    with pytest.raises(ValueError, match="read_modulators.*rate_readout=False"):
        ORGaNICs(3, read_modulators=True).fit(lorenz_window, method="bptt", **{**OPTIONS, "n_epochs": 1})
    with pytest.raises(TypeError, match="read_modulators"):
        ORGaNICs(3, rate_readout=False, read_modulators="yes").fit(lorenz_window, method="bptt", **OPTIONS)


@pytest.mark.parametrize("params, fragment", [({"n_heads": 0}, "`n_heads` must be an integer >= 1; got n_heads=0"),
                                              ({"n_heads": 2.5}, "got n_heads=2.5"),
                                              ({"head_dim": 0}, "`head_dim` must be an integer >= 1 or None"),
                                              ({"head_dim": True}, "got head_dim=True"),
                                              # audit-s53: a negative latent_dim failed in numpy's broadcast
                                              ({"latent_dim": -2}, "`latent_dim` must be an integer >= 1; got latent_dim=-2")])
def test_rfwp_names_a_head_count_or_size_that_cannot_size_its_fast_weights(params, fragment, lorenz_window):
    est = RecurrentFWP(**{"latent_dim": 4, **params})
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        est.fit(lorenz_window, method="bptt", n_epochs=1, progress=False)
    assert not hasattr(est, "model_")
