"""dsident.plotting: every figure builds headless, returns a Figure, saves a PNG, and rejects bad input."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.figure import Figure

from dsident import plotting
from dsident.data import as_dataset


def _lorenz_like(n: int = 1500, seed: int = 0) -> np.ndarray:
    """A cheap 3-channel quasi-periodic curve (shape (time, 3)) standing in for an attractor."""
    t = np.arange(n) * 0.02
    rng = np.random.default_rng(seed)
    return np.stack([np.sin(t), np.cos(1.3 * t), np.sin(0.7 * t) * np.cos(t)], axis=1) + 0.01 * rng.normal(size=(n, 3))


@pytest.fixture
def pair():
    true = as_dataset(_lorenz_like(seed=0), dt=0.02, name="toy")
    gen = as_dataset(_lorenz_like(seed=1), dt=0.02)
    return true, gen


def _is_png(path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("func", [plotting.plot_attractor, plotting.plot_attractor_pairs,
                                  plotting.plot_time_series, plotting.plot_power_spectra,
                                  plotting.plot_reconstruction])
def test_data_figures_return_figure_and_save_png(func, pair, tmp_path):
    true, gen = pair
    path = tmp_path / "sub" / "fig.png"
    fig = func(true, gen, save=path)
    assert isinstance(fig, Figure)
    assert _is_png(path)


def test_attractor_is_3d_for_three_channels_and_2d_for_two(pair):
    true, gen = pair
    fig3 = plotting.plot_attractor(true, gen)
    assert len(fig3.axes) == 2 and all(ax.name == "3d" for ax in fig3.axes)
    fig2 = plotting.plot_attractor(true.isel(channel=[0, 1]), None)
    assert len(fig2.axes) == 1 and fig2.axes[0].name == "rectilinear"


def test_pairs_figure_names_each_pairs_divergence_and_frames_the_worst(pair):
    from dsident.metrics import state_space_projections

    true, gen = pair
    shuffled = gen.copy(deep=True)
    shuffled["x"].values[0, :, 2] = np.random.default_rng(0).permutation(shuffled["x"].values[0, :, 2])
    d = state_space_projections(true, shuffled)
    fig = plotting.plot_attractor_pairs(true, shuffled, projections=d)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [f"D_stsp of the pair {d.values[i, j]:.3g}" for i, j in [(0, 1), (0, 2), (1, 2)]]
    worst = int(np.argmax([d.values[0, 1], d.values[0, 2], d.values[1, 2]]))
    assert worst != 0                                 # the shuffled channel 2 breaks its pairs, not (0, 1)
    framed = [ax.spines["left"].get_linewidth() == 2.0 for ax in fig.axes]
    assert framed == [k == worst for k in range(3)]
    with pytest.raises(ValueError, match="`projections` must be the \\(3, 3\\) matrix"):
        plotting.plot_attractor_pairs(true, gen, projections=np.zeros((2, 2)))


def test_time_series_draws_the_data_it_was_given(pair):
    true, gen = pair
    fig = plotting.plot_time_series(true, gen, n_steps=100)
    line = fig.axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), true["x"].values[0, :100, 0])
    np.testing.assert_allclose(line.get_xdata(), np.arange(100) * 0.02)


def test_power_spectra_match_the_metrics_spectrum(pair):
    """The plotted curve is the D_H spectrum of dsident.metrics (one implementation)."""
    from dsident.metrics import power_spectrum

    true, _ = pair
    fig = plotting.plot_power_spectra(true, None, max_frequency=1e9)
    expected = np.asarray(power_spectrum(true["x"].values[0], sigma=20.0))[:, 1]
    np.testing.assert_allclose(fig.axes[1].lines[0].get_ydata(), expected)
    assert fig.axes[1].lines[0].get_ydata().sum() == pytest.approx(1.0)
    logged = plotting.plot_power_spectra(true, None, max_frequency=1e9, log_power=True)
    assert logged.axes[1].get_yscale() == "log" and fig.axes[1].get_yscale() == "linear"
    np.testing.assert_allclose(logged.axes[1].lines[0].get_ydata(), expected)


@pytest.mark.parametrize("func", [plotting.plot_attractor, plotting.plot_attractor_pairs,
                                  plotting.plot_time_series, plotting.plot_power_spectra,
                                  plotting.plot_reconstruction])
def test_a_free_run_that_diverged_at_once_still_gets_its_figure(func, pair, tmp_path):
    # `dsident fit` draws these after a fit; a run with no finite sample crashed it there
    true, _ = pair
    gone = true.assign(x=true["x"].copy(data=np.full(true["x"].shape, np.nan)))
    fig = func(true, gone, save=tmp_path / "fig.png")
    assert _is_png(tmp_path / "fig.png")
    if func is plotting.plot_reconstruction:
        spectrum = fig.axes[2]
        assert [line.get_label() for line in spectrum.lines] == ["data"]
        assert "diverged" in spectrum.texts[0].get_text()


def test_ragged_padding_is_not_drawn():
    x = _lorenz_like(300)
    ds = as_dataset([x, x[:200]], dt=0.02)
    fig = plotting.plot_time_series(ds.isel(trial=[1]), None, n_steps=1000)
    assert len(fig.axes[0].lines[0].get_ydata()) == 200


def test_latent_trajectories_from_a_generated_dataset():
    z = np.cumsum(np.random.default_rng(0).normal(size=(1, 400, 4)), axis=1)
    ds = xr.Dataset({"z": (("trial", "time", "latent"), z)}, attrs={"dt": 0.1})
    fig = plotting.plot_latent_trajectories(ds)
    assert len(fig.axes[0].lines) == 4
    assert fig.axes[1].name == "3d"


def test_flow_field_of_a_plrnn_marks_its_fixed_points(tmp_path):
    import torch

    from dsident import analysis
    from dsident.dynamics import PLRNN

    dyn = PLRNN(2, seed=0)
    with torch.no_grad():  # a contracting linear map: one stable fixed point at z* = h / (1 - a)
        dyn.a.copy_(torch.tensor([0.5, 0.5]))
        dyn.W.zero_()
        dyn.h.copy_(torch.tensor([0.5, -0.25]))
    fps = analysis.fixed_points(dyn)
    fig = plotting.plot_flow_field(dyn, bounds=(-2, 2, -2, 2), n_grid=12, fixed_points=fps,
                                   save=tmp_path / "flow.png")
    marked = [ln for ln in fig.axes[0].lines if ln.get_marker() == "o" and len(ln.get_xdata())]
    assert len(marked) == 1
    np.testing.assert_allclose([marked[0].get_xdata()[0], marked[0].get_ydata()[0]], [1.0, -0.5], atol=1e-8)
    assert marked[0].get_markerfacecolor() in ("k", (0.0, 0.0, 0.0, 1.0))  # filled = stable
    assert _is_png(tmp_path / "flow.png")


def test_benchmark_summary_figure(tmp_path):
    results = xr.Dataset(
        {"D_stsp": ("point", [0.5, 0.7, np.nan]), "D_H": ("point", [0.1, 0.2, np.nan]),
         "status": ("point", np.array(["done", "done", "failed"]))},
        coords={"dataset": ("point", ["lorenz63"] * 3), "model": ("point", ["shplrnn", "shplrnn", "ltc"]),
                "method": ("point", ["teacher-forcing", "teacher-forcing", "svi"])})
    fig = plotting.plot_benchmark_summary(results, floor={"lorenz63": {"D_stsp": 0.62, "D_H": 0.04}},
                                          save=tmp_path / "s.png")
    assert [ax.get_xlabel() for ax in fig.axes] == ["D_stsp", "D_H"]
    assert _is_png(tmp_path / "s.png")


def test_benchmark_summary_names_the_floor_line_when_the_first_dataset_has_none(recwarn):
    # a recording whose floor cannot tell a fixed point apart is left out of the floors drawn; the
    # other dataset's dashed line must still be named "floor", with no empty legend beside it
    results = xr.Dataset(
        {"D_stsp": ("point", [12.0, 12.0]), "D_H": ("point", [0.14, 0.17]),
         "status": ("point", np.array(["done", "done"]))},
        coords={"dataset": ("point", ["/d/rec1.dat", "/d/vdp.csv"]), "model": ("point", ["shplrnn"] * 2),
                "method": ("point", ["teacher-forcing"] * 2)})
    fig = plotting.plot_benchmark_summary(results, floor={"/d/vdp.csv": {"D_stsp": 2.2, "D_H": 0.002}})
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["floor"]
    assert not [w for w in recwarn if "No artists with labels" in str(w.message)]
    # no floor drawn at all: no legend box
    assert all(ax.get_legend() is None for ax in plotting.plot_benchmark_summary(results, floor={}).axes)


@pytest.mark.parametrize("n_channels", [1, 2, 3])
def test_attractor_and_pairs_show_a_run_at_rest_as_a_point_on_the_datas_scale(n_channels):
    # a fixed point drifting by round-off: autoscaled, attractor.png blew that drift up to fill the
    # generated panel like an attractor, and pairs.png drew a line of zero length (nothing)
    true = as_dataset(_lorenz_like()[:, :n_channels], dt=0.02)
    still = as_dataset(np.full((1500, n_channels), 0.5) + 1e-7 * np.arange(1500)[:, None], dt=0.02)
    fig = plotting.plot_attractor(true, still)
    data_ax, run_ax = fig.axes
    assert run_ax.get_xlim() == data_ax.get_xlim() and run_ax.get_ylim() == data_ax.get_ylim()
    assert data_ax.get_xlim()[1] - data_ax.get_xlim()[0] > 1.0
    assert [ln.get_marker() for ln in run_ax.get_lines()][-1] == "o"
    if n_channels >= 2:
        (ax,) = plotting.plot_attractor_pairs(true.isel(channel=[0, 1]), still.isel(channel=[0, 1])).axes
        dot = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        assert len(dot) == 1 and dot[0].get_xdata()[0] == pytest.approx(0.5, abs=1e-3)


def test_bad_inputs_are_refused_with_clear_messages(pair):
    true, gen = pair
    with pytest.raises(ValueError, match="dims"):
        plotting.plot_attractor(true, gen, dims=(0, 1, 7))
    with pytest.raises(ValueError, match="shape"):
        plotting.plot_time_series(np.zeros((2, 2, 2, 2)))
    with pytest.raises(ValueError, match="no variable 'z'"):
        plotting.plot_latent_trajectories(true)
    with pytest.raises(ValueError, match="at least 2 channels"):
        plotting.plot_attractor_pairs(true.isel(channel=[0]))


def test_reconstruction_page_draws_data_and_run_on_one_scale_in_the_datas_time_unit():
    # a run that settled: autoscaled, its point would fill the panel like an attractor
    t = np.arange(2000)
    true = as_dataset(30 * np.sin(2 * np.pi * t / 40)[:, None] - 40, dt=0.05, channel_names=["V"],
                      provenance={"time_unit": "ms"})
    still = as_dataset(np.full((2000, 1), -63.0), dt=0.05, channel_names=["V"])
    fig = plotting.plot_reconstruction(true, still)
    data_ax, run_ax, spectrum_ax, series_ax = fig.axes
    assert run_ax.get_xlim() == data_ax.get_xlim() and run_ax.get_ylim() == data_ax.get_ylim()
    lo, hi = data_ax.get_xlim()
    assert lo < -70 and hi > -10 and hi - lo < 70          # the data's range (−70 … −10), padded
    marks = [line for line in run_ax.lines if line.get_marker() == "o"]
    assert len(marks) == 1 and marks[0].get_xydata().tolist() == [[-63.0, -63.0]]
    assert data_ax.get_ylabel() == "V, 10 samples later"
    assert series_ax.get_xlabel() == "time (ms)" and spectrum_ax.get_xlabel() == "frequency (1 / ms)"
    # a run far outside the data's range leaves the panel instead of shrinking the data to a dot
    wild = as_dataset(np.linspace(-63.0, 1e6, 2000)[:, None], dt=0.05, channel_names=["V"])
    data_ax, run_ax = plotting.plot_reconstruction(true, wild).axes[:2]
    # the data (span 60) keep at least a fifth of the axis, and the run's panel says it is cut
    lo, hi = run_ax.get_xlim()
    assert 60 / (hi - lo) >= 0.2 / (1 + 2 * 0.05) and data_ax.get_xlim() == (lo, hi)
    assert plotting._OUTSIDE in run_ax.get_title() and plotting._OUTSIDE not in data_ax.get_title()
    assert plotting._OUTSIDE not in plotting.plot_reconstruction(true, true).axes[1].get_title()
    drawn = run_ax.lines[0].get_xydata()
    assert (drawn[np.isfinite(drawn)] <= hi).all()        # the points beyond it are not drawn at all
    assert np.isfinite(plotting.plot_reconstruction(true, true).axes[1].lines[0].get_xydata()).all()


def test_flow_field_of_a_run_at_rest_is_sliced_through_its_fixed_point_in_a_readable_window(monkeypatch):
    # M = 3, z' = a z + W relu(z) + h with unit 2 driving unit 0: one stable fixed point in the
    # positive orthant, z* = (I - diag(a) - W)^-1 h; a run that has settled on it used to give a
    # window 1e-10 wide on a slice at z2 = 0 (where unit 0's flow is not that at z*)
    import torch

    from dsident import analysis
    from dsident.dynamics import PLRNN

    a, h = np.array([0.5, 0.6, 0.7]), np.array([0.5, 0.4, 0.9])
    w = np.zeros((3, 3))
    w[0, 2] = 0.3
    dyn = PLRNN(3, seed=0).double()
    with torch.no_grad():
        dyn.a.copy_(torch.as_tensor(a))
        dyn.W.copy_(torch.as_tensor(w))
        dyn.h.copy_(torch.as_tensor(h))
    star = np.linalg.solve(np.eye(3) - np.diag(a) - w, h)
    assert (star > 0).all()
    run = np.tile(star, (200, 1)) + 1e-12 * np.random.default_rng(0).standard_normal((200, 3))
    seen = {}
    original = analysis.flow_field

    def spy(model, **kw):
        seen.update(kw)
        return original(model, **kw)

    monkeypatch.setattr(analysis, "flow_field", spy)
    fig = plotting.plot_flow_field(dyn, dims=(0, 1), n_grid=9, fixed_points=analysis.fixed_points(dyn),
                                   trajectory=run)
    np.testing.assert_allclose(seen["anchor"], star, atol=1e-9)        # the slice holds z2 at z2*
    (x0, x1), (y0, y1) = fig.axes[0].get_xlim(), fig.axes[0].get_ylim()
    assert x1 - x0 >= 1.0 and y1 - y0 >= 1.0
    assert x0 < star[0] < x1 and y0 < star[1] < y1
    # on that slice the flow vanishes at the fixed point: the grid's centre is z*
    field = original(dyn, dims=(0, 1), limits=((x0, x1), (y0, y1)), n_grid=3, anchor=seen["anchor"])
    np.testing.assert_allclose(field["flow"].values[1, 1], 0.0, atol=1e-9)


@pytest.mark.parametrize("func", [plotting.plot_attractor_pairs, plotting.plot_time_series,
                                  plotting.plot_power_spectra, plotting.plot_reconstruction])
def test_a_run_with_other_channels_than_the_data_is_refused_by_name(func, pair):
    # each panel pairs channel i of both: a run with 2 of the data's 3 channels failed with numpy's
    # "index 2 is out of bounds for axis 1 with size 2"
    true, gen = pair
    with pytest.raises(ValueError, match=r"`generated` has 2 channels and `true` 3"):
        func(true, gen.isel(channel=[0, 1]))


@pytest.mark.parametrize("bad", ["data.nc", {"x": [1.0, 2.0]}])
def test_an_object_that_is_not_data_is_refused_by_name(bad):
    with pytest.raises(TypeError, match=r"`true` must be a dataset .* got (str|dict)"):
        plotting.plot_time_series(bad)


def test_a_dataarray_without_a_time_dimension_is_refused_by_name():
    with pytest.raises(ValueError, match=r"`true` is a DataArray without a 'time' dimension"):
        plotting.plot_time_series(xr.DataArray(_lorenz_like(50)))


def test_channel_labels_carry_the_units_the_dataset_names():
    # an importer's dataset says its units in attrs["units"] (one for all, or one per channel
    # joined by "; "); the axes showed the bare channel names
    x = as_dataset(_lorenz_like(400), dt=0.002, channel_names=["Vm", "I", "g"], provenance={"time_unit": "s"})
    x.attrs["units"] = "mV; pA; nS"
    fig = plotting.plot_time_series(x)
    assert [ax.get_ylabel() for ax in fig.axes] == ["Vm (mV)", "I (pA)", "g (nS)"]
    ax = plotting.plot_attractor(x, dims=(2, 0, 1)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) == ("g (nS)", "Vm (mV)", "I (pA)")
    assert plotting.plot_attractor_pairs(x).axes[0].get_ylabel() == "I (pA)"
    assert plotting.plot_reconstruction(x, x).axes[-1].get_ylabel() == "Vm (mV)"
    x.attrs["units"] = "uV"                                 # one unit for every channel
    assert [ax.get_ylabel() for ax in plotting.plot_time_series(x).axes] == ["Vm (uV)", "I (uV)", "g (uV)"]
    # z-scored data keep their recording's units attr but are in z-units; slow channels have none
    from dsident.data.preprocessing import zscore
    from dsident.data.slow_channels import add_slow_channels

    scored = zscore(x)
    assert [ax.get_ylabel() for ax in plotting.plot_time_series(scored).axes] == ["Vm (z-units)", "I (z-units)",
                                                                                  "g (z-units)"]
    slow, _ = add_slow_channels(x, 5.0)
    labels = [ax.get_ylabel() for ax in plotting.plot_time_series(slow).axes]
    assert labels == ["Vm (uV)", "I (uV)", "g (uV)", "slow(Vm)", "slow_q(Vm)"]
    # a sentence (a z-scored run's note) or a count that does not fit the channels names no unit
    for note in ("z-units: the fit's z-score (config.json `zscore`)", "mV; pA"):
        x.attrs["units"] = note
        assert [ax.get_ylabel() for ax in plotting.plot_time_series(x).axes] == ["Vm", "I", "g"]


def test_irregularly_sampled_data_are_drawn_at_their_own_sample_times():
    # the time axis was the sample index times the nominal dt, so every irregular sample was
    # drawn at the wrong time (here up to tens of time units off)
    t = 100.0 + np.cumsum(np.r_[0.0, np.random.default_rng(0).uniform(0.5, 3.0, 299)])
    x = as_dataset(np.sin(t)[:, None], time=t, provenance={"time_unit": "s"})
    run = as_dataset(np.cos(np.arange(300.0))[:, None], dt=x.attrs["dt"])
    line = plotting.plot_time_series(x, run).axes[0].lines
    np.testing.assert_allclose(line[0].get_xdata(), t)
    np.testing.assert_allclose(line[0].get_ydata(), np.sin(t))
    # the free run steps by dt from where the data begin
    np.testing.assert_allclose(line[1].get_xdata(), t[0] + np.arange(300) * x.attrs["dt"])
    series = plotting.plot_reconstruction(x, run).axes[-1]
    np.testing.assert_allclose(series.lines[0].get_xdata(), t)
    assert series.get_xlabel() == "time (s)"


def test_latent_state_space_panel_draws_the_latents_dims_names():
    # the panel drew latents 0, 1, 2 whatever `dims` said: dims=[3, 4] gave z3 against z4 against
    # z2, and with fewer than three latents `dims` was ignored; its axes had no labels
    z = np.random.default_rng(0).normal(size=(300, 5)).cumsum(axis=0)
    ax = plotting.plot_latent_trajectories(z, dims=[4, 1, 3]).axes[1]
    xs, ys, zs = ax.lines[0].get_data_3d()
    np.testing.assert_array_equal(np.c_[xs, ys, zs], z[:, [4, 1, 3]])
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) == ("z4", "z1", "z3")
    ax = plotting.plot_latent_trajectories(z, dims=[3, 4]).axes[1]
    assert ax.name == "rectilinear"
    np.testing.assert_array_equal(ax.lines[0].get_xydata(), z[:, [3, 4]])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("z3", "z4")
    ax = plotting.plot_latent_trajectories(z[:, :2], dims=[1]).axes[1]
    np.testing.assert_array_equal(ax.lines[0].get_xydata(), np.c_[z[:-10, 1], z[10:, 1]])
    with pytest.raises(ValueError, match="`dims` must name at least one"):
        plotting.plot_latent_trajectories(z, dims=[])


def test_attractor_refuses_dims_the_data_lack_instead_of_drawing_other_channels(pair):
    # with 2 channels, dims=(1, 0, 4) silently drew channels (0, 1), axes labelled x0, x1
    true, _ = pair
    two = true.isel(channel=[0, 1])
    with pytest.raises(ValueError, match=r"`dims` must be channel indices in \[0, 2\); got \[1, 0, 4\]"):
        plotting.plot_attractor(two, dims=(1, 0, 4))
    ax = plotting.plot_attractor(two).axes[0]         # the default still falls back to the 2-D plot
    assert ax.name == "rectilinear" and (ax.get_xlabel(), ax.get_ylabel()) == ("x0", "x1")


def test_reconstruction_page_names_the_channels_on_its_3d_axes():
    x = as_dataset(_lorenz_like(400), dt=0.02, channel_names=["a", "b", "c"])
    for ax in plotting.plot_reconstruction(x, x).axes[:2]:
        assert ax.name == "3d" and (ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) == ("a", "b", "c")
        np.testing.assert_array_equal(np.c_[ax.lines[0].get_data_3d()], x["x"].values[0])


@pytest.mark.parametrize("blow_up", [1e21, np.inf])
def test_a_diverging_run_leaves_the_time_series_panel_instead_of_flattening_the_data(blow_up):
    # autoscaled, a run reaching 1e21 put the data (span 2) on a flat line at 0
    x = _lorenz_like(1500)
    run = x.copy()
    run[700:] = blow_up
    for fig in (plotting.plot_time_series(x, run), plotting.plot_reconstruction(x, run)):
        ax = fig.axes[-1] if len(fig.axes) == 4 else fig.axes[0]
        lo, hi = ax.get_ylim()
        span = np.ptp(x[:, 0])
        assert span / (hi - lo) >= 0.2 / (1 + 2 * 0.05)
        assert lo <= x[:, 0].min() and hi >= x[:, 0].max()
        assert any(plotting._OUTSIDE in t.get_text() for t in ax.texts)
    calm = plotting.plot_time_series(x, x).axes[0]
    assert not any(plotting._OUTSIDE in t.get_text() for t in calm.texts)


@pytest.mark.parametrize("bad", [-1.0, 0, float("nan"), "50"])
def test_power_spectra_refuse_a_max_frequency_that_leaves_nothing_to_draw(pair, bad):
    # max_frequency=-1 drew empty panels without a word
    true, _ = pair
    with pytest.raises(ValueError, match="`max_frequency` must be a positive number"):
        plotting.plot_power_spectra(true, max_frequency=bad)


def test_spectra_of_data_with_gaps_say_how_many_samples_they_left_out():
    # the spectrum is taken over the samples without a gap, joined end to end: 1000 of 3000
    # samples vanished from every channel's spectrum without a word
    t = np.arange(3000) * 0.001
    x = np.c_[np.sin(2 * np.pi * 5 * t), np.sin(2 * np.pi * 12 * t)]
    x[1000:2000, 1] = np.nan
    ds = as_dataset(x, dt=0.001, provenance={"time_unit": "s"})
    notes = [t.get_text() for t in plotting.plot_power_spectra(ds).axes[0].texts]
    assert any("1000 of 3000 samples in gaps" in n for n in notes)
    notes = [t.get_text() for t in plotting.plot_reconstruction(ds, ds).axes[2].texts]
    assert not any("in gaps" in n for n in notes)           # its spectrum is channel 0's: no gap there
    gap0 = ds.copy(deep=True)
    gap0["x"].values[0, 10:30, 0] = np.nan
    notes = [t.get_text() for t in plotting.plot_reconstruction(gap0, ds).axes[2].texts]
    assert any("20 of 3000 samples in gaps" in n for n in notes)
    assert not plotting.plot_power_spectra(ds.isel(channel=[0])).axes[0].texts


def _contracting_plrnn(m: int = 3):
    """z' = 0.5 z + h: one stable fixed point at z* = 2 h."""
    import torch

    from dsident.dynamics import PLRNN

    dyn = PLRNN(m, seed=0).double()
    with torch.no_grad():
        dyn.a.copy_(torch.full((m,), 0.5, dtype=torch.float64))
        dyn.W.zero_()
        dyn.h.copy_(torch.linspace(0.5, -0.5, m, dtype=torch.float64))
    return dyn


