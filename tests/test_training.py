"""The one training loop of the gradient engines (inference/training.py): hooks, best state,
divergence, and checkpoints that resume an interrupted run exactly, through both engines."""
import math

import numpy as np
import pytest
import torch

import dsident.inference.bptt as bptt_module
import dsident.inference.teacher_forcing as tf_module
from dsident.data.container import as_dataset
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.inference.bptt import fit_bptt, make_bptt_loss
from dsident.inference.teacher_forcing import fit_teacher_forcing
from dsident.inference.training import Evaluation, TrainingDivergedError, train_loop
from dsident.inference.windows import RandomWindows, ShuffledWindows, make_windows
from dsident.model import StateSpaceModel
from dsident.observations import Gaussian


def rotation_data(n_trials=4, n_time=40, seed=0):
    """A slowly decaying rotation, observed directly (float64, NaN-free)."""
    rng = np.random.default_rng(seed)
    c, s = np.cos(0.3) * 0.95, np.sin(0.3) * 0.95
    x = np.empty((n_trials, n_time, 2))
    x[:, 0] = rng.normal(size=(n_trials, 2))
    for t in range(1, n_time):
        x[:, t] = x[:, t - 1] @ np.array([[c, -s], [s, c]]).T
    return as_dataset(x, dt=0.1)


def plrnn_model(seed=0, penalty="none"):
    return StateSpaceModel(PLRNN(2, seed=seed, penalty=penalty), Gaussian(2, 2, readout="identity"), dt=0.1)


def shallow_model(seed=2):
    return StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=seed), Gaussian(2, 2, readout="identity"), dt=0.1)


def periodic_data(n_time=300, dt=0.1):
    t = np.arange(n_time) * dt
    return np.stack([np.sin(t), np.cos(t)], -1)


def loop_kwargs(**extra):
    """A small BPTT-like loop: shuffled windows, the free-running loss, Adam."""
    sampler = ShuffledWindows(make_windows(rotation_data(), 10), 4, torch.float32, torch.device("cpu"))
    return {**dict(loss_fn=make_bptt_loss("mse", "invert"), sampler=sampler, n_epochs=5, lr=1e-2, seed=0,
                   progress=False, device="cpu", settings={"engine": "test"}), **extra}


class ScriptedScores:
    """An ``evaluate`` hook returning given scores in turn and keeping the state it scored."""

    def __init__(self, scores):
        self.scores, self.states, self.epochs = list(scores), [], []

    def __call__(self, model, progress):
        self.states.append({k: v.clone() for k, v in model.state_dict().items()})
        self.epochs.append(progress.epoch)
        score = self.scores[len(self.epochs) - 1]
        return Evaluation(score=score, values={"scripted": score})


def interrupt_on_call(monkeypatch, module, name, n_call):
    """Make ``module.name`` raise KeyboardInterrupt on its ``n_call``-th call (a crash mid-epoch)."""
    original, calls = getattr(module, name), []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == n_call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def assert_same_parameters(a, b):
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)


