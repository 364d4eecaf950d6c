"""Suite-wide settings.

The suite runs with two pytest-xdist workers on two cores; each worker uses one torch thread,
because small sequential models run many times slower when two workers' thread pools compete.
"""
import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def irregular_gnode():
    """A float64 gnODE read by an identity readout (dt 0.1) and two ragged trials of random
    observations at uneven times: ``(model, times, trials, dataset)``, for the routes that must
    step over each actual gap."""
    import numpy as np

    import dsident
    from dsident.dynamics import GatedNODE
    from dsident.model import StateSpaceModel
    from dsident.observations import Gaussian

    dynamics = GatedNODE(2, hidden_dim=8, gate_hidden_dim=8, tau=0.3, method="rk4", seed=0)
    model = StateSpaceModel(dynamics, Gaussian(2, 2, readout="identity"), dt=0.1).double()
    times = [np.array([0.0, 0.1, 0.4, 0.45, 0.9, 1.0]), np.array([0.0, 0.2, 0.25, 0.3])]
    rng = np.random.default_rng(0)
    trials = [rng.normal(size=(len(t), 2)) for t in times]
    return model, times, trials, dsident.as_dataset(trials, time=times)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A folder written by ``dsident fit lorenz63`` with the tiny CLI fit (one per test module)."""
    from cli_tiny import TINY

    from dsident.cli import main

    out = tmp_path_factory.mktemp("fit") / "run"
    assert main(["fit", "lorenz63", *TINY, "--out", str(out)]) == 0
    return out
