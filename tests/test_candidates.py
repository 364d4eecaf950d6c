"""best_of's candidates trained side by side in worker processes (`fit(..., n_jobs=k)`,
dsident.models.candidates): the same candidates and the same kept model as one after another,
the grid's use of idle cores, the progress relay, and the refusals."""
import functools
import pickle
import queue
import warnings

import numpy as np
import pytest
import torch

from dsident.models import PLRNN
from dsident.models.candidates import _drain, check_n_jobs, usable_cores
from test_restarts import FIT, circle, run_tiny_point


@pytest.fixture
def one_thread():
    # the candidates equal the sequential ones for the same torch thread count (one, as the grid runs)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _fit(n_jobs, **options):
    est = PLRNN(latent_dim=2, readout="identity", seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(circle(), **{**FIT, "best_of": 3, "n_jobs": n_jobs, **options})
    return est


def test_candidates_side_by_side_are_the_candidates_one_after_another(one_thread):
    alone, together = _fit(1), _fit(2)
    # the sequential route is the independent one: every candidate, its score, and the kept model
    assert together.history_["best_of"] == alone.history_["best_of"]
    assert together.history_["seed_used"] == alone.history_["seed_used"]
    assert len({c["best_state_space_divergence"] for c in alone.history_["best_of"]}) == 3
    for (name, a), (_, b) in zip(alone.model_.state_dict().items(), together.model_.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=name)
    np.testing.assert_array_equal(together.history_["train_loss"], alone.history_["train_loss"])
    assert (alone.history_["best_of_processes"], together.history_["best_of_processes"]) == (1, 2)
    assert together.seed == 5                          # the estimator's own seed is left as it was


def test_a_grid_point_run_alone_uses_the_cores_and_keeps_the_same_model(tmp_path, one_thread):
    one, one_saved = run_tiny_point(tmp_path / "one", 1, best_of=2)
    two, two_saved = run_tiny_point(tmp_path / "two", 1, best_of=2, jobs=2)
    assert one["point_id"] == two["point_id"]          # how a point runs is not what it is
    assert two["best_of"]["candidates"] == one["best_of"]["candidates"]
    assert (one["best_of"]["processes"], two["best_of"]["processes"]) == (1, 2)
    assert two["scores"]["D_stsp"] == one["scores"]["D_stsp"] or np.isnan(one["scores"]["D_stsp"])
    assert "n_jobs" not in two["config"]["fit_options"]


def test_fit_point_gives_idle_cores_only_to_a_best_of_fit_that_does_not_set_n_jobs(monkeypatch):
    from dsident.experiments.config import resolve_config
    from dsident.experiments.runner import fit_point
    from dsident.models.base import LatentModelEstimator

    seen = []

    @functools.wraps(LatentModelEstimator.fit)      # the options fit_point checks are the real fit's
    def spy(self, data, method=None, **options):
        seen.append(options)
        return self

    monkeypatch.setattr(LatentModelEstimator, "fit", spy)
    base = {"seed": 0, "train_length": 200, "model_params": {"latent_dim": 3, "hidden_dim": 5}}
    train = None
    for fit_options, jobs, expected in [({"best_of": 3}, 4, 3), ({"best_of": 3}, 2, 2), ({"best_of": 3}, 1, None),
                                        ({}, 4, None), ({"best_of": 3, "n_jobs": 1}, 4, 1)]:
        cfg = resolve_config("lorenz63", "shplrnn", "teacher-forcing",
                             overrides={**base, "fit_options": {"n_epochs": 1, **fit_options}})
        if train is None:
            from dsident.experiments.inputs import load_data
            train = load_data("lorenz63", split="train", length=200)
        fit_point(cfg, train, jobs=jobs)
        assert seen[-1].get("n_jobs") == expected, (fit_options, jobs)


@pytest.mark.parametrize("n_jobs, restarts, options, fragment", [
    (0, 0, {}, "`n_jobs` must be a positive integer"),
    (2.0, 0, {}, "got n_jobs=2.0"),
    (True, 0, {}, "got n_jobs=True"),
    (2, 1, {}, "with restarts=1 each stuck candidate takes the next seed"),
    (2, 0, {"device": "cuda"}, "with device='cuda' train them one after another"),
    (2, 0, {"callback": lambda epoch, record, model: None}, "must be picklable"),
])
def test_n_jobs_refuses_what_it_cannot_do(n_jobs, restarts, options, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_n_jobs(n_jobs, 3, restarts, options)


def test_n_jobs_is_capped_by_the_candidates_and_minus_one_means_every_core():
    assert check_n_jobs(8, 3, 0, {}) == 3
    assert check_n_jobs(2, 1, 5, {"device": "cuda"}) == 1        # nothing to share out: nothing refused
    assert check_n_jobs(-1, 64, 0, {}) == min(64, usable_cores())
    assert check_n_jobs(2, 3, 0, {"callback": print}) == 2         # a builtin pickles
    assert check_n_jobs(np.int64(2), 3, 0, {}) == 2                 # a numpy integer, as best_of takes one
    assert check_n_jobs(np.int64(-1), 64, 0, {}) == min(64, usable_cores())


@pytest.mark.parametrize("n_epochs", [None, "x"])
def test_a_bad_n_epochs_with_n_jobs_gets_the_engines_message_not_a_crash_in_int(n_epochs):
    with pytest.raises(ValueError, match=f"`n_epochs` must be an integer >= 1; got n_epochs={n_epochs!r}"):
        PLRNN(latent_dim=2, readout="identity", seed=0).fit(circle(), **{**FIT, "best_of": 2, "n_jobs": 2,
                                                                         "n_epochs": n_epochs})


def test_the_estimator_refuses_a_bad_n_jobs_before_any_work():
    with pytest.raises(ValueError, match="`n_jobs` must be a positive integer"):
        PLRNN(latent_dim=2, readout="identity", seed=0).fit(circle(), **{**FIT, "best_of": 2, "n_jobs": 0})


class _Bar:
    def __init__(self):
        self.n, self.postfix = 0, None

    def update(self, k):
        self.n += k

    def set_postfix(self, postfix):
        self.postfix = postfix


def test_the_progress_relay_counts_every_epoch_and_shows_each_candidates_best_score():
    relay, bar, best = queue.Queue(), _Bar(), {}
    for item in [(0, None), (1, 2.5), (0, 1.5), (1, float("nan")), (0, 3.0), (1, 0.75)]:
        relay.put(item)
    _drain(relay, bar, best)
    assert bar.n == 6 and best == {0: 1.5, 1: 0.75}
    assert bar.postfix == {"best D_stsp": "1.5 / 0.75"}
    _drain(relay, bar, best, wait=False)                # nothing left: nothing moves
    assert bar.n == 6


def test_the_relay_callback_passes_the_users_stop_through():
    from dsident.models.candidates import _Relay

    relay = queue.Queue()
    stop = _Relay(relay, 2, callback=_stop_at_epoch_one)
    assert stop(0, {"state_space_divergence": 1.25}, None) is None and stop(1, {}, None) is True
    assert [relay.get_nowait(), relay.get_nowait()] == [(2, 1.25), (2, None)]
    pickle.dumps(_Relay(None, 0, _stop_at_epoch_one))    # what the worker receives must pickle


def _stop_at_epoch_one(epoch, record, model):
    return True if epoch == 1 else None


class CandidateFailed(RuntimeError):
    pass


def _fail_in_the_worker(epoch, record, model):
    raise CandidateFailed(f"raised at epoch {epoch}")


@pytest.mark.parametrize("progress", [False, True])
def test_an_error_in_a_worker_reaches_the_caller_with_its_own_type(one_thread, progress):
    # with the bar on, the queue's server and the bar must close too, not hang on the missing epochs
    with pytest.raises(CandidateFailed, match="raised at epoch 0"):
        _fit(2, callback=_fail_in_the_worker, progress=progress)