def test_flow_field_around_a_run_that_diverged_to_inf_frames_its_finite_part():
    # the window was taken with nanmin/nanmax, so an inf in the run made it infinite (matplotlib:
    # "'x' must be strictly increasing")
    dyn = _contracting_plrnn()
    run = np.random.default_rng(0).normal(size=(200, 3))
    run[150:] = np.inf
    fig = plotting.plot_flow_field(dyn, trajectory=run, n_grid=8, fixed_points=np.zeros((0, 3)))
    (x0, x1), (y0, y1) = fig.axes[0].get_xlim(), fig.axes[0].get_ylim()
    finite = run[:150]
    assert x0 < finite[:, 0].min() and x1 > finite[:, 0].max() and np.isfinite([x0, x1, y0, y1]).all()
    assert y0 < finite[:, 1].min() and y1 > finite[:, 1].max() and x1 - x0 < 3 * np.ptp(finite[:, 0])


@pytest.mark.parametrize("kwargs, match", [
    ({"bounds": (-1, 1)}, r"`bounds` must be four finite numbers .* got bounds=\(-1, 1\)"),
    ({"bounds": (-1, 1, 2, np.inf)}, r"`bounds` must be four finite numbers"),
    ({"dims": ("z0", "z1")}, r"`dims` must be .* indices in \[0, 3\); got \['z0', 'z1'\]"),
    ({"dims": (0.7, 1.2)}, r"`dims` must be .* indices in \[0, 3\)"),
    ({"trajectory": np.zeros((50, 5))}, r"`trajectory` has 5 columns; the model has 3 latent units"),
])
def test_flow_field_refuses_bad_arguments_by_name(kwargs, match):
    # bounds of two numbers failed with "tuple index out of range", latent names with int()'s
    # "invalid literal", dims 0.7 / 1.2 were truncated to 0 / 1, and a trajectory of 5
    # observed channels was drawn as if its first columns were latents 0 and 1
    with pytest.raises(ValueError, match=match):
        plotting.plot_flow_field(_contracting_plrnn(), n_grid=6, fixed_points=np.zeros((0, 3)), **kwargs)


