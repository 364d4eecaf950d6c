"""Polishing a fit (`polish` of LatentModelEstimator.fit): the keep rule, the stage against a
warm-started fit with the same options, the records, and the refusals."""
import copy
import math
import warnings

import numpy as np
import pytest
import torch

from dsident.models import PLRNN
from dsident.models.polish import check_polish, polish_fit

FIT = dict(method="teacher-forcing", n_epochs=3, batches_per_epoch=3, seq_len=20, eval_every=1, eval_steps=300,
           lr=1e-3, progress=False)
POLISH = {"batch_size": 32, "lr": 3e-4, "lr_end": 1e-4, "n_epochs": 3}


def circle(n_time=800, dt=0.1):
    t = np.arange(n_time) * dt
    return np.stack([np.sin(t), np.cos(t)], -1)


def quiet(est, data, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(data, **{**FIT, **options})


def stub_engine(score):
    """An engine that moves every parameter by 1 and reports ``score`` as its best free run."""
    def engine(model, data, *, seed, **options):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        return {"best_state_space_divergence": score, "best_epoch": 2, "options": options}
    return engine


@pytest.mark.parametrize("after, kept", [(0.4, True), (0.9, False), (math.inf, False), (0.7, False)])
def test_the_polished_state_is_kept_only_when_its_training_score_is_lower(after, kept):
    model = torch.nn.Linear(3, 2)
    before_params = copy.deepcopy(model.state_dict())
    history = {"best_state_space_divergence": 0.7, "best_epoch": 5}
    out = polish_fit(stub_engine(after), model, history, None, seed=0, engine_options={"lr": 3e-3, "n_epochs": 9},
                     polish={"lr": 1e-4})
    rec = out["polish"]
    assert rec["kept"] is kept and rec["score_before"] == 0.7 and rec["score_after"] == after
    assert rec["history"]["options"] == {"lr": 1e-4, "n_epochs": 9}      # the stage's options override the fit's
    assert out["best_epoch"] == 5 and history == {"best_state_space_divergence": 0.7, "best_epoch": 5}
    for name, value in model.state_dict().items():
        if kept:
            torch.testing.assert_close(value, before_params[name] + 1.0, rtol=0, atol=0)
        else:                                        # restored bit for bit
            torch.testing.assert_close(value, before_params[name], rtol=0, atol=0)
    assert out["best_state_space_divergence"] == (after if kept else 0.7)


@pytest.mark.parametrize("fit_fallback, stage_fallback, after, kept", [
    (False, True, 0.4, False),     # a lower D_stsp of the wrong kind does not replace the right kind
    (True, False, 0.9, True),      # the right kind replaces a fallback whatever the D_stsp
    (False, False, 0.4, True), (True, True, 0.4, True), (True, True, 0.9, False)])
def test_with_select_regime_a_polish_that_falls_back_to_the_wrong_kind_never_replaces_the_right_kind(
        fit_fallback, stage_fallback, after, kept):
    def engine(model, data, *, seed, **options):
        out = stub_engine(after)(model, data, seed=seed, **options)
        return {**out, "regime_fallback": stage_fallback}

    model = torch.nn.Linear(3, 2)
    history = {"best_state_space_divergence": 0.7, "best_epoch": 5, "regime_fallback": fit_fallback}
    out = polish_fit(engine, model, history, None, seed=0, engine_options={"select_regime": "periodic"},
                     polish={"lr": 1e-4})
    assert out["polish"]["kept"] is kept
    # the history speaks of the state the model holds
    assert out["regime_fallback"] is (stage_fallback if kept else fit_fallback)
    assert out["best_state_space_divergence"] == (after if kept else 0.7)


def test_a_polished_fit_is_the_fit_then_a_warm_started_fit_with_the_stage_options():
    data = circle()
    plain = quiet(PLRNN(latent_dim=2, readout="identity", seed=4), data)
    polished = quiet(PLRNN(latent_dim=2, readout="identity", seed=4), data, polish=POLISH)
    rec = polished.history_["polish"]
    # the first stage is the plain fit: the same training score, an independent run
    assert rec["score_before"] == plain.history_["best_state_space_divergence"]
    # the second is what warm-starting the plain fit with the stage's options gives
    warm = copy.deepcopy(plain)
    quiet(warm, data, warm_start=True, **POLISH)
    assert rec["score_after"] == warm.history_["best_state_space_divergence"]
    assert len(rec["history"]["train_loss"]) == POLISH["n_epochs"]
    assert rec["kept"] == (rec["score_after"] < rec["score_before"])
    expected = warm if rec["kept"] else plain
    for (name, a), (_, b) in zip(polished.model_.state_dict().items(), expected.model_.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert polished.history_["best_state_space_divergence"] == min(rec["score_before"], rec["score_after"])


def test_a_checkpointed_fit_polishes_its_kept_state_as_one_without_a_checkpoint(tmp_path):
    data = circle()
    options = dict(FIT, n_epochs=4)
    plain = quiet(PLRNN(latent_dim=2, readout="identity", seed=4), data, polish=POLISH, **options)
    ckpt = tmp_path / "fit.pt"
    checked = quiet(PLRNN(latent_dim=2, readout="identity", seed=4), data, polish=POLISH, checkpoint=ckpt, **options)
    # the stage trained its own epochs from the kept state; it used to resume the fit's checkpoint
    # (POLISH's 3 epochs <= the fit's 4: nothing trained, and nothing could be kept)
    stage = checked.history_["polish"]["history"]
    assert "resumed_from_epoch" not in stage and len(stage["train_loss"]) == POLISH["n_epochs"]
    for key in ("score_before", "score_after", "kept"):
        assert checked.history_["polish"][key] == plain.history_["polish"][key], key
    for (name, a), (_, b) in zip(checked.model_.state_dict().items(), plain.model_.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert ckpt.exists()                             # the fit's own checkpoint is still written


def test_no_polish_is_a_plain_fit():
    a = quiet(PLRNN(latent_dim=2, readout="identity", seed=0), circle(), polish={})
    b = quiet(PLRNN(latent_dim=2, readout="identity", seed=0), circle())
    assert "polish" not in a.history_
    for (name, x), (_, y) in zip(a.model_.state_dict().items(), b.model_.state_dict().items()):
        torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("method, polish, options, fragment", [
    ("teacher-forcing", 3, {}, "must be a mapping"),
    ("teacher-forcing", {"eval_steps": 100}, {}, "cannot set ['eval_steps']"),
    ("teacher-forcing", {"select_regime": "periodic"}, {}, "cannot set ['select_regime']"),
    ("teacher-forcing", {"eval_every": 0}, {}, "needs scored free runs"),
    ("teacher-forcing", {"lr": 1e-4}, {"eval_every": 0}, "needs scored free runs"),
    ("laplace-em", {"lr": 1e-4}, {}, "needs a method that scores them"),
])
def test_check_polish_refuses_what_it_cannot_compare(method, polish, options, fragment):
    with pytest.raises(ValueError, match="polish") as err:
        check_polish(method, polish, options)
    assert fragment in str(err.value)
    assert check_polish("teacher-forcing", None, {}) is None and check_polish("teacher-forcing", {}, {}) is None


def test_fit_names_polish_when_its_options_are_unknown():
    with pytest.raises(ValueError, match=r"`polish`: .*does not accept the option\(s\) \['best_of'\]"):
        quiet(PLRNN(latent_dim=2, readout="identity", seed=0), circle(), polish={"best_of": 2})


def test_a_grid_point_and_fit_md_record_the_polish(tmp_path):
    from test_restarts import run_tiny_point

    from dsident.cli_main_job import _polish_lines

    rec, saved = run_tiny_point(tmp_path, 0, polish={"lr": 1e-4, "n_epochs": 1})
    assert rec["polish"] == {k: saved["polish"][k] for k in ("score_before", "score_after", "kept", "best_epoch")}
    (line,) = _polish_lines(saved)
    assert line.startswith('- polished ({"lr": 0.0001, "n_epochs": 1}): training D_stsp ')
    assert ("its state is kept" in line) == saved["polish"]["kept"]
    history = {"polish": {"options": {"lr": 1e-4}, "score_before": 0.5, "score_after": math.inf, "kept": False}}
    assert _polish_lines(history) == ['- polished ({"lr": 0.0001}): training D_stsp 0.5 → –, no better, so the '
                                      "fit's kept state stands"]
    assert _polish_lines({}) == []