# ---------------------------------------------------------------------------------------------
# hooks, counters and the best state
# ---------------------------------------------------------------------------------------------
def test_hooks_see_the_counters_and_the_best_scored_state_is_kept():
    model = plrnn_model(penalty="manifold")
    batches_seen, epochs_seen = [], []
    scorer = ScriptedScores([3.0, 1.0, 2.0])
    history = train_loop(model, **loop_kwargs(
        eval_every=2, evaluate=scorer, score_name="scripted",
        on_batch=lambda m, p, batch, aux: batches_seen.append((p.epoch, p.n_batches_done)) or {"batch_size": 4},
        on_epoch=lambda m, p: epochs_seen.append(p.train_loss) or {"twice_loss": 2 * p.train_loss}))
    # 16 windows of 10 steps, batches of 4: 4 batches per epoch, counted across epochs
    assert batches_seen == [(e, 4 * e + i + 1) for e in range(5) for i in range(4)]
    assert history["n_batches_done"] == 20 and history["batch_size"] == [4] * 20
    assert epochs_seen == history["train_loss"] and history["twice_loss"] == [2 * v for v in epochs_seen]
    # evaluated every 2 epochs and after the last one; the lowest score (epoch 3) wins
    assert scorer.epochs == history["eval_epoch"] == [1, 3, 4]
    assert history["scripted"] == [3.0, 1.0, 2.0]
    assert history["best_epoch"] == 3 and history["best_scripted"] == 1.0
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, scorer.states[1][name], rtol=0, atol=0, msg=name)
    # a constant learning rate; the recorded regularization is that of each epoch's final state
    assert history["lr"] == [1e-2] * 5
    for epoch, state in zip(scorer.epochs, scorer.states):
        model.load_state_dict(state)
        assert history["regularization"][epoch] == pytest.approx(float(model.dynamics.regularization().detach()), rel=1e-6)


def test_callback_sees_each_epoch_and_its_model_and_can_stop_training():
    model = plrnn_model()
    seen, states = [], []

    def callback(epoch, record, m):
        seen.append((epoch, dict(record)))
        states.append({k: v.clone() for k, v in m.state_dict().items()})
        return epoch == 3                                       # stop after the fourth epoch

    scorer = ScriptedScores([3.0, 1.0, 2.0, 4.0])
    history = train_loop(model, **loop_kwargs(evaluate=scorer, score_name="scripted", callback=callback))
    assert [e for e, _ in seen] == history["epoch"] == [0, 1, 2, 3]
    assert history["stopped_by_callback"] == 3 and history["n_epochs_run"] == 4
    for epoch, record in seen:
        assert record["train_loss"] == history["train_loss"][epoch]
        assert record["grad_norm"] == history["grad_norm"][epoch]
        assert record["scripted"] == scorer.scores[epoch]
    # the callback saw the state each epoch ended in (the scorer saw the same one) ...
    for got, scored in zip(states, scorer.states):
        for name in got:
            torch.testing.assert_close(got[name], scored[name], rtol=0, atol=0, msg=name)
    # ... and after the stop the model holds the best scored state (epoch 1), not the last one
    assert history["best_epoch"] == 1
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, states[1][name], rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("engine", ["bptt", "teacher-forcing"])
def test_engines_pass_the_callback_and_lr_backoff_through(engine):
    data = as_dataset(periodic_data(), dt=0.1)
    epochs = []
    options = dict(n_epochs=3, seq_len=20, batch_size=4, seed=0, progress=False, lr_backoff=2, rewind_after=7,
                   callback=lambda epoch, record, m: epochs.append((epoch, record["train_loss"])) or None)
    if engine == "bptt":
        history = fit_bptt(shallow_model(), data, **options)
    else:
        history = fit_teacher_forcing(shallow_model(), data, batches_per_epoch=2, eval_every=0, **options)
    assert epochs == list(zip(history["epoch"], history["train_loss"])) and len(epochs) == 3
    assert "stopped_by_callback" not in history
    assert history["settings"]["lr_backoff"] == 2 and history["lr_backoffs"] == []
    assert history["settings"]["rewind_after"] == 7 and history["rewinds"] == []


def test_penalties_are_trained_but_not_reported_as_data_loss():
    model = plrnn_model()

    def no_data(m, batch):                       # a data term without gradient: only the penalty trains
        return 0.0 * m.dynamics.h.sum()

    before = float((model.dynamics.h.detach() - 3.0).abs().max())
    history = train_loop(model, **{**loop_kwargs(), "loss_fn": no_data, "lr": 0.1},
                         penalties=lambda m: [(m.dynamics.h - 3.0).square().sum()])
    assert history["train_loss"] == [0.0] * 5
    assert float((model.dynamics.h.detach() - 3.0).abs().max()) < before - 0.3