def test_benchmark_summary_reads_its_metrics_argument_as_a_user_means_it():
    # metrics="D_H" was read letter by letter ("No variable named 'D'"), an unknown metric failed
    # with xarray's KeyError, metrics=() drew an empty figure, a DataFrame an AttributeError
    results = xr.Dataset(
        {"D_stsp": ("point", [0.5, 0.7]), "D_H": ("point", [0.1, 0.2]), "status": ("point", np.array(["done"] * 2))},
        coords={"dataset": ("point", ["lorenz63"] * 2), "model": ("point", ["shplrnn"] * 2),
                "method": ("point", ["teacher-forcing"] * 2)})
    fig = plotting.plot_benchmark_summary(results, metrics="D_H")
    assert [ax.get_xlabel() for ax in fig.axes] == ["D_H"]
    assert fig.axes[0].patches[0].get_width() == pytest.approx(0.15)      # the median of 0.1, 0.2
    with pytest.raises(ValueError, match=r"`metrics` must name variables of `results` .* without \['MSE'\]"):
        plotting.plot_benchmark_summary(results, metrics=("D_stsp", "MSE"))
    with pytest.raises(ValueError, match="`metrics` must name variables"):
        plotting.plot_benchmark_summary(results, metrics=())
    with pytest.raises(TypeError, match="`results` must be the xarray.Dataset"):
        plotting.plot_benchmark_summary(results.to_dataframe())


