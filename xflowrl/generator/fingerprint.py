"""Exact integer fingerprints of graph outputs.

Inputs are random integers modulo the prime P; every op is evaluated exactly
in int64 (values stay below P, so products and the sums of a conv or matmul
fit in 63 bits) and reduced mod P. ReLU is not a polynomial, so it gets an
injective stand-in as in TASO: x -> x^5 mod P, a bijection because
gcd(5, P-1) = 1. Element-wise maps commute with concatenation like ReLU
does, and x^5 is not additive, so identities that hold for ReLU's algebra
keep equal fingerprints and most others do not. Equal fingerprints are only
candidates: `verify` decides.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from xflowrl.generator import enumeration

P = 1_000_003  # prime; P - 1 = 2 * 3 * 166667


def relu_standin(x: np.ndarray) -> np.ndarray:
    x = x % P
    x2 = x * x % P
    return x2 * x2 % P * x % P


def random_inputs(family: enumeration.Family, seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.integers(0, P, size=s, dtype=np.int64) for n, s in family.inputs.items()}


def fingerprint(expr, values: Dict[str, np.ndarray], cache: dict) -> bytes:
    """The output mod P as bytes (with its shape), exact."""
    out = _evaluate_mod(expr, values, cache)
    return repr(out.shape).encode() + out.tobytes()


def _evaluate_mod(expr, values, cache):
    if expr in cache:
        return cache[expr]
    if expr[0] == "input":
        out = values[expr[1]] % P
    else:
        args = [_evaluate_mod(c, values, cache) for c in expr[2:]]
        sub = ("__", ()) + tuple(("input", f"a{k}") for k in range(len(args)))
        local = {f"a{k}": a for k, a in enumerate(args)}
        out = enumeration.evaluate((expr[0], expr[1]) + sub[2:], local, relu=relu_standin)
        out = np.asarray(out, dtype=np.int64) % P
    cache[expr] = out
    return out
