"""PE(n) against exact matrix-power predictions of a known linear system."""
import numpy as np
import pytest

from dsident.metrics import prediction_error
from linear_helpers import linear_model


A = np.array([[0.9, 0.3], [-0.3, 0.9]])


def _model(matrix=A, input_matrix=None):
    return linear_model(matrix, input_matrix)


def _exact_curve(x, n, matrix=A):
    """PE(k), k = 1..n, from matrix powers over all start times (reference route)."""
    out = []
    for k in range(1, n + 1):
        pred = x[:-k] @ np.linalg.matrix_power(matrix, k).T
        out.append(np.mean((pred - x[k:]) ** 2))
    return np.array(out)


def test_linear_system_matches_matrix_powers():
    x = np.random.default_rng(0).normal(size=(400, 2))
    # only starts t with t + n inside the data count: restrict the reference to those
    n = 7
    exact = np.array([np.mean((x[: len(x) - n] @ np.linalg.matrix_power(A, k).T - x[k: len(x) - n + k]) ** 2)
                      for k in range(1, n + 1)])
    np.testing.assert_allclose(prediction_error(_model(), x, n=n, curve=True), exact, rtol=1e-12)
    assert prediction_error(_model(), x, n=n) == pytest.approx(exact[-1], rel=1e-12)
    # PE(1) over all starts equals the reference with k = 1
    assert prediction_error(_model(), x, n=1) == pytest.approx(_exact_curve(x, 1)[0], rel=1e-12)


def test_perfect_model_on_its_own_trajectory_is_exact():
    z = np.empty((300, 2))
    z[0] = [1.0, 0.5]
    for t in range(1, 300):
        z[t] = A @ z[t - 1]
    assert prediction_error(_model(), z, n=20) == pytest.approx(0.0, abs=1e-25)


def test_batches_trials_and_missing_samples():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 120, 2))
    x[0, 10, 1] = np.nan       # removes start t=10 and the target entry (t=10, channel 1)
    x[2, 50:55] = np.nan
    n = 4
    sq, cnt = 0.0, 0
    for trial in x:
        for t in range(trial.shape[0] - n):
            if not np.all(np.isfinite(trial[t])):
                continue
            pred = np.linalg.matrix_power(A, n) @ trial[t]
            ok = np.isfinite(trial[t + n])
            sq += np.sum((pred[ok] - trial[t + n][ok]) ** 2)
            cnt += ok.sum()
    got_small_batches = prediction_error(_model(), x, n=n, batch_size=17)
    assert got_small_batches == pytest.approx(sq / cnt, rel=1e-12)
    assert prediction_error(_model(), x, n=n) == pytest.approx(sq / cnt, rel=1e-12)


def test_inputs_drive_the_steps():
    cmat = np.array([[1.0], [0.5]])
    rng = np.random.default_rng(2)
    x, u = rng.normal(size=(1, 60, 2)), rng.normal(size=(1, 60, 1))
    n = 3
    errs = []
    for t in range(60 - n):
        z = x[0, t]
        for k in range(1, n + 1):
            z = A @ z + cmat @ u[0, t + k]
        errs.append(np.mean((z - x[0, t + n]) ** 2))
    assert prediction_error(_model(A, cmat), x, n=n, u=u) == pytest.approx(np.mean(errs), rel=1e-12)


def test_numpy_protocol_object_and_estimator_and_latent():
    class NumpyLinear:
        def encode(self, x):
            return x

        def step(self, z, u, dt):
            return z @ A.T

        def decode(self, z):
            return z

    class FittedEstimator:
        model_ = _model()

    x = np.random.default_rng(3).normal(size=(200, 2))
    ref = prediction_error(_model(), x, n=5)
    assert prediction_error(NumpyLinear(), x, n=5) == pytest.approx(ref, rel=1e-12)
    assert prediction_error(FittedEstimator(), x, n=5) == pytest.approx(ref, rel=1e-12)
    # starting from a supplied latent path (here: zeros) predicts zeros
    assert prediction_error(_model(), x, n=5, latent=np.zeros((1, 200, 2))) == pytest.approx(np.mean(x[5:] ** 2))


def test_clear_errors():
    x = np.zeros((30, 2))
    with pytest.raises(TypeError, match="encode"):
        prediction_error(object(), x)
    with pytest.raises(ValueError, match="at least 31"):
        prediction_error(_model(), x, n=30)
    with pytest.raises(ValueError, match="positive integer"):
        prediction_error(_model(), x, n=0)


def test_irregular_samples_are_predicted_over_their_actual_gaps(irregular_gnode):
    # continuous-time dynamics stepped by the model's nominal dt whatever the sample times said
    model, times, trials, ds = irregular_gnode
    n = 2
    sq, count = np.zeros(n), np.zeros(n)     # the independent route: one free run per gap
    for t, x in zip(times, trials):
        for i in range(min(len(t), 6 - n)):   # PE's start times: those with n steps after them (padded)
            z = x[i]
            for k in range(1, min(n, len(t) - 1 - i) + 1):
                z = model.generate(2, z0=z, dt=t[i + k] - t[i + k - 1])["z"].values[0, 1]
                sq[k - 1] += np.sum((z - x[i + k]) ** 2)
                count[k - 1] += x.shape[1]
    expected = sq / count
    np.testing.assert_allclose(prediction_error(model, ds, n=n, curve=True), expected, rtol=1e-10)
    # an explicit dt is still used as given
    assert not np.isclose(prediction_error(model, ds, n=1, dt=0.1), expected[0])


