"""Small exact models shared by the metric and Lyapunov tests: z' = A z + C u, x = z."""
import numpy as np
import torch

from dsident import StateSpaceModel
from dsident.dynamics.base import LatentDynamics
from dsident.observations.base import ObservationModel


class MatrixDynamics(LatentDynamics):
    """z' = A z + C u in float64, with its (constant) Jacobian A."""

    def __init__(self, matrix, input_matrix=None):
        super().__init__()
        self.matrix, self.input_matrix = matrix, input_matrix
        self.latent_dim = len(matrix)
        self.input_dim = 0 if input_matrix is None else np.shape(input_matrix)[1]
        self.A = torch.nn.Parameter(torch.tensor(matrix, dtype=torch.float64))
        self.C = None if input_matrix is None else torch.nn.Parameter(torch.tensor(input_matrix, dtype=torch.float64))

    def step(self, z, u=None, dt=None):
        out = z @ self.A.T
        return out if u is None or self.C is None else out + u @ self.C.T

    def jacobian(self, z, u=None, dt=None):
        return self.A.expand(z.shape[0], -1, -1)


class IdentityObservation(ObservationModel):
    """x = z exactly."""

    def __init__(self, obs_dim):
        super().__init__()
        self.obs_dim = self.latent_dim = obs_dim

    def mean(self, z):
        return z

    def invert(self, x, mask=None):
        return x


def linear_model(matrix, input_matrix=None, dt=1.0):
    """A float64 StateSpaceModel with MatrixDynamics and IdentityObservation."""
    return StateSpaceModel(MatrixDynamics(matrix, input_matrix), IdentityObservation(len(matrix)), dt=dt).double()