def test_divergence_after_a_scored_epoch_restores_the_best_state():
    model = plrnn_model()
    base_loss = make_bptt_loss("mse", "invert")
    calls = []

    def poisoned(m, batch):                      # finite for three epochs (4 batches each), then NaN
        calls.append(1)
        loss = base_loss(m, batch)
        return loss * math.nan if len(calls) > 12 else loss

    scorer = ScriptedScores([2.0, 1.0, 5.0])
    kwargs = {**loop_kwargs(), "loss_fn": poisoned}
    with pytest.warns(RuntimeWarning, match=r"training loss became nan at epoch 3.*best state.*epoch 1"):
        history = train_loop(model, **kwargs, evaluate=scorer)
    assert history["diverged"] and history["epoch"] == [0, 1, 2] and history["best_epoch"] == 1
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, scorer.states[1][name], rtol=0, atol=0, msg=name)
    calls.clear()
    with pytest.raises(TrainingDivergedError, match="epoch 3"):
        train_loop(plrnn_model(), **kwargs, evaluate=ScriptedScores([2.0, 1.0, 5.0]), on_divergence="raise")


def _poisoned_at(indices):
    """The BPTT loss, NaN on the batches of the given running indices (counted over epochs)."""
    base_loss, calls = make_bptt_loss("mse", "invert"), []

    def loss_fn(m, batch):
        calls.append(1)
        loss = base_loss(m, batch)
        return loss * math.nan if len(calls) - 1 in indices else loss
    return loss_fn


def _without(sampler, indices):
    """The same batches in the same order, less those of the given running indices."""
    count = [0]

    def draw(rng):
        for batch in sampler(rng):
            count[0] += 1
            if count[0] - 1 not in indices:
                yield batch
    return draw


def test_skipped_batches_equal_training_without_them():
    poisoned = {2, 7, 13}                          # 4 batches an epoch: epochs 0, 1 and 3
    skipping = plrnn_model()
    with pytest.warns(RuntimeWarning, match=r"3 training batch\(es\) had a non-finite loss"):
        history = train_loop(skipping, **{**loop_kwargs(), "loss_fn": _poisoned_at(poisoned)}, skip_nonfinite=1)
    assert not history["diverged"] and history["skipped_batches"] == [1, 1, 0, 1, 0]
    assert history["n_batches_done"] == 20 - 3
    # the independent route: the same loop on a sampler that never yields those batches
    reference = plrnn_model()
    kwargs = loop_kwargs()
    plain = train_loop(reference, **{**kwargs, "sampler": _without(kwargs["sampler"], poisoned)})
    np.testing.assert_allclose(history["train_loss"], plain["train_loss"], rtol=1e-6)
    for name, value in skipping.state_dict().items():
        torch.testing.assert_close(value, reference.state_dict()[name], rtol=0, atol=0, msg=name)


def test_more_refused_batches_in_a_row_than_allowed_stop_training():
    kwargs = {**loop_kwargs(), "loss_fn": _poisoned_at({5, 6})}
    with pytest.warns(RuntimeWarning, match="training loss became nan at epoch 1"):
        history = train_loop(plrnn_model(), **kwargs, skip_nonfinite=1)
    assert history["diverged"] and history["epoch"] == [0]
    # two in a row are allowed with skip_nonfinite=2, and none by default
    kwargs = {**loop_kwargs(), "loss_fn": _poisoned_at({5, 6})}
    with pytest.warns(RuntimeWarning, match=r"2 training batch\(es\)"):
        assert not train_loop(plrnn_model(), **kwargs, skip_nonfinite=2)["diverged"]
    kwargs = {**loop_kwargs(), "loss_fn": _poisoned_at({5})}
    with pytest.warns(RuntimeWarning, match="training loss became nan at epoch 1"):
        assert train_loop(plrnn_model(), **kwargs)["diverged"]


def _norm_score(model, progress):
    """A score that depends on the state only, so that a redone epoch scores as the first time."""
    return Evaluation(score=float(sum(p.detach().abs().sum() for p in model.parameters())))


