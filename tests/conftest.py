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
