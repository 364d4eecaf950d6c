"""The BLAS thread limits that the analysis loops and grid points run under."""
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from dsident._threads import one_blas_thread
from dsident.analysis import lyapunov
from dsident.experiments.runner import THREADS_ENV, apply_thread_limit


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    with threadpool_limits(limits=2, user_api="blas"):
        yield


def test_one_blas_thread_inside_the_block_and_the_callers_setting_after(two_blas_threads):
    before = _blas_threads()
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_the_lyapunov_loop_runs_with_one_blas_thread(two_blas_threads, monkeypatch):
    seen = []
    qr = lyapunov._qr

    def spy(a):
        seen.append(set(_blas_threads()))
        return qr(a)

    monkeypatch.setattr(lyapunov, "_qr", spy)
    lam = lyapunov.lyapunov_spectrum(lambda z: 0.5 * z, z0=np.ones(3), n_steps=5, transient=0)
    np.testing.assert_allclose(lam, np.log(0.5))          # the spy changed nothing
    assert seen and all(s == {1} for s in seen)


def test_apply_thread_limit_sets_torch_and_blas_threads(two_blas_threads, monkeypatch):
    import torch

    previous = torch.get_num_threads()
    monkeypatch.setenv(THREADS_ENV, "1")
    try:
        apply_thread_limit()
        assert torch.get_num_threads() == 1 and set(_blas_threads()) == {1}
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("value", ["two", "0", "1.5"])
def test_a_bad_thread_variable_names_the_variable(monkeypatch, value):
    import torch

    previous = torch.get_num_threads()
    monkeypatch.setenv(THREADS_ENV, value)
    # "two" and "1.5" raised int()'s "invalid literal"; "0" named no variable
    with pytest.raises(ValueError, match=rf"`\${THREADS_ENV}` must be a whole number of torch threads >= 1"):
        apply_thread_limit()
    assert torch.get_num_threads() == previous


@pytest.mark.parametrize("text", ['threads = 1.5', 'threads = "two"', 'threads = true'])
def test_a_config_file_threads_that_is_not_a_whole_number_is_refused(tmp_path, monkeypatch, text):
    # int() read 1.5 and true as 1 thread without a word, and "two" as a bare "invalid literal"
    import argparse

    import torch

    from dsident.cli_main_job import _threads

    monkeypatch.delenv(THREADS_ENV, raising=False)
    previous = torch.get_num_threads()
    conf = tmp_path / "run.toml"
    conf.write_text(text + "\n")
    try:
        with pytest.raises(SystemExit, match="`threads` in the config file .* must be a whole number"):
            _threads(argparse.Namespace(threads=None, config=str(conf)))
    finally:
        torch.set_num_threads(previous)