def test_lr_backoff_equals_a_resume_from_the_epoch_before_with_half_the_learning_rate(tmp_path):
    """Batch 8 (the first of epoch 2) fails once: training goes back to the start of epoch 1 with
    half the learning rate. The independent route: stop after epoch 0 with a checkpoint, and
    resume it with ``lr`` and ``lr_end`` halved."""
    kwargs = {**loop_kwargs(lr_end=1e-3), "evaluate": _norm_score, "score_name": "norm"}
    backed = plrnn_model()
    with pytest.warns(RuntimeWarning, match=r"epoch\(s\) \[2\] and went back one epoch.*now 0.5 ×"):
        history = train_loop(backed, **{**kwargs, "loss_fn": _poisoned_at({8})}, lr_backoff=1)
    assert not history["diverged"] and history["lr_backoffs"] == [2]
    assert history["epoch"] == history["eval_epoch"] == [0, 1, 2, 3, 4]
    assert history["n_batches_done"] == 20
    path = tmp_path / "ckpt.pt"
    reference = plrnn_model()
    train_loop(reference, **kwargs, checkpoint=path, checkpoint_every=1, callback=lambda e, r, m: e == 0)
    resumed = train_loop(reference, **{**kwargs, "lr": 5e-3, "lr_end": 5e-4}, checkpoint=path)
    np.testing.assert_allclose(history["train_loss"], resumed["train_loss"], rtol=1e-6)
    np.testing.assert_allclose(history["lr"][1:], np.array(resumed["lr"][1:]), rtol=1e-12)
    assert history["lr"][0] == resumed["lr"][0] == 1e-2
    assert history["best_epoch"] == resumed["best_epoch"] and history["best_norm"] == resumed["best_norm"]
    assert_same_parameters(backed, reference)


def test_lr_backoff_runs_out_then_training_stops_and_the_scale_survives_a_resume(tmp_path):
    # the redone epoch 2 fails again (batch 13): a second backoff, or the stop when none is left
    with pytest.warns(RuntimeWarning, match="training loss became nan at epoch 2"), \
            pytest.warns(RuntimeWarning, match="went back one epoch"):
        history = train_loop(plrnn_model(), **{**loop_kwargs(), "loss_fn": _poisoned_at({8, 13})}, lr_backoff=1)
    assert history["diverged"] and history["lr_backoffs"] == [2] and history["epoch"] == [0, 1]
    with pytest.warns(RuntimeWarning, match=r"now 0.25 ×"):
        history = train_loop(plrnn_model(), **{**loop_kwargs(), "loss_fn": _poisoned_at({8, 13})}, lr_backoff=2)
    assert not history["diverged"] and history["lr_backoffs"] == [2, 2]
    np.testing.assert_allclose(history["lr"], [1e-2] + [2.5e-3] * 4)
    # a run stopped after the backoff and resumed keeps the lowered rate and ends where the whole run did
    whole, parts = plrnn_model(), plrnn_model()
    with pytest.warns(RuntimeWarning, match="went back"):
        train_loop(whole, **{**loop_kwargs(), "loss_fn": _poisoned_at({8})}, lr_backoff=1)
    path = tmp_path / "ckpt.pt"
    with pytest.warns(RuntimeWarning, match="went back"):
        train_loop(parts, **{**loop_kwargs(), "loss_fn": _poisoned_at({8})}, lr_backoff=1, checkpoint=path,
                   callback=lambda e, r, m: e == 2)
    assert torch.load(path, weights_only=True)["lr_scale"] == 0.5
    with pytest.warns(RuntimeWarning, match="went back"):
        rest = train_loop(parts, **loop_kwargs(), lr_backoff=1, checkpoint=path)
    assert rest["lr_backoffs"] == [2] and rest["lr"][-1] == 5e-3
    assert_same_parameters(whole, parts)


