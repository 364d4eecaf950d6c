"""training_trend: was a fit still improving when it stopped? Medians worked by hand, both
verdicts, the refusals, and the records in fit.md and a grid point's result.json."""
import math

import pytest

from dsident.inference.training_trend import training_trend


def history(scores, best_epoch, n_epochs=None):
    """Every epoch scored: epoch i has scores[i]."""
    return {"eval_epoch": list(range(len(scores))), "state_space_divergence": list(scores),
            "best_epoch": best_epoch, "n_epochs_run": n_epochs or len(scores)}


def test_a_falling_fit_that_kept_a_late_epoch_is_still_improving():
    # 16 epochs: the third quarter is epochs 8-11, the last 12-15
    scores = [9, 9, 9, 9, 8, 8, 8, 8, 4.0, 5.0, 3.0, 6.0, 2.0, 3.0, 2.5, 1.5]
    out = training_trend(history(scores, best_epoch=15))
    assert out["median_third"] == pytest.approx(4.5)       # median of 3, 4, 5, 6
    assert out["median_last"] == pytest.approx(2.25)       # median of 1.5, 2, 2.5, 3
    assert out["drop"] == pytest.approx(0.5)
    assert out["still_improving"] is True and (out["n_epochs"], out["best_epoch"]) == (16, 15)
    assert "still improving" in out["message"] and "50 %" in out["message"]
    assert "n_epochs, or a polish" in out["message"]


@pytest.mark.parametrize("last, best, why", [
    ([4.0, 4.2, 4.1, 3.9], 15, "flat"),                  # the median did not fall: noise, not a trend
    ([2.0, 3.0, 2.5, 1.5], 14, "early best"),              # fell, but the kept epoch is not in the last tenth
])
def test_no_verdict_without_both_a_falling_median_and_a_late_kept_epoch(last, best, why):
    scores = [9] * 8 + [4.0, 5.0, 3.0, 6.0] + last
    out = training_trend(history(scores, best_epoch=best))
    assert out["still_improving"] is False, why
    assert out["message"].startswith(f"kept epoch {best} of 16")


def test_unscored_and_diverged_runs_do_not_count():
    # None (a saved NaN) and inf in the last quarter leave 4 finite scores: 1, 2, 3, 4 (median 2.5)
    h = {"eval_epoch": list(range(12)) + [12, 12, 13, 14, 14, 15],
         "state_space_divergence": [9] * 8 + [5.0] * 4 + [None, 3.0, 2.0, math.inf, 4.0, 1.0],
         "best_epoch": 15, "n_epochs_run": 16}
    out = training_trend(h)
    assert out["median_last"] == pytest.approx(2.5) and out["median_third"] == pytest.approx(5.0)
    assert out["still_improving"] is True


@pytest.mark.parametrize("h", [
    {},                                                             # no scored runs (SVI, eval_every=0)
    history([5.0] * 6, best_epoch=5),                               # too few scores a quarter
    {"eval_epoch": [0, 1], "state_space_divergence": [1.0]},        # lengths disagree
])
def test_no_reading_without_enough_scored_runs(h):
    assert training_trend(h) is None


@pytest.mark.parametrize("kw, name", [({"min_drop": 1.5}, "min_drop"), ({"min_drop": 0}, "min_drop"),
                                      ({"last_fraction": 0}, "last_fraction")])
def test_bad_thresholds_are_refused_by_name(kw, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        training_trend(history([1.0] * 16, best_epoch=15), **kw)


def test_fit_md_and_a_grid_point_carry_the_reading(tmp_path):
    from test_restarts import run_tiny_point

    from dsident.cli_main_job import _trend_lines

    rec, saved = run_tiny_point(tmp_path, 0, n_epochs=16)
    expected = training_trend(saved)
    assert expected is not None
    assert rec["trend"] == pytest.approx({k: v for k, v in expected.items() if k != "message"})
    assert _trend_lines(saved) == [f"- training: {expected['message']}"]
    assert _trend_lines({}) == []


def _trend_records():
    from dsident.experiments import runner

    recs = []
    flags = [("ecg", "gnode", True), ("ecg", "gnode", False), ("ecg", "gnode", True),
             ("lorenz63", "shplrnn", False), ("lorenz63", "shplrnn", None)]
    for i, (d, model, flag) in enumerate(flags):
        rec = {"point_id": f"p{i}", "status": "done", "fit_time": 1.0,
               "config": {"dataset": d, "model": model, "method": "teacher-forcing", "seed": i},
               "scores": {"D_stsp": 1.0, "D_H": 0.1, "PE": 0.1, "diverged": 0.0}}
        if flag is not None:           # None: a record without a reading (SVI, or written before it existed)
            rec["trend"] = {"still_improving": flag, "drop": 0.3}
        recs.append(rec)
    return runner.records_to_dataset(recs)


def test_the_benchmark_note_counts_the_flagged_seeds_of_each_cell():
    from dsident.experiments.tables import trend_note

    results = _trend_records()
    assert list(results["still_improving"].values[:4]) == [1.0, 0.0, 1.0, 0.0]
    assert math.isnan(results["still_improving"].values[4])
    note = trend_note(results)
    assert "- ecg × gnode × teacher-forcing: 2 of 3 seeds" in note.splitlines()
    assert "lorenz63" not in note                     # no flagged seed there: no line
    assert trend_note(results.isel(point=[3, 4])) == ""
