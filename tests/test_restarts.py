"""Restarting a stuck fit (`restarts` of LatentModelEstimator.fit): the stuck test, the seeds
of the attempts, the kept attempt against a direct fit from its seed, and the refusals."""
import math
import warnings

import numpy as np
import pytest
import torch
import xarray as xr

from dsident.data.container import as_dataset
from dsident.experiments.config import resolve_config
from dsident.experiments.runner import build_estimator
from dsident.inference.teacher_forcing import AT_REST_FRACTION, _FreeRunScorer
from dsident.models import LTC, PLRNN, GatedNODE, ShallowPLRNN
from dsident.models.restarts import RESTART_SEED_STRIDE, StuckWatch, any_free_run_moved, restart_seed

FIT = dict(method="teacher-forcing", n_epochs=3, batches_per_epoch=2, seq_len=20, eval_every=1, eval_steps=200,
           lr=1e-3, progress=False)


def circle(n_time=600, dt=0.1):
    t = np.arange(n_time) * dt
    return np.stack([np.sin(t), np.cos(t)], -1)


def quiet_fit(est, data, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(data, **{**FIT, **options})
    return [str(w.message) for w in caught]


# ---------------------------------------------------------------------------------------------
# the parts
# ---------------------------------------------------------------------------------------------
def test_restart_seeds_step_by_the_stride_and_none_stays_none():
    assert [restart_seed(3, k) for k in range(3)] == [3, 3 + RESTART_SEED_STRIDE, 3 + 2 * RESTART_SEED_STRIDE]
    assert restart_seed(None, 2) is None


def record(d_stsp, at_rest=False):
    return {"train_loss": 1.0, "state_space_divergence": d_stsp, "free_run_at_rest": at_rest}


@pytest.mark.parametrize("scored, stop_epoch", [
    ([math.nan, math.inf, math.nan], 2),           # off the grid, diverged, off the grid: stuck
    ([3.0, 3.0, 3.0], 2),                          # at rest every time (the flags below): stuck
    ([math.nan, 4.0, math.nan], None),             # one moving run clears the fit
])
def test_stuck_watch_stops_only_when_no_scored_run_moved(scored, stop_epoch):
    at_rest = all(math.isfinite(d) for d in scored)
    watch = StuckWatch(restart_after=3)
    stops = [watch(epoch, record(d, at_rest), None) for epoch, d in enumerate(scored)]
    assert watch.stuck_at == stop_epoch
    assert not any(stops[:2])
    assert bool(stops[2]) == (stop_epoch is not None)
    assert watch.n_scored == 3


@pytest.mark.parametrize("scored, above, stop_epoch", [
    ([14.6, 15.9, 14.7], 10.0, 2),                 # moving, but never near the data: stuck
    ([14.6, 9.9, 14.7], 10.0, None),               # one run below the bar clears the fit
    ([14.6, 10.0, 14.7], 10.0, 2),                 # "below" is strict
    ([14.6, 15.9, 14.7], None, None),              # without the bar, moving is enough
])
def test_restart_above_counts_runs_that_stay_far_from_the_data_as_stuck(scored, above, stop_epoch):
    watch = StuckWatch(restart_after=3, restart_above=above)
    for epoch, d in enumerate(scored):
        watch(epoch, record(d), None)
    assert watch.stuck_at == stop_epoch
    history = {"state_space_divergence": scored, "free_run_at_rest": [False] * 3}
    assert any_free_run_moved(history, above) == (stop_epoch is None)
    assert any_free_run_moved(history)                 # the default bar: none


def test_stuck_watch_waits_for_a_scored_epoch_and_passes_the_users_stop_through():
    calls = []

    def user(epoch, rec, model):
        calls.append(epoch)
        return epoch == 1

    watch = StuckWatch(restart_after=1, callback=user)
    assert not watch(0, {"train_loss": 1.0}, None)           # nothing scored yet: no verdict
    assert watch(1, record(math.nan), None) is True           # the user's stop, not a restart
    assert watch.stuck_at is None and calls == [0, 1]


def run_of(values):
    """A scored free run as the engine's scorer sees it: (1 trial, time, channel)."""
    x = np.asarray(values, dtype=float)[None]
    return xr.Dataset({"x": (("trial", "time", "channel"), x)})


def test_at_rest_is_a_still_tail_relative_to_the_data_spread():
    ref = circle(400)
    scorer = _FreeRunScorer(as_dataset(ref, dt=0.1), eval_steps=200, burn_in=50)
    n = scorer.burn_in + 200
    spread = scorer.std                                             # per channel
    still = np.tile([0.3, -0.2], (n, 1))
    still[: n // 2] += np.linspace(1, 0, n // 2)[:, None]           # a transient into the fixed point
    tiny = still + 0.4 * AT_REST_FRACTION * spread * np.sin(np.arange(n))[:, None]
    small = still + 0.6 * AT_REST_FRACTION * spread * np.sin(np.arange(n))[:, None]   # ptp 1.2 × the threshold
    diverged = still.copy()
    diverged[-1] = np.nan
    assert scorer.at_rest(run_of(still)) and scorer.at_rest(run_of(tiny))
    assert not scorer.at_rest(run_of(small))
    assert not scorer.at_rest(run_of(ref[:n]))
    assert not scorer.at_rest(run_of(diverged))


# ---------------------------------------------------------------------------------------------
# through the estimator
# ---------------------------------------------------------------------------------------------
def test_a_stuck_fit_restarts_from_the_next_seeds_and_keeps_what_a_direct_fit_from_that_seed_gives():
    data = circle()
    # the unclipped shallow PLRNN's free runs from seed 0 rest off the circle (found, not assumed:
    # the first attempt must be reported stuck below)
    est = ShallowPLRNN(latent_dim=2, hidden_dim=10, readout="identity", seed=0)
    messages = quiet_fit(est, data, restarts=2, restart_after=2)
    restarts = est.history_["restarts"]
    assert restarts[0] == {"seed": 0, "stopped_at_epoch": 1, "scored_epochs": 2}
    assert [r["seed"] for r in restarts] == [restart_seed(0, k) for k in range(len(restarts))]
    assert est.history_["seed_used"] == restart_seed(0, len(restarts))
    assert sum("starting again from seed" in m for m in messages) == len(restarts)
    if len(restarts) == 2:             # the last attempt was stuck too: said, and the last one kept
        assert any("all 3 attempts" in m and "[0, 10000, 20000]" in m for m in messages)
    else:
        assert not any("attempts" in m for m in messages)
    assert est.seed == 0                                           # the hyperparameter is untouched
    # the kept attempt is exactly a plain fit from its seed
    direct = ShallowPLRNN(latent_dim=2, hidden_dim=10, readout="identity", seed=est.history_["seed_used"])
    quiet_fit(direct, data)
    assert est.history_["n_epochs_run"] == direct.history_["n_epochs_run"]
    for (name, a), (_, b) in zip(est.model_.state_dict().items(), direct.model_.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("method", ["teacher-forcing", "gtf"])
def test_a_fit_whose_free_runs_move_is_not_restarted(method):
    est = PLRNN(latent_dim=2, readout="identity", seed=0)
    quiet_fit(est, circle(), restarts=2, restart_after=1, method=method)
    h = est.history_
    assert h["restarts"] == [] and h["seed_used"] == 0
    assert all(math.isfinite(d) for d in h["state_space_divergence"]) and not any(h["free_run_at_rest"])
    assert any_free_run_moved(h)
    assert h["n_epochs_run"] == FIT["n_epochs"]


def test_restart_above_restarts_a_moving_fit_that_never_gets_below_it():
    data = circle()
    # every scored run of this fit moves (the test above); no D_stsp is below 1e-6, so with that
    # bar every attempt counts as stuck, and the last one is kept as a plain fit from its seed
    est = PLRNN(latent_dim=2, readout="identity", seed=0)
    messages = quiet_fit(est, data, restarts=2, restart_after=1, restart_above=1e-6)
    h = est.history_
    assert [r["seed"] for r in h["restarts"]] == [0, restart_seed(0, 1)]
    assert h["seed_used"] == restart_seed(0, 2) and h["restart_above"] == 1e-6
    assert sum("restart_above=1e-06" in m for m in messages) == 2
    assert any("all 3 attempts" in m for m in messages)
    assert any_free_run_moved(h) and not any_free_run_moved(h, 1e-6)
    direct = PLRNN(latent_dim=2, readout="identity", seed=h["seed_used"])
    quiet_fit(direct, data)
    for (name, a), (_, b) in zip(est.model_.state_dict().items(), direct.model_.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    # a bar above every score changes nothing
    high = PLRNN(latent_dim=2, readout="identity", seed=0)
    quiet_fit(high, data, restarts=2, restart_after=1, restart_above=1e6)
    assert high.history_["restarts"] == [] and high.history_["seed_used"] == 0


@pytest.mark.parametrize("cls", [GatedNODE, LTC])
def test_a_restarted_continuous_model_with_stateful_windows_is_a_plain_fit_from_the_seed_used(cls):
    # the bursting cells restart these models with stateful windows: nothing of an abandoned
    # attempt (the carried window states, the window order) may leak into the next
    options = dict(stateful=True, alpha=0.3)
    est = cls(latent_dim=4, readout="linear", seed=0)
    quiet_fit(est, circle(), restarts=1, restart_after=1, restart_above=1e-6, **options)
    assert est.history_["seed_used"] == restart_seed(0, 1)
    direct = cls(latent_dim=4, readout="linear", seed=restart_seed(0, 1))
    quiet_fit(direct, circle(), **options)
    assert est.history_["state_space_divergence"] == direct.history_["state_space_divergence"]
    for (name, a), (_, b) in zip(est.model_.state_dict().items(), direct.model_.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_by_default_a_fit_gets_half_its_epochs_before_a_restart():
    est = ShallowPLRNN(latent_dim=2, hidden_dim=10, readout="identity", seed=0)
    quiet_fit(est, circle(), restarts=1, n_epochs=4)
    assert est.history_["restarts"][0]["stopped_at_epoch"] == 1          # after 4 // 2 epochs


@pytest.mark.parametrize("options, fragment", [
    ({"restarts": -1}, "`restarts` must be an integer >= 0"),
    ({"restarts": 1.5}, "`restarts` must be an integer >= 0"),
    ({"restarts": 1, "restart_after": 0}, "`restart_after` must be an integer >= 1"),
    ({"restarts": 1, "restart_after": 4}, "is more epochs than the fit has (n_epochs=3"),
    ({"restarts": 1, "n_epochs": None}, "`n_epochs` must be an integer >= 1; got n_epochs=None"),
    ({"restarts": 1, "n_epochs": "10"}, "`n_epochs` must be an integer >= 1; got n_epochs='10'"),
    ({"restarts": 1, "eval_every": 0}, "needs eval_every > 0"),
    ({"restarts": 1, "method": "bptt"}, "method='bptt'"),
    ({"restarts": 1, "checkpoint": "ck.pt"}, "checkpoint="),
    ({"restarts": 1, "restart_above": 0}, "`restart_above` must be a finite D_stsp > 0"),
    ({"restarts": 1, "restart_above": -3.0}, "got restart_above=-3.0"),
    ({"restarts": 1, "restart_above": math.inf}, "got restart_above=inf"),
    ({"restarts": 1, "restart_above": math.nan}, "got restart_above=nan"),
    ({"restarts": 1, "restart_above": "10"}, "got restart_above='10'"),
    ({"restarts": 1, "restart_above": True}, "got restart_above=True"),
    ({"restart_above": "10"}, "got restart_above='10'"),        # checked even without restarts
    ({"best_of": 0}, "`best_of` must be an integer >= 1"),
    ({"best_of": 2.0}, "got best_of=2.0"),
    ({"best_of": True}, "got best_of=True"),
    ({"best_of": 2, "eval_every": 0}, "got best_of=2 with eval_every=0"),
    ({"best_of": 2, "method": "bptt"}, "got best_of=2 with method='bptt'"),
    ({"best_of": 2, "checkpoint": "ck.pt"}, "got best_of=2 with checkpoint="),
])
def test_restarts_and_best_of_refuse_what_they_cannot_do(options, fragment):
    est = ShallowPLRNN(latent_dim=2, hidden_dim=10, readout="identity", seed=0)
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace("[", r"\[")):
        est.fit(circle(), **{**FIT, **options})


@pytest.mark.parametrize("option", ["restarts", "best_of"])
def test_restarts_and_best_of_refuse_a_warm_start(option):
    est = ShallowPLRNN(latent_dim=2, hidden_dim=10, readout="identity", seed=0)
    quiet_fit(est, circle(), n_epochs=1)
    with pytest.raises(ValueError, match=f"`{option}` builds the model afresh.*warm_start=True"):
        est.fit(circle(), warm_start=True, **{**FIT, option: 2})


def test_a_benchmark_cell_passes_restarts_to_the_estimator():
    cfg = resolve_config("lorenz63", "shplrnn", "teacher-forcing",
                         overrides={"fit_options": {"restarts": 2, "restart_after": 15, "restart_above": 10.0}})
    _, options, dropped = build_estimator(cfg)
    assert options["restarts"] == 2 and options["restart_after"] == 15 and options["restart_above"] == 10.0
    assert not any("restart" in d for d in dropped)


def run_tiny_point(tmp_path, seed, jobs=1, **fit_options):
    """A Lorenz-63 grid point of a tiny shallow PLRNN with ``fit_options``: its record as written
    to result.json and the history its saved model carries (both write a non-finite score as null)."""
    from dsident.experiments.runner import read_record, run_point
    from dsident.model import read_saved_config

    cfg = resolve_config("lorenz63", "shplrnn", "teacher-forcing", overrides={
        "seed": seed, "train_length": 600, "eval_length": 300,
        "model_params": {"latent_dim": 3, "hidden_dim": 10, "readout": "identity", "clip": False},
        "fit_options": {"n_epochs": 2, "batches_per_epoch": 2, "seq_len": 20, "eval_every": 1, "eval_steps": 200,
                        **fit_options}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = run_point(cfg, tmp_path, jobs=jobs)
    assert rec["status"] == "done", rec["error"]
    folder = next((tmp_path / "points").iterdir())
    return read_record(folder), read_saved_config(folder / "model")["metadata"]["estimator"]["history"]


def test_a_grid_point_records_its_restarts_beside_the_saved_history(tmp_path):
    rec, saved = run_tiny_point(tmp_path, 0, restarts=1, restart_after=1)
    assert rec["restarts"] == {"abandoned": saved["restarts"], "seed_used": saved["seed_used"]}
    assert rec["restarts"]["seed_used"] == restart_seed(0, len(saved["restarts"]))


# ---------------------------------------------------------------------------------------------
# best_of: several fits, the one with the lowest training score kept
# ---------------------------------------------------------------------------------------------
def test_best_of_keeps_the_candidate_with_the_lowest_training_score_as_a_direct_fit_gives_it():
    data = circle()
    est = PLRNN(latent_dim=2, readout="identity", seed=3)
    quiet_fit(est, data, best_of=3)
    cands = est.history_["best_of"]
    assert [c["seed"] for c in cands] == [restart_seed(3, k) for k in range(3)]
    # each candidate's score is what a plain fit from its seed reports: an independent route
    for c in cands:
        alone = PLRNN(latent_dim=2, readout="identity", seed=c["seed"])
        quiet_fit(alone, data)
        assert c["best_state_space_divergence"] == alone.history_["best_state_space_divergence"]
        assert c["best_epoch"] == alone.history_["best_epoch"]
        assert c["moved"] == any_free_run_moved(alone.history_)
        if c["seed"] == est.history_["seed_used"]:
            for (name, a), (_, b) in zip(est.model_.state_dict().items(), alone.model_.state_dict().items()):
                torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    scores = [c["best_state_space_divergence"] for c in cands]
    assert len(set(scores)) == 3                                  # distinct seeds, distinct fits
    assert est.history_["seed_used"] == cands[int(np.argmin(scores))]["seed"]
    assert est.history_["best_state_space_divergence"] == min(scores)
    assert est.seed == 3


def test_with_select_regime_best_of_keeps_a_candidate_of_the_right_kind_over_a_lower_scoring_fallback(monkeypatch):
    data = circle()
    plain = PLRNN(latent_dim=2, readout="identity", seed=3)
    quiet_fit(plain, data, best_of=2)
    scores = [c["best_state_space_divergence"] for c in plain.history_["best_of"]]
    lower = int(np.argmin(scores))
    assert len(set(scores)) == 2
    # scripted verdicts: every free run of the lower-scoring candidate is of the wrong kind
    scorers = []

    def verdict(self, model, seed, x0=None, run=None):
        if self not in scorers:
            scorers.append(self)
        return "chaotic" if scorers.index(self) == lower else "periodic or quasi-periodic"

    monkeypatch.setattr(_FreeRunScorer, "verdict", verdict)
    est = PLRNN(latent_dim=2, readout="identity", seed=3)
    quiet_fit(est, data, best_of=2, select_regime="periodic")
    cands = est.history_["best_of"]
    assert [c["best_state_space_divergence"] for c in cands] == scores          # the same two fits
    assert [c["regime_fallback"] for c in cands] == [k == lower for k in range(2)]
    assert est.history_["seed_used"] == cands[1 - lower]["seed"] and est.history_["regime_fallback"] is False
    assert est.history_["best_state_space_divergence"] == scores[1 - lower]


def test_best_of_one_is_a_plain_fit():
    a = PLRNN(latent_dim=2, readout="identity", seed=0)
    quiet_fit(a, circle(), best_of=1)
    b = PLRNN(latent_dim=2, readout="identity", seed=0)
    quiet_fit(b, circle())
    assert "best_of" not in a.history_ and "seed_used" not in a.history_
    for (name, x), (_, y) in zip(a.model_.state_dict().items(), b.model_.state_dict().items()):
        torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)


def test_best_of_with_restarts_replaces_a_stuck_candidate_by_the_next_seed():
    # restart_above=1e-6: every attempt counts as stuck (see the restart_above test), so the one
    # restart goes to the first candidate, and the second candidate runs to the end
    est = PLRNN(latent_dim=2, readout="identity", seed=0)
    messages = quiet_fit(est, circle(), best_of=2, restarts=1, restart_after=1, restart_above=1e-6)
    h = est.history_
    assert [r["seed"] for r in h["restarts"]] == [0]
    assert [c["seed"] for c in h["best_of"]] == [restart_seed(0, 1), restart_seed(0, 2)]
    assert not any(c["moved"] for c in h["best_of"])
    assert any("none of the 2 candidates" in m for m in messages)


def test_candidate_score_ranks_fits_without_a_finite_score_last():
    from dsident.models.restarts import candidate_score

    assert candidate_score({"best_state_space_divergence": 0.7}) == 0.7
    assert candidate_score({"best_state_space_divergence": math.nan}) == math.inf
    assert candidate_score({}) == math.inf


def test_a_grid_point_records_its_candidates_beside_the_saved_history(tmp_path):
    rec, saved = run_tiny_point(tmp_path, 1, best_of=2)
    assert rec["best_of"] == {"candidates": saved["best_of"], "seed_used": saved["seed_used"], "processes": 1}
    assert [c["seed"] for c in saved["best_of"]] == [1, restart_seed(1, 1)]


def test_the_benchmark_verdict_names_the_kept_candidate_and_judges_it_by_the_bar():
    from dsident.experiments.benchmark import _verdict

    rec = {"config": {"model": "shplrnn", "method": "teacher-forcing", "seed": 0},
           "scores": {"D_stsp": 0.9, "D_H": 0.04},
           "best_of": {"candidates": [{"seed": 0}, {"seed": 10_000}, {"seed": 20_000}], "seed_used": 10_000}}
    line = _verdict("lorenz63", rec, {"D_stsp": 0.45})
    assert "seed 10000 kept of 3 trained" in line and "(2.00× the floor 0.45)" in line
    assert "a real reconstruction" in line
    rec["scores"]["D_stsp"] = 1.4                                   # 3.11× the floor: not one
    assert "NOT yet a reconstruction" in _verdict("lorenz63", rec, {"D_stsp": 0.45})
    del rec["best_of"]
    assert "kept of" not in _verdict("lorenz63", rec, {"D_stsp": 0.45})


def test_fit_md_lists_every_candidate_and_the_one_kept():
    from dsident.cli_main_job import _best_of_lines

    history = {"best_of": [{"seed": 0, "best_state_space_divergence": 0.528}, {"seed": 10_000,
               "best_state_space_divergence": 0.381}, {"seed": 20_000, "best_state_space_divergence": math.inf}],
               "seed_used": 10_000}
    (line,) = _best_of_lines(history)
    assert "best of 3 fits" in line and "seed 0: 0.528, seed 10000: 0.381, seed 20000: –" in line
    assert line.endswith("the model from seed 10000 is kept") and "at a time" not in line
    (line,) = _best_of_lines({**history, "best_of_processes": 2})
    assert line.startswith("- best of 3 fits, trained 2 at a time, chosen by")
    assert _best_of_lines({"seed_used": 3}) == []


def test_a_constant_reference_channel_gets_a_unit_scale_not_its_round_off_std():
    # a constant 0.3 has a std of 5.6e-17, not 0: as the scale of the divergence check, any run
    # off by 1e-12 in that channel would have read as diverged (score inf)
    ref = np.column_stack([circle(400)[:, 0], np.full(400, 0.3)])
    assert 0 < ref[:200, 1].std() < 1e-15
    scorer = _FreeRunScorer(as_dataset(ref, dt=0.1), eval_steps=200, burn_in=50)
    assert scorer.std[1] == 1.0 and scorer.std[0] == pytest.approx(ref[:200, 0].std())
    n = scorer.burn_in + 200
    run = np.column_stack([circle(n + 7)[7:, 0], np.full(n, 0.3 + 1e-9)])
    d_stsp, d_h = scorer.score(None, seed=0, run=run_of(run))
    assert np.isfinite(d_stsp) and np.isfinite(d_h)