@pytest.mark.parametrize("func", [plotting.plot_time_series, plotting.plot_power_spectra])
def test_a_wide_recording_says_which_of_its_channels_are_drawn(func):
    # 10 channels drew the first 8 panels with nothing saying 2 were left out
    t = np.arange(1000) * 0.01
    x = as_dataset(np.sin(np.outer(t, np.arange(1, 11))), dt=0.01)
    fig = func(x, title="rec 7")
    assert len(fig.axes) == 8
    assert fig._suptitle.get_text() == "rec 7\n(the first 8 of 10 channels)"
    assert func(x.isel(channel=slice(0, 3)), title="rec 7")._suptitle.get_text() == "rec 7"


def test_one_channel_delay_plots_pair_each_sample_with_the_one_10_later_and_no_other():
    # the reconstruction page built its delay plot with np.roll, pairing the last 10 samples with
    # the first 10: a stroke across the panel that the data do not make
    x = as_dataset(np.linspace(0.0, 1.0, 500)[:, None], dt=0.1, channel_names=["V"])
    expected = np.c_[x["x"].values[0, :-10, 0], x["x"].values[0, 10:, 0]]
    data_ax = plotting.plot_reconstruction(x, x).axes[0]
    np.testing.assert_array_equal(data_ax.lines[0].get_xydata(), expected)
    ax = plotting.plot_attractor(x).axes[0]
    np.testing.assert_array_equal(ax.lines[0].get_xydata(), expected)
    assert ax.get_ylabel() == data_ax.get_ylabel() == "V, 10 samples later"


