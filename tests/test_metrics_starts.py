"""The protocol from many starts: windows placed as documented, each scored exactly as
`evaluate` scores it, and runs that settle or diverge from some starts counted."""
import numpy as np
import pytest
import torch

import dsident
from dsident import StateSpaceModel
from dsident.metrics import evaluate, evaluate_starts
from linear_helpers import IdentityObservation, MatrixDynamics, linear_model

ANGLE = 2 * np.pi / 37.3


def _rotation(angle, radius=1.0):
    return radius * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


def _orbit(n, radius=1.0, phase=0.0):
    k = np.arange(n)
    return radius * np.stack([np.cos(phase + k * ANGLE), np.sin(phase + k * ANGLE)], axis=1)


class InnerCollapse(MatrixDynamics):
    """Rotates states of radius >= 0.5; shrinks smaller ones by half each step (to rest at 0)."""

    def step(self, z, u=None, dt=None):
        rotated = z @ self.A.T
        inside = (torch.linalg.norm(z, dim=-1, keepdim=True) < 0.5).to(z.dtype)
        return rotated * (1 - 0.5 * inside)


def test_windows_are_evenly_spaced_and_scored_as_evaluate_scores_them():
    data = dsident.as_dataset(_orbit(2000), dt=0.1)
    model = linear_model(_rotation(ANGLE), dt=0.1)
    res = evaluate_starts(model, data, n_starts=4, length=500)
    # positions 0..1500: four evenly spaced starts
    np.testing.assert_array_equal(res.start_index.values, [0, 500, 1000, 1500])
    np.testing.assert_array_equal(res.trial.values, [0, 0, 0, 0])
    for k, start in enumerate(res.start_index.values):
        by_hand = evaluate(model, dsident.as_dataset(_orbit(2000)[start:start + 500], dt=0.1), pe_steps=1)
        assert float(res.state_space_divergence[k]) == pytest.approx(float(by_hand.state_space_divergence), abs=1e-12)
        assert float(res.power_spectrum_distance[k]) == pytest.approx(float(by_hand.power_spectrum_distance), abs=1e-12)
        assert float(res.state_space_coverage[k]) == float(by_hand.state_space_coverage)
    assert not res.at_rest.any() and not res.diverged.any()
    assert res.attrs["fraction_at_rest"] == 0.0 and res.attrs["length"] == 500
    assert res.attrs["median_D_stsp"] == pytest.approx(float(np.median(res.state_space_divergence)))


def test_a_model_that_settles_from_some_starts_is_caught():
    # trial 0 circles at radius 1, trial 1 at radius 0.4; the model keeps the outer circle but
    # collapses inside radius 0.5, so its runs from trial 1 settle at 0 while evaluate's single
    # start (trial 0's first sample for a one-trial test) would never see it
    data = dsident.as_dataset(np.stack([_orbit(1000), _orbit(1000, radius=0.4, phase=1.0)]), dt=0.1)
    model = StateSpaceModel(InnerCollapse(_rotation(ANGLE)), IdentityObservation(2), dt=0.1).double()
    with pytest.warns(RuntimeWarning, match="overlap"):            # 4 fit side by side; 6 asked for
        res = evaluate_starts(model, data, n_starts=6, length=400)
    # 601 positions per trial, 1202 in all: starts spread over both trials
    np.testing.assert_array_equal(res.trial.values, [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(res.at_rest.values, res.trial.values == 1)
    assert res.attrs["fraction_at_rest"] == pytest.approx(0.5)
    assert (res.state_space_divergence.values[res.trial.values == 1] > 5).all()
    assert (res.state_space_coverage.values[res.trial.values == 1] < 0.05).all()
    assert (res.state_space_divergence.values[res.trial.values == 0] < 0.5).all()


def test_diverging_runs_are_counted_with_one_warning():
    data = dsident.as_dataset(_orbit(1000), dt=0.1)
    with pytest.warns(RuntimeWarning, match="3 of 3 free runs diverged") as caught:
        res = evaluate_starts(linear_model(np.eye(2) * 1.8, dt=0.1), data, n_starts=3, length=300)
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert res.diverged.all() and np.isnan(res.state_space_divergence).all()
    assert res.attrs["fraction_diverged"] == 1.0 and np.isnan(res.attrs["median_D_stsp"])
    assert not res.at_rest.any()


def test_fewer_positions_than_starts_and_default_length():
    data = dsident.as_dataset(_orbit(300), dt=0.1)
    model = linear_model(_rotation(ANGLE), dt=0.1)
    with pytest.warns(RuntimeWarning, match=r"the 3 windows \(`n_starts`=10\) .* overlap \(2 share"):
        res = evaluate_starts(model, data, n_starts=10, length=298)       # three positions only
    np.testing.assert_array_equal(res.start_index.values, [0, 1, 2])
    assert evaluate_starts(model, data, n_starts=1).attrs["length"] == 300
    # one position only: no overlap to warn about, but the missing start is not passed over in silence
    with pytest.warns(RuntimeWarning, match=r"only 1 window\(s\) of `length`=300 .* not `n_starts`=2"):
        one = evaluate_starts(model, data, n_starts=2, length=300)
    assert one.sizes["start"] == 1


def test_overlapping_windows_are_counted_and_warned_about():
    data = dsident.as_dataset(np.stack([_orbit(1000), _orbit(1000, phase=1.0)]), dt=0.1)
    model = linear_model(_rotation(ANGLE), dt=0.1)
    # 2 × 2 windows of 400 fit side by side: four starts do not overlap, and no warning comes
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apart = evaluate_starts(model, data, n_starts=4, length=400)
    assert apart.attrs["n_overlapping"] == 0
    with pytest.warns(RuntimeWarning, match=r"the 8 windows \(`n_starts`=8\) of `length`=400 samples overlap \(6 share .* "
                                            r"hold 4 non-overlapping"):
        close = evaluate_starts(model, data, n_starts=8, length=400)
    # per trial starts 0, 150(ish), ...: every window after a trial's first starts < 400 samples on
    starts, trials = close.start_index.values, close.trial.values
    by_hand = sum(1 for k in range(1, 8) if trials[k] == trials[k - 1] and starts[k] - starts[k - 1] < 400)
    assert close.attrs["n_overlapping"] == by_hand == 6


@pytest.mark.parametrize("kwargs, match", [
    ({"n_starts": 0}, "n_starts"), ({"n_starts": True}, "n_starts"), ({"length": 1}, "length"),
    ({"length": 5000}, "exceeds every trial"), ({"length": 2.5}, "length"),
])
def test_clear_errors(kwargs, match):
    data = dsident.as_dataset(_orbit(300), dt=0.1)
    with pytest.raises(ValueError, match=match):
        evaluate_starts(linear_model(_rotation(ANGLE), dt=0.1), data, **kwargs)
