"""Block-tridiagonal factor/solve/selected inverse against dense linear algebra."""
import numpy as np
import pytest

from dsident.inference.laplace_em.blocktridiag import (block_tridiag_to_dense, factor_block_tridiag,
                                                       selected_inverse, solve_factored)


def _random_spd(n, M, rng):
    E = 0.5 * rng.normal(size=(n - 1, M, M))
    X = rng.normal(size=(n, M, M))
    D = X @ np.swapaxes(X, 1, 2) + 3 * M * np.eye(M)
    return D, E


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13, 33])
@pytest.mark.parametrize("M", [1, 3])
def test_matches_dense(n, M):
    rng = np.random.default_rng(n * 10 + M)
    D, E = _random_spd(n, M, rng)
    H = block_tridiag_to_dense(D, E)
    b = rng.normal(size=(n, M))
    fac = factor_block_tridiag(D, E)
    np.testing.assert_allclose(solve_factored(fac, b).ravel(), np.linalg.solve(H, b.ravel()), atol=1e-10)
    assert fac.logdet == pytest.approx(np.linalg.slogdet(H)[1], abs=1e-9)
    Hi = np.linalg.inv(H)
    Sd, So = selected_inverse(fac)
    for i in range(n):
        np.testing.assert_allclose(Sd[i], Hi[i * M:(i + 1) * M, i * M:(i + 1) * M], atol=1e-12)
    for i in range(n - 1):
        np.testing.assert_allclose(So[i], Hi[(i + 1) * M:(i + 2) * M, i * M:(i + 1) * M], atol=1e-12)


def test_multiple_right_hand_sides_and_zero_coupling():
    rng = np.random.default_rng(0)
    D, E = _random_spd(9, 2, rng)
    E[4] = 0.0          # a trial boundary: two independent chains
    H = block_tridiag_to_dense(D, E)
    b = rng.normal(size=(9, 2, 3))
    x = solve_factored(factor_block_tridiag(D, E), b)
    np.testing.assert_allclose(x.transpose(0, 1, 2).reshape(18, 3), np.linalg.solve(H, b.reshape(18, 3)), atol=1e-10)


def test_not_positive_definite_raises():
    D = np.stack([np.eye(2), -np.eye(2), np.eye(2)])
    E = np.zeros((2, 2, 2))
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        factor_block_tridiag(D, E)


def test_bad_shapes():
    with pytest.raises(ValueError, match="E must have shape"):
        factor_block_tridiag(np.stack([np.eye(2)] * 3), np.zeros((3, 2, 2)))


def test_workspace_reuse_and_consuming_selected_inverse_match_dense():
    from dsident.inference.laplace_em.blocktridiag import Workspace, _factor_owned
    rng = np.random.default_rng(7)
    ws = Workspace()
    for n in (11, 11, 6):                 # same size twice (buffers reused), then a new size
        D, E = _random_spd(n, 3, rng)
        H = block_tridiag_to_dense(D, E)
        fac = _factor_owned([D.copy(), E.copy()], ws)
        b = rng.normal(size=(n, 3))
        np.testing.assert_allclose(solve_factored(fac, b).ravel(), np.linalg.solve(H, b.ravel()), atol=1e-10)
        Sd, So = selected_inverse(fac, consume=True)
        assert fac.levels == []           # consumed
        Hi = np.linalg.inv(H)
        np.testing.assert_allclose(Sd[-1], Hi[-3:, -3:], atol=1e-12)
        np.testing.assert_allclose(So[0], Hi[3:6, 0:3], atol=1e-12)


@pytest.mark.parametrize("n", [2, 7, 40])
def test_grouped_first_level_matches_dense(n):
    # repeated diagonal blocks (as the E-step's on/off patterns give) factored once per group
    from dsident.inference.laplace_em.blocktridiag import _factor_owned
    rng = np.random.default_rng(n)
    M = 3
    D0, _ = _random_spd(4, M, rng)      # four distinct blocks
    _, E = _random_spd(n, M, rng)
    groups = rng.integers(0, 4, size=n)
    D = D0[groups]                      # D[i] == D[j] whenever groups agree
    H = block_tridiag_to_dense(D, E)
    fac = _factor_owned([D.copy(), E.copy()], None, groups)
    b = rng.normal(size=(n, M))
    np.testing.assert_allclose(solve_factored(fac, b).ravel(), np.linalg.solve(H, b.ravel()), atol=1e-10)
    assert fac.logdet == pytest.approx(np.linalg.slogdet(H)[1], abs=1e-9)
    Sd, _ = selected_inverse(fac)
    Hi = np.linalg.inv(H)
    for i in range(n):
        np.testing.assert_allclose(Sd[i], Hi[i * M:(i + 1) * M, i * M:(i + 1) * M], atol=1e-12)
