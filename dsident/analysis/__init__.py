"""Analysis of fitted dynamics: fixed points and cycles, Jacobian spectra, Lyapunov
exponents, trajectory length, flow fields and nullclines.

Every function accepts a fitted estimator, a :class:`dsident.StateSpaceModel` or a latent
dynamics module.

>>> from dsident import analysis
>>> fps = analysis.fixed_points(model)                           # doctest: +SKIP
>>> stats = analysis.jacobian_spectrum_statistics([m1, m2, m3])  # doctest: +SKIP
>>> print(analysis.analyze_dynamics(model))                      # doctest: +SKIP
"""
from __future__ import annotations

from .bursts import Bursts, burst_cutoff, find_bursts, find_spikes
from .ct_tools import (ContinuousFixedPoints, spectral_abscissa, vector_field_fixed_points, vector_field_grid,
                       vector_field_jacobian)
from .fixed_points import (FixedPoints, classify_eigenvalues, cycles, fixed_points, newton_fixed_points,
                           plrnn_cycles)
from .flow import flow_field, nullclines, zero_contour
from .lyapunov import (RosensteinResult, kaplan_yorke_dimension, lyapunov_spectrum, max_lyapunov_rosenstein,
                       spectrum_verdict, system_lyapunov_spectrum)
from .report import (VERDICTS, DynamicsReport, FreeRunRegime, analyze_dynamics, dominant_period, free_run_regime,
                     fundamental_period, rhythm_period)
from .system_fixed_points import FixedPointMatch, SystemFixedPoints, match_fixed_points, system_fixed_points
from .spectra import eigenvalue_summary, jacobian_product_norms, jacobian_spectrum_statistics
from .trajectory_length import TrajectoryLength, arc_length, circle_input, trajectory_length

__all__ = [
    # fixed points and cycles (discrete-time maps; exact for the PLRNN)
    "FixedPoints", "fixed_points", "cycles", "plrnn_cycles", "newton_fixed_points", "classify_eigenvalues",
    # Jacobian spectra at fixed points (rPLRNN Fig. 4)
    "eigenvalue_summary", "jacobian_spectrum_statistics", "jacobian_product_norms",
    # flow fields and nullclines on a 2-D slice
    "flow_field", "nullclines", "zero_contour",
    # continuous-time vector fields
    "ContinuousFixedPoints", "vector_field_fixed_points", "vector_field_grid", "vector_field_jacobian",
    "spectral_abscissa",
    # Lyapunov exponents
    "lyapunov_spectrum", "kaplan_yorke_dimension", "system_lyapunov_spectrum", "spectrum_verdict",
    "max_lyapunov_rosenstein",
    "RosensteinResult",
    # the true system's fixed points beside a reconstruction's (benchmark sets)
    "SystemFixedPoints", "system_fixed_points", "FixedPointMatch", "match_fixed_points",
    # one report of a fitted model's free-running dynamics (`dsident analyze`)
    "analyze_dynamics", "DynamicsReport", "VERDICTS", "dominant_period", "fundamental_period", "rhythm_period",
    # the cheap half of it: what a free run settled on (the benchmark asks it of every point)
    "free_run_regime", "FreeRunRegime",
    # spikes and bursts of a voltage-like series (`dsident inspect`, `--slow-channels auto`)
    "Bursts", "find_bursts", "find_spikes", "burst_cutoff",
    # trajectory length (LTC paper)
    "TrajectoryLength", "trajectory_length", "circle_input", "arc_length",
]
