"""Teacher forcing of the continuous-time estimators whose likelihood reads part of the latent.

ODE-RFWP's fast weights and ORGaNICs' modulators are not determined by the data: the teacher
must force only the units the observation model reads and leave the rest running freely.
"""
import numpy as np
import pytest
import torch

from dsident.inference.forcing_alpha import make_teacher
from dsident.models.continuous import LatentFeatureObservation


@pytest.mark.parametrize("k", [3, 6])
def test_teacher_forces_only_the_units_the_likelihood_reads(k):
    # k = 6: every unit read (ORGaNICs with read_modulators=True); the teacher must still pin
    # only B's row space, not the whole state
    torch.manual_seed(0)
    obs = LatentFeatureObservation(2, 6, k, "identity", "gaussian", {"readout": "linear"}, fill_value=1.0)
    x = torch.randn(4, 5, 2)
    mask = torch.ones(4, 5, 2, dtype=torch.bool)
    mask[:, 2] = False                                   # time step 2 wholly missing
    teacher = make_teacher(obs, x, mask)
    z = torch.randn(4, 6)
    # 2 channels read k units through B (2, k): only B's row space is determined by the data
    B = obs.inner.B.detach().double().numpy()
    row_space = torch.as_tensor(np.linalg.pinv(B) @ B, dtype=z.dtype)
    for t, observed in ((1, True), (2, False)):
        forced = teacher.force(z, t, 0.5)
        torch.testing.assert_close(forced[:, k:], z[:, k:])          # unread units run freely
        delta = teacher.z_hat[:, t, :k] - z[:, :k]
        expected = z[:, :k] + 0.5 * delta @ row_space.T if observed else z[:, :k]
        torch.testing.assert_close(forced[:, :k], expected)
    # the read units are pulled towards a state whose readout reproduces the data
    torch.testing.assert_close(obs.mean(teacher.z_hat[:, 1]), x[:, 1], atol=1e-4, rtol=1e-4)
    # full forcing matches the data through the readout and keeps B's null-space component of z
    full = teacher.force(z, 1, 1.0)
    torch.testing.assert_close(obs.mean(full), x[:, 1], atol=1e-4, rtol=1e-4)
    null = torch.eye(k) - row_space
    torch.testing.assert_close(full[:, :k] @ null.T, z[:, :k] @ null.T, atol=1e-5, rtol=1e-5)


def test_teacher_with_a_square_readout_forces_every_read_unit():
    torch.manual_seed(1)
    obs = LatentFeatureObservation(3, 7, 3, "identity", "gaussian", {"readout": "linear"}, fill_value=0.0)
    x = torch.randn(2, 4, 3)
    teacher = make_teacher(obs, x, torch.ones(2, 4, 3, dtype=torch.bool))
    z = torch.randn(2, 7)
    forced = teacher.force(z, 1, 0.25)
    torch.testing.assert_close(forced[:, :3], 0.75 * z[:, :3] + 0.25 * teacher.z_hat[:, 1, :3], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(forced[:, 3:], z[:, 3:])


def test_rate_features_still_force_every_read_unit():
    # ORGaNICs' firing-rate readout is nonlinear: the read potentials are forced as a whole
    obs = LatentFeatureObservation(2, 6, 3, "rate", "gaussian", {"readout": "linear"}, fill_value=1.0)
    x = torch.rand(2, 4, 2)
    teacher = make_teacher(obs, x, torch.ones(2, 4, 2, dtype=torch.bool))
    z = torch.randn(2, 6)
    forced = teacher.force(z, 1, 0.5)
    torch.testing.assert_close(forced[:, :3], z[:, :3] + 0.5 * (teacher.z_hat[:, 1, :3] - z[:, :3]))
    torch.testing.assert_close(forced[:, 3:], z[:, 3:])


def test_one_projector_forces_every_sample_as_a_per_sample_projection_does():
    # every channel observed: one pattern, forced by a plain product instead of a gathered einsum
    torch.manual_seed(2)
    obs = LatentFeatureObservation(2, 6, 4, "identity", "gaussian", {"readout": "linear"}, fill_value=1.0)
    x = torch.randn(3, 5, 2, dtype=torch.float64)
    obs = obs.double()
    teacher = make_teacher(obs, x, torch.ones(3, 5, 2, dtype=torch.bool))
    assert teacher.projector.shape[0] == 1
    z = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    for alpha in (0.3, torch.tensor(0.3, dtype=torch.float64)):
        forced = teacher.force(z, 2, alpha)
        delta = teacher.z_hat[:, 2] - z
        per_sample = torch.stack([teacher.projector[0] @ delta[b] for b in range(3)])
        torch.testing.assert_close(forced, z + 0.3 * per_sample, rtol=1e-12, atol=1e-12)
    (g,) = torch.autograd.grad(forced.sum(), z)
    eye = torch.eye(6, dtype=torch.float64)
    torch.testing.assert_close(g, (eye - 0.3 * teacher.projector[0]).sum(0).expand(3, 6), rtol=1e-12, atol=1e-12)


def test_continuous_dynamics_are_refused_data_at_another_step_by_teacher_forcing_and_irregular_times_by_bptt():
    from dsident import StateSpaceModel
    from dsident.data import as_dataset
    from dsident.dynamics import PLRNN, GatedNODE
    from dsident.inference.bptt import fit_bptt
    from dsident.inference.teacher_forcing import fit_teacher_forcing
    from dsident.observations import Gaussian

    x = np.stack([np.sin(0.05 * np.arange(300)), np.cos(0.05 * np.arange(300))], -1)
    options = dict(n_epochs=1, batches_per_epoch=1, seq_len=20, eval_every=0, progress=False)

    def ode(dt):
        return StateSpaceModel(GatedNODE(2, seed=0), Gaussian(2, 2, readout="identity"), dt=dt)

    # an ODE stepped at 1.0 on data sampled at 0.05 learned a vector field 20 times too slow, unseen
    with pytest.raises(ValueError, match=r"`data` is sampled at dt=0.05 but the model's continuous-time dynamics "
                                         r"step with dt=1.0"):
        fit_teacher_forcing(ode(1.0), as_dataset(x, dt=0.05), **options)
    with pytest.raises(ValueError, match=r"`eval_data` is sampled at dt=1.0"):
        fit_teacher_forcing(ode(0.05), as_dataset(x, dt=0.05), **{**options, "eval_every": 1, "eval_steps": 50},
                            eval_data=as_dataset(x, dt=1.0))
    # a discrete map ignores dt, and irregular times set every step: both train as before
    discrete = StateSpaceModel(PLRNN(2, seed=0), Gaussian(2, 2, readout="identity"), dt=1.0)
    assert len(fit_teacher_forcing(discrete, as_dataset(x, dt=0.05), **options)["train_loss"]) == 1
    times = np.cumsum(np.random.default_rng(0).uniform(0.02, 0.08, 300))
    irregular = as_dataset(x, time=times)
    model = ode(float(irregular.attrs["dt"]))
    assert len(fit_teacher_forcing(model, irregular, **options)["train_loss"]) == 1
    # BPTT's windows step at the model's dt whatever the sampling times said
    with pytest.raises(ValueError, match="irregular sampling times .* which BPTT does not use"):
        fit_bptt(model, irregular, n_epochs=1, seq_len=20, progress=False)