class _OffsetIdentity:
    """Predicts x(t) for x(t + k) plus a constant offset per channel: PE of channel c is known."""

    def __init__(self, offset):
        self.offset = np.asarray(offset, dtype=float)

    def encode(self, x):
        return x

    def step(self, z, u, dt):
        return z

    def decode(self, z):
        return z + self.offset


def test_channels_as_a_boolean_mask_select_channels():
    # [True, False] was read as the positions [1, 0], so both channels counted
    x = np.zeros((50, 2))
    model = _OffsetIdentity([0.0, 1.0])      # channel 0 exact, channel 1 off by 1
    assert prediction_error(model, x, n=1, channels=[True, False]) == 0.0
    assert prediction_error(model, x, n=1, channels=np.array([False, True])) == 1.0
    assert prediction_error(model, x, n=1, channels=[1]) == 1.0
    with pytest.raises(ValueError, match=r"integer positions in 0\.\.1 or a boolean mask; got \[0\.7\]"):
        prediction_error(model, x, n=1, channels=[0.7])
    with pytest.raises(ValueError, match=r"one entry per channel \(2\); got 3"):
        prediction_error(model, x, n=1, channels=[True, False, True])
    with pytest.raises(ValueError, match=r"`batch_size` must be a positive integer; got 0"):
        prediction_error(model, x, n=1, batch_size=0)


def test_data_at_another_step_than_the_models_are_refused_by_pe_and_predict():
    # a Dataset sampled every 2 was predicted as if at the model's step 1, without a word
    from dsident.data import as_dataset

    model = _model()
    assert model.dt == 1.0
    x = np.random.default_rng(1).normal(size=(100, 2))
    exact = np.mean((x[:97] @ np.linalg.matrix_power(A, 3).T - x[3:]) ** 2)
    assert prediction_error(model, as_dataset(x, dt=1.0), n=3) == pytest.approx(exact, rel=1e-12)
    other = as_dataset(x, dt=2.0)
    for call in (lambda d: prediction_error(model, d, n=3), lambda d: model.predict(d, n=3)):
        with pytest.raises(ValueError, match=r"`data` is sampled every 2 \(attrs\['dt'\]\) but the model steps by 1:"):
            call(other)
    assert prediction_error(model, other, n=3, dt=1.0) == pytest.approx(exact, rel=1e-12)   # an explicit dt says which
    assert prediction_error(model, x, n=3) == pytest.approx(exact, rel=1e-12)              # plain arrays: the model's


def test_a_step_the_model_would_drop_or_cannot_take_is_refused():
    # audit-s53: a discrete-time map ignores `dt`, so PE(n) with dt=-1 or dt=0.5 returned the
    # value at the model's own step without a word; generate() refuses the same dt
    model = _model()
    x = np.random.default_rng(2).normal(size=(60, 2))
    exact = np.mean((x[:57] @ np.linalg.matrix_power(A, 3).T - x[3:]) ** 2)
    assert prediction_error(model, x, n=3, dt=1.0) == pytest.approx(exact, rel=1e-12)
    with pytest.raises(ValueError, match=r"`dt`=0\.5: MatrixDynamics is a discrete-time map"):
        prediction_error(model, x, n=3, dt=0.5)
    for bad in (-1.0, 0.0, float("nan"), "1.0", True):
        with pytest.raises(ValueError, match=r"`dt` must be a positive finite number \(the sampling step\); got dt="):
            prediction_error(model, x, n=3, dt=bad)


def test_an_input_driven_model_without_inputs_is_refused():
    # audit-s53: PE(n) of a model with inputs ran its steps undriven when `u` was left out and
    # returned that number, while predict and evaluate refuse the same data
    B = np.array([[1.0], [0.5]])
    model = _model(input_matrix=B)
    rng = np.random.default_rng(3)
    x, u = rng.normal(size=(50, 2)), rng.normal(size=(50, 1))
    exact = np.mean((x[:-1] @ A.T + u[1:] @ B.T - x[1:]) ** 2)       # z(t+1) = A z(t) + B u(t+1)
    assert prediction_error(model, x, n=1, u=u) == pytest.approx(exact, rel=1e-12)
    with pytest.raises(ValueError, match=r"the model's dynamics take input_dim=1 input\(s\); pass `u`"):
        prediction_error(model, x, n=1)


def test_a_map_is_not_excused_from_the_step_check_by_sample_times():
    # audit-s53: per-sample times skipped the step check for every model, so a map fitted at
    # step 1 predicted data sampled every ~0.05 as if at its own step; the times only set the
    # steps of continuous-time dynamics
    from dsident.data import as_dataset

    model = _model()
    rng = np.random.default_rng(4)
    x = rng.normal(size=(80, 2))
    fast = as_dataset(x, time=np.cumsum(rng.uniform(0.04, 0.06, 80)))
    for call in (lambda d: prediction_error(model, d, n=2), lambda d: model.predict(d, n=2)):
        with pytest.raises(ValueError, match=r"`data` is sampled every 0\.0\d+ \(attrs\['dt'\]\) but the model steps by 1:"):
            call(fast)
    # times around the map's own step are taken one sample per step, as before
    own = as_dataset(x, time=np.arange(80) + rng.uniform(-0.002, 0.002, 80))
    exact = np.mean((x[:78] @ np.linalg.matrix_power(A, 2).T - x[2:]) ** 2)
    assert prediction_error(model, own, n=2) == pytest.approx(exact, rel=1e-12)
