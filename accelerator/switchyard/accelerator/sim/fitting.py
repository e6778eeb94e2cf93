"""Bounded linear least squares (Lawson-Hanson NNLS) without SciPy."""

from __future__ import annotations

import numpy as np

from switchyard.accelerator.sim.costmodel import FloatArray

__all__ = ["bounded_lstsq", "nnls"]


def nnls(a: FloatArray, b: FloatArray, max_iter: int = 500) -> FloatArray:
    """argmin ||a x - b||_2 subject to x >= 0 (Lawson & Hanson, 1974)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 1e-12 * max(1.0, float(np.abs(a).max()))
    for _ in range(max_iter):
        w = a.T @ (b - a @ x)
        candidates = ~passive & (w > tol)
        if not candidates.any():
            break
        passive[int(np.argmax(np.where(candidates, w, -np.inf)))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = float(np.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x


def bounded_lstsq(a: FloatArray, b: FloatArray, lower: FloatArray) -> FloatArray:
    """argmin ||a x - b|| subject to x >= lower, by shifting to an NNLS problem.

    Columns are rescaled to unit norm first so coefficients of very different magnitudes
    (an inverse utilisation ~2 and an overhead ~1e-4 s) are treated evenly.
    """
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    shifted = b - a @ lower
    y = nnls(a / scale, shifted)
    out: FloatArray = lower + y / scale
    return out
