"""The public names of DESIGN.md exist and resolve."""
import pytest

import dsident


def test_version_is_a_string():
    assert isinstance(dsident.__version__, str) and dsident.__version__.count(".") >= 2


@pytest.mark.parametrize("name", [n for n in dsident.__all__ if n not in ("__version__",)])
def test_every_public_name_resolves(name):
    assert getattr(dsident, name) is not None


def test_unknown_attribute_raises():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dsident.nope  # noqa: B018


def test_inference_engine_unknown_method_lists_choices():
    from dsident.inference import get_engine
    with pytest.raises(ValueError, match="laplace-em"):
        get_engine("kalman-magic")


def test_the_figure_modules_the_readme_reaches_through_dsident_resolve():
    # the README's tour calls dsident.plotting_training.plot_training_history after `import dsident`
    assert callable(dsident.plotting_training.plot_training_history)
    assert callable(dsident.plotting_spikes.plot_psth)
