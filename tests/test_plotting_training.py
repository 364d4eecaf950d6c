"""plot_training_history: what each panel draws, for the teacher-forcing, SVI and Laplace-EM
histories, and the refusal of a history with nothing to draw."""
import numpy as np
import pytest

from dsident.inference.training_trend import training_trend
from dsident.plotting_training import plot_training_history


def tf_history():
    scores = [9, 9, None, 9, 8, 8, 8, 8, 4.0, 5.0, 3.0, 6.0, 2.0, 3.0, 2.5, 1.5]
    return {"epoch": list(range(16)), "train_loss": list(np.linspace(1.0, 0.1, 16)), "lr": [1e-3] * 16,
            "eval_epoch": list(range(16)), "state_space_divergence": scores, "best_epoch": 15,
            "n_epochs_run": 16}


def lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_a_teacher_forcing_history_draws_its_loss_and_its_scored_runs(tmp_path):
    h = tf_history()
    fig = plot_training_history(h, title="t", save=tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 0
    loss_ax, runs_ax = fig.axes
    np.testing.assert_allclose(lines(loss_ax)["train_loss"].get_ydata(), h["train_loss"])
    assert loss_ax.get_yscale() == "log"
    runs = lines(runs_ax)["scored free runs"]
    assert len(runs.get_xdata()) == 15                         # the unscored (None) epoch is left out
    kept = lines(runs_ax)["kept (epoch 15)"]
    assert (kept.get_xdata()[0], kept.get_ydata()[0]) == (15, 1.5)
    trend = training_trend(h)
    medians = lines(runs_ax)["medians, 3rd / last quarter"]
    assert medians.get_ydata()[0] == pytest.approx(trend["median_third"])
    assert runs_ax.get_title() == "still improving when it stopped"
    assert "polish stage (kept)" not in lines(runs_ax)
    h["polish"] = {"score_after": 1.2, "kept": True}
    stage = lines(plot_training_history(h).axes[1])["polish stage (kept)"]
    assert (stage.get_xdata()[0], stage.get_ydata()[0]) == (16, 1.2)


def test_a_panel_without_a_finite_score_says_why():
    h = {**tf_history(), "eval_epoch": [0], "state_space_divergence": [float("nan")], "free_run_regime": ["diverged"]}
    texts = [t.get_text() for t in plot_training_history(h).axes[1].texts]
    assert texts == ["scored free runs: all 1 diverged"]
    h["free_run_regime"] = ["fixed point"]
    assert [t.get_text() for t in plot_training_history(h).axes[1].texts] == \
        ["scored free runs: none of the 1 has a finite D_stsp"]
    assert len(plot_training_history(tf_history()).axes[1].texts) == 0


def test_a_one_epoch_loss_is_drawn_as_a_point():
    # `--option n_epochs=1`: one loss value; a plain line through it left the panel empty
    h = {"epoch": [0], "train_loss": [0.4], "eval_epoch": [0], "state_space_divergence": [12.0], "best_epoch": 0}
    loss = lines(plot_training_history(h).axes[0])["train_loss"]
    assert loss.get_marker() == "o" and list(loss.get_ydata()) == [0.4]
    assert lines(plot_training_history(tf_history()).axes[0])["train_loss"].get_marker() in ("None", None, "")


def test_svi_and_em_histories_draw_their_own_loss():
    svi = {"step": [0, 1, 2], "loss": [3.0, 2.0, 1.5], "elbo": [-3.0, -2.0, -1.5]}
    (ax,) = plot_training_history(svi).axes
    np.testing.assert_allclose(lines(ax)["loss"].get_ydata(), [3.0, 2.0, 1.5])
    em = {"log_likelihood": [-50.0, -20.0, -10.0], "stage": [0, 0, 1]}
    (ax,) = plot_training_history(em).axes
    np.testing.assert_allclose(lines(ax)["log_likelihood"].get_xdata(), [0, 1, 2])
    assert ax.get_yscale() == "linear"                           # negative values: no log axis


@pytest.mark.parametrize("bad", [{"settings": {}}, [1, 2, 3]])
def test_a_history_with_nothing_to_draw_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="`history`"):
        plot_training_history(bad)


def test_a_loss_with_a_missing_epoch_stays_on_a_log_axis():
    # one NaN (None in a saved history) put a loss falling from 1000 to 0.1 on a linear axis
    history = {"epoch": [0, 1, 2, 3, 4], "train_loss": [1000.0, None, 10.0, 1.0, 0.1]}
    (ax,) = plot_training_history(history).axes
    assert ax.get_yscale() == "log"
    np.testing.assert_array_equal(np.isnan(lines(ax)["train_loss"].get_ydata()), [0, 1, 0, 0, 0])
    # a validation loss that turns negative keeps the axis linear
    history |= {"eval_epoch": [2, 4], "val_loss": [5.0, -1.0]}
    assert plot_training_history(history).axes[0].get_yscale() == "linear"


@pytest.mark.parametrize("series", ["abc", 3.0, [1.0, "x"]])
def test_a_loss_that_is_not_a_list_of_numbers_is_refused_by_name(series):
    # a string or a number failed with "could not convert string to float: 'a'" or
    # "object of type 'float' has no len()"
    with pytest.raises(ValueError, match=r"`history\['train_loss'\]` must be a list of numbers"):
        plot_training_history({"epoch": [0, 1], "train_loss": series})