def test_pairs_keep_the_data_in_view_beside_a_diverging_run():
    # autoscaled, a run reaching 1e21 shrank every pair's data (span 2) to a dot
    x = _lorenz_like(1500)
    run = x.copy()
    run[700:] *= 1e21
    for ax in plotting.plot_attractor_pairs(x, run).axes:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert x1 - x0 < 10 and y1 - y0 < 10
        assert any(plotting._OUTSIDE in t.get_text() for t in ax.texts)
    assert not any(ax.texts for ax in plotting.plot_attractor_pairs(x, x).axes)


@pytest.mark.parametrize("func, kwargs", [(plotting.plot_attractor, {"max_points": -50}),
                                          (plotting.plot_attractor_pairs, {"max_points": -50}),
                                          (plotting.plot_time_series, {"n_steps": 0}),
                                          (plotting.plot_latent_trajectories, {"n_steps": 2.5}),
                                          (plotting.plot_attractor, {"max_points": True})])
def test_sample_counts_are_refused_unless_positive_whole_numbers(func, kwargs):
    # max_points=-50 drew all but the last 50 samples (arr[:-50]); n_steps=0 drew empty panels
    (name, value), = kwargs.items()
    with pytest.raises(ValueError, match=rf"`{name}` must be a positive whole number of samples"):
        func(_lorenz_like(300), **kwargs)
    assert len(func(_lorenz_like(300), **{name: 120.0}).axes[0].lines[0].get_xdata()) == 120