# ---------------------------------------------------------------------------------------------
# rewinds: back to the best scored state after a plateau, with half the learning rate
# ---------------------------------------------------------------------------------------------
def test_a_rewind_equals_a_resume_from_the_best_epoch_with_half_the_learning_rate(tmp_path):
    """Scores 3, 1, 2, 2 with ``rewind_after=2``: after epoch 3 training goes back to epoch 1's
    state (weights and optimizer) and trains epochs 4-5 at half the rate. The independent route:
    stop after epoch 1 with a checkpoint, move its next epoch to 4 and its rate scale to 0.5, and
    resume it."""
    kwargs = loop_kwargs(n_epochs=6, lr_end=1e-3)
    scorer = ScriptedScores([3.0, 1.0, 2.0, 2.0, 0.5, 0.4])
    seen = {}
    rewound = plrnn_model()
    history = train_loop(rewound, **kwargs, evaluate=scorer, score_name="s", rewinds=1, rewind_after=2,
                         callback=lambda e, r, m: seen.update({e: {k: v.clone() for k, v in m.state_dict().items()}}))
    assert history["rewinds"] == [3] and history["eval_epoch"] == [0, 1, 2, 3, 4, 5]
    # the callback of epoch 3 already sees the rewound model: epoch 1's scored state
    for name, value in seen[3].items():
        torch.testing.assert_close(value, scorer.states[1][name], rtol=0, atol=0, msg=name)
    schedule = [1e-2 * (1e-1) ** (e / 5) for e in range(6)]
    np.testing.assert_allclose(history["lr"], schedule[:4] + [0.5 * v for v in schedule[4:]], rtol=1e-12)
    assert history["best_epoch"] == 5
    path = tmp_path / "ckpt.pt"
    reference = plrnn_model()
    train_loop(reference, **kwargs, evaluate=ScriptedScores([3.0, 1.0]), score_name="s", checkpoint=path,
               callback=lambda e, r, m: e == 1)
    payload = torch.load(path, weights_only=True)
    payload.update(next_epoch=4, lr_scale=0.5)
    torch.save(payload, path)
    resumed = train_loop(reference, **kwargs, evaluate=ScriptedScores([0.5, 0.4]), score_name="s", checkpoint=path)
    np.testing.assert_allclose(history["train_loss"][4:], resumed["train_loss"][2:], rtol=1e-6)
    assert_same_parameters(rewound, reference)


def test_rewinds_run_out_and_a_resumed_run_rewinds_as_the_whole_run_did(tmp_path):
    scores = [1.0] + [2.0] * 7
    history = train_loop(plrnn_model(), **loop_kwargs(n_epochs=8), evaluate=ScriptedScores(scores), score_name="s",
                         rewinds=2, rewind_after=2)
    # plateaus end at epochs 2 and 4; the third (epoch 6) finds none left; the rate halves twice
    assert history["rewinds"] == [2, 4] and history["best_epoch"] == 0
    np.testing.assert_allclose(history["lr"], [1e-2] * 3 + [5e-3] * 2 + [2.5e-3] * 3)
    never = train_loop(plrnn_model(), **loop_kwargs(n_epochs=8), evaluate=ScriptedScores(scores), score_name="s")
    assert never["rewinds"] == [] and never["lr"] == [1e-2] * 8
    # rewinds after epochs 3 and 6, then two new bests (the model ends at epoch 8's state, trained
    # on from the second rewind's optimizer state). Stopped after epoch 4 (one plateau epoch counted
    # since the first rewind, four scored epochs since the best) and resumed: the same fit
    scores = [1.0] + [2.0] * 6 + [0.5, 0.4]
    options = dict(score_name="s", rewinds=2, rewind_after=3)
    whole, parts = plrnn_model(), plrnn_model()
    history = train_loop(whole, **loop_kwargs(n_epochs=9), evaluate=ScriptedScores(scores), **options)
    assert history["rewinds"] == [3, 6] and history["best_epoch"] == 8
    path = tmp_path / "ckpt.pt"
    train_loop(parts, **loop_kwargs(n_epochs=9), evaluate=ScriptedScores(scores), **options, checkpoint=path,
               callback=lambda e, r, m: e == 4)
    rest = train_loop(parts, **loop_kwargs(n_epochs=9), evaluate=ScriptedScores(scores[5:]), **options,
                      checkpoint=path)
    assert rest["rewinds"] == [3, 6] and rest["lr"] == history["lr"]
    assert_same_parameters(whole, parts)


