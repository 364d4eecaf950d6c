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
from .em import chain_from_dataset, fit_laplace_em, make_smoother, prior_from_dynamics  # noqa: E402
from .lds_init import fit_lds, pca_init  # noqa: E402
from .mstep import (RidgePrior, SufficientStats, expected_stats, manifold_prior, mstep, mstep_gaussian_obs,  # noqa: E402
                    mstep_glm_obs, mstep_latent, no_prior)

__all__ += ["fit_laplace_em", "chain_from_dataset", "make_smoother", "prior_from_dynamics", "fit_lds", "pca_init",
            "RidgePrior", "SufficientStats", "expected_stats", "manifold_prior", "mstep", "mstep_gaussian_obs",
            "mstep_glm_obs", "mstep_latent", "no_prior"]
