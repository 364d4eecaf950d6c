"""Teacher forcing of the continuous-time estimators whose likelihood reads part of the latent.

ODE-RFWP's fast weights and ORGaNICs' modulators are not determined by the data: the teacher
must force only the units the observation model reads and leave the rest running freely.
"""
import torch

from dsident.inference.forcing_alpha import make_teacher
from dsident.models.continuous import LatentFeatureObservation


def test_teacher_forces_only_the_units_the_likelihood_reads():
    torch.manual_seed(0)
    obs = LatentFeatureObservation(2, 6, 3, "identity", "gaussian", {"readout": "linear"}, fill_value=1.0)
    x = torch.randn(4, 5, 2)
    mask = torch.ones(4, 5, 2, dtype=torch.bool)
    mask[:, 2] = False                                   # time step 2 wholly missing
    teacher = make_teacher(obs, x, mask)
    z = torch.randn(4, 6)
    for t, observed in ((1, True), (2, False)):
        forced = teacher.force(z, t, 0.5)
        torch.testing.assert_close(forced[:, 3:], z[:, 3:])          # unread units run freely
        expected = z[:, :3] + 0.5 * (teacher.z_hat[:, t, :3] - z[:, :3]) if observed else z[:, :3]
        torch.testing.assert_close(forced[:, :3], expected)
    # the read units are pulled towards a state whose readout reproduces the data
    torch.testing.assert_close(obs.mean(teacher.z_hat[:, 1]), x[:, 1], atol=1e-4, rtol=1e-4)
