"""Analysis of fitted dynamics: fixed points and cycles, Jacobian spectra, Lyapunov
exponents, flow fields and nullclines.

>>> from dsident import analysis
>>> fps = analysis.fixed_points(model)                           # doctest: +SKIP
>>> stats = analysis.jacobian_spectrum_statistics([m1, m2, m3])  # doctest: +SKIP
"""
from __future__ import annotations

from .fixed_points import (FixedPoints, classify_eigenvalues, cycles, fixed_points, newton_fixed_points,
                           plrnn_cycles)
from .flow import flow_field, nullclines, zero_contour
from .lyapunov import RosensteinResult, lyapunov_spectrum, max_lyapunov_rosenstein
from .spectra import eigenvalue_summary, jacobian_spectrum_statistics

__all__ = [
    "FixedPoints", "fixed_points", "cycles", "plrnn_cycles", "newton_fixed_points", "classify_eigenvalues",
    "eigenvalue_summary", "jacobian_spectrum_statistics",
    "flow_field", "nullclines", "zero_contour",
    "lyapunov_spectrum", "max_lyapunov_rosenstein", "RosensteinResult",
]