def test_rewinds_need_scored_epochs():
    with pytest.raises(ValueError, match=r"`rewinds` \(1\).*evaluate=None"):
        train_loop(plrnn_model(), **loop_kwargs(), rewinds=1)
    data = as_dataset(periodic_data(), dt=0.1)
    with pytest.raises(ValueError, match=r"`rewinds`.*eval_every=0"):
        fit_teacher_forcing(shallow_model(), data, n_epochs=2, seq_len=20, batches_per_epoch=2, eval_every=0,
                            rewinds=1, progress=False)


def test_evaluation_can_stop_training_as_diverged():
    def bad_score(model, progress):
        return Evaluation(score=math.nan, diverged=f"score NaN at epoch {progress.epoch}")

    with pytest.warns(RuntimeWarning, match="score NaN at epoch 0"):
        history = train_loop(plrnn_model(), **loop_kwargs(), evaluate=bad_score)
    assert history["diverged"] and history["n_epochs_run"] == 1 and history["best_epoch"] == -1


# ---------------------------------------------------------------------------------------------
# the loop computes the engines' losses on the batches it draws
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_forcing_extremes_in_the_loop_are_one_step_and_free_running_losses(alpha):
    """One batch, one epoch: the recorded loss is that of the untrained model on the windows the
    loop drew. With α = 1 it is the one-step prediction error; with α = 0 BPTT's free-running loss."""
    data = periodic_data()
    model = shallow_model()
    untrained = shallow_model()
    history = fit_teacher_forcing(model, data, alpha=alpha, seq_len=25, batch_size=6, batches_per_epoch=1,
                                  n_epochs=1, eval_every=0, seed=4, progress=False, device="cpu")
    windows = RandomWindows(as_dataset(data, dt=0.1), 25, 6, 1, torch.float32, torch.device("cpu"))
    batch = next(iter(windows(np.random.default_rng([4, 0]))))     # the loop's generator of epoch 0
    with torch.no_grad():
        if alpha == 1.0:                         # identity readout, M = N: z_{t-1} = x_{t-1}
            pred = untrained.decode(untrained.dynamics.step(batch.x[:, :-1].reshape(-1, 2))).reshape(6, 24, 2)
            expected = float((pred - batch.x[:, 1:]).square().mean())
        else:
            # BPTT averages over all 25 steps, the first of which it reproduces exactly (the
            # identity readout inverts it); teacher forcing averages over the 24 predicted ones
            expected = float(make_bptt_loss("mse", "invert")(untrained, batch)) * 25 / 24
    assert history["train_loss"][0] == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------------------------------------
# checkpoints: an interrupted run resumes exactly
# ---------------------------------------------------------------------------------------------
def test_bptt_interrupted_mid_epoch_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    data = rotation_data()
    opts = dict(n_epochs=5, seq_len=10, batch_size=3, lr=1e-2, lr_end=1e-3, seed=7, progress=False, device="cpu")
    straight = plrnn_model(seed=1)
    h_straight = fit_bptt(straight, data, **opts)
    path = tmp_path / "bptt.pt"
    with monkeypatch.context() as patch:         # crash during epoch 3 (5 batches + validation per epoch)
        interrupt_on_call(patch, bptt_module, "free_run", 3 * 6 + 2)
        with pytest.raises(KeyboardInterrupt):
            fit_bptt(plrnn_model(seed=1), data, checkpoint=path, checkpoint_every=1, **opts)
    resumed = plrnn_model(seed=1)
    h_resumed = fit_bptt(resumed, data, checkpoint=path, **opts)
    assert h_resumed["resumed_from_epoch"] == 3 and h_resumed["n_batches_done"] == h_straight["n_batches_done"]
    for key in ("epoch", "train_loss", "val_loss", "lr", "grad_norm"):
        assert h_resumed[key] == h_straight[key], key
    assert h_resumed["best_epoch"] == h_straight["best_epoch"]
    assert_same_parameters(straight, resumed)


