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
