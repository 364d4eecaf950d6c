"""Laplace-EM for the (regularized) PLRNN: block-tridiagonal Laplace E-step, closed-form M-step,
the rPLRNN annealing protocol (Schmidt, Koppe et al., ICLR 2021). See docs/laplace_em.md."""
from .blocktridiag import (BlockTridiagFactor, block_tridiag_to_dense, factor_block_tridiag, selected_inverse,
                           solve_block_tridiag, solve_factored)
from .estep import (Chain, LaplacePosterior, RectifiedMoments, chain_to_trials, laplace_estep, log_joint,
                    make_chain, posterior_mode, precision_blocks, rectified_moments)
from .params import PLRNNParams, check_laplace_model, params_from_model, params_to_model

__all__ = ["PLRNNParams", "params_from_model", "params_to_model", "check_laplace_model",
           "BlockTridiagFactor", "factor_block_tridiag", "solve_factored", "selected_inverse",
           "solve_block_tridiag", "block_tridiag_to_dense",
           "Chain", "make_chain", "chain_to_trials", "LaplacePosterior", "RectifiedMoments", "log_joint",
           "precision_blocks", "posterior_mode", "laplace_estep", "rectified_moments"]