def test_teacher_forcing_interrupted_mid_epoch_resumes_alpha_and_batch_counter(tmp_path, monkeypatch):
    """α is re-estimated every 2 batches over epochs of 3, so the schedule straddles the epoch
    boundary: resuming needs α and the batch counter from the checkpoint."""
    data = periodic_data()
    opts = dict(alpha="adaptive", alpha_update_every=2, seq_len=20, batch_size=4, batches_per_epoch=3, n_epochs=5,
                lr=3e-3, lr_end=1e-3, teacher_noise=0.05, eval_every=2, eval_steps=100, seed=3, progress=False,
                device="cpu")
    straight = shallow_model()
    h_straight = fit_teacher_forcing(straight, data, **opts)
    path = tmp_path / "tf.pt"
    with monkeypatch.context() as patch:         # the 5th α update falls in epoch 3 (batch 10)
        interrupt_on_call(patch, tf_module, "estimate_alpha", 5)
        with pytest.raises(KeyboardInterrupt):
            fit_teacher_forcing(shallow_model(), data, checkpoint=path, checkpoint_every=1, **opts)
    resumed = shallow_model()
    h_resumed = fit_teacher_forcing(resumed, data, checkpoint=path, **opts)
    assert h_resumed["resumed_from_epoch"] == 3
    assert h_straight["alpha_update_batch"] == [2, 4, 6, 8, 10, 12, 14]
    for key in ("train_loss", "alpha", "alpha_update_batch", "alpha_after_update", "jacobian_bound", "eval_epoch",
                "state_space_divergence"):
        assert h_resumed[key] == h_straight[key], key
    assert h_resumed["best_epoch"] == h_straight["best_epoch"]
    assert_same_parameters(straight, resumed)


def test_a_checkpoint_of_another_seed_or_layout_is_refused(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = plrnn_model()
    train_loop(model, **{**loop_kwargs(), "n_epochs": 1}, checkpoint=path)
    with pytest.raises(ValueError, match="seed=0.*not seed=1"):
        train_loop(plrnn_model(), **{**loop_kwargs(), "seed": 1}, checkpoint=path)
    payload = torch.load(path, weights_only=True)
    payload.pop("format_version")
    torch.save(payload, path)
    with pytest.raises(ValueError, match="layout version None"):
        train_loop(plrnn_model(), **loop_kwargs(), checkpoint=path)


@pytest.mark.parametrize("kwargs, match", [
    ({"n_epochs": 0}, "`n_epochs`"),
    ({"lr": 0.0}, "`lr`"),
    ({"lr_end": -1.0}, "`lr_end`"),
    ({"grad_clip": 0}, "`grad_clip`"),
    ({"eval_every": -1}, "`eval_every`"),
    ({"checkpoint_every": 0}, "`checkpoint_every`"),
    ({"lr_backoff": -1}, "`lr_backoff`"),
    ({"rewinds": -1}, "`rewinds`"),
    ({"rewind_after": 0}, "`rewind_after`"),
    ({"optimizer": "sgd"}, "`optimizer`"),
    ({"on_divergence": "ignore"}, "`on_divergence`"),
    ({"skip_nonfinite": -1}, "`skip_nonfinite`"),
])
def test_bad_loop_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_loop(plrnn_model(), **{**loop_kwargs(), **kwargs})