def test_reconstruction_page_prints_scores_computed_in_float32():
    # np.float32 is not a Python float: a D_H computed in float32 was left off the score line
    x = _lorenz_like(300)
    fig = plotting.plot_reconstruction(x, x, scores={"D_stsp": 0.25, "D_H": np.float32(0.125), "diverged": False,
                                                     "note": "n/a"})
    assert [t.get_text() for t in fig.texts] == ["D_stsp = 0.25   D_H = 0.125"]


def test_time_series_and_spectra_of_several_trials_say_only_the_first_is_drawn():
    from dsident.data import as_dataset
    from dsident.plotting import plot_power_spectra, plot_time_series

    t = np.arange(600) * 0.01
    trials = np.stack([np.column_stack([np.sin(2 * np.pi * f * t), np.cos(2 * np.pi * f * t)]) for f in (1, 3, 5)])
    ds = as_dataset(trials, dt=0.01)
    for plot in (plot_time_series, plot_power_spectra):
        fig = plot(ds)
        assert "trial 0 of 3" in fig._suptitle.get_text()
        one = plot(as_dataset(trials[0], dt=0.01))
        assert one._suptitle is None or "trial" not in one._suptitle.get_text()
    drawn = plot_time_series(trials)                                                # a (trial, time, channel) array
    assert "trial 0 of 3" in drawn._suptitle.get_text()
    np.testing.assert_allclose(drawn.axes[0].lines[0].get_ydata()[:5], trials[0, :5, 0])   # the first trial it is


def test_every_attractor_panel_is_labelled_as_the_data_are(pair):
    # a free run carries no units: its panel read "x0" beside the data's "x0 (mV)"
    true, gen = pair
    true = true.assign_attrs(units="mV")
    fig = plotting.plot_attractor(true, gen)
    labels = [(ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) for ax in fig.axes]
    assert labels[0] == ("x0 (mV)", "x1 (mV)", "x2 (mV)") and labels[1] == labels[0]
