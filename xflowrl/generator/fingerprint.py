"""Exact integer fingerprints of graph outputs.

Inputs are random integers modulo the prime P; every op is evaluated exactly
in int64 (values stay below P, so products and the sums of a conv or matmul
fit in 63 bits) and reduced mod P:

- ReLU is not a polynomial, so it gets an injective stand-in as in TASO:
  x -> x^5 mod P, a bijection because gcd(5, P-1) = 1. Element-wise maps
  commute with concatenation, transposition and max pooling as ReLU does,
  and x^5 is not additive, so identities of ReLU's algebra keep equal
  fingerprints and most others do not.
- Average pooling is linear: window sums times the modular inverse of each
  window's element count, so its linear identities stay exact.
- Max pooling takes the maximum of the residues, a deterministic stand-in.

Equal functions over the reals have equal fingerprints for the polynomial
ops (add, mul, matmul, conv, avg pool, concat, transpose, enlarge); identities
that rely on the order of reals (max pooling with ReLU, say) may be missed,
as wrap-around integers miss them in TASO's generator. Equal fingerprints are
only candidates: `pipeline` verifies them in float.
"""

from __future__ import annotations

import hashlib
from typing import Dict, List

import numpy as np

from xflowrl.executor import reference as executor
from xflowrl.generator import enumeration

P = 1_000_003  # prime; P - 1 = 2 * 3 * 166667


def relu_standin(x: np.ndarray) -> np.ndarray:
    x = x % P
    x2 = x * x % P
    return x2 * x2 % P * x % P


def random_inputs(family: enumeration.Family, seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.integers(0, P, size=s, dtype=np.int64) for n, s in family.inputs.items()}


def _pool_mod(x: np.ndarray, op_type: str, params: dict) -> np.ndarray:
    taps = [t for _, _, t in executor._taps(x, params["kernel_h"], params["kernel_w"],
                                            params, -1 if op_type == "maxpool" else 0)]
    if op_type == "maxpool":
        return np.max(np.stack(taps), axis=0)
    total = np.sum(np.stack(taps), axis=0) % P
    ones = np.ones((1, 1) + x.shape[2:], dtype=np.int64)
    count = sum(t for _, _, t in executor._taps(ones, params["kernel_h"], params["kernel_w"],
                                                params, 0))
    inverse = np.vectorize(lambda c: pow(int(c), P - 2, P), otypes=[np.int64])(count)
    return total * inverse % P


def evaluate_op(op_type: str, params, args: List[np.ndarray]) -> np.ndarray:
    """One op on residues mod P, with ReLU's stand-in."""
    p = enumeration.public_params(op_type, params)
    activation = p.get("activation", "NONE")
    if activation not in ("NONE", "RELU"):
        raise ValueError(f"no exact stand-in for activation {activation}")
    if op_type == "relu":
        return relu_standin(args[0])
    if op_type in ("avgpool", "maxpool"):
        out = _pool_mod(args[0], op_type, p)
    else:
        if activation == "RELU":
            p = dict(p, activation="NONE")
        out = np.asarray(executor.run_op(op_type, p, args)[0], dtype=np.int64) % P
    return relu_standin(out) if activation == "RELU" else out


def digest(value: np.ndarray) -> bytes:
    """A 16-byte key of a residue array and its shape."""
    return hashlib.blake2b(repr(value.shape).encode() + value.tobytes(),
                           digest_size=16).digest()


class Fingerprinter:
    """Evaluates a `Universe`'s expressions mod P as they are enumerated.

    `values[i]` is expression i's residue array, `keys[i]` its digest.
    """

    def __init__(self, family: enumeration.Family, seed: int):
        inputs = random_inputs(family, seed)
        self.values: List[np.ndarray] = [inputs[n] for n in family.inputs]
        self.keys: List[bytes] = [digest(v) for v in self.values]

    def __call__(self, i: int, template: enumeration.Template, operands) -> None:
        out = evaluate_op(template.op_type, template.params,
                          [self.values[o] for o in operands])
        assert len(self.values) == i
        self.values.append(out)
        self.keys.append(digest(out))


def fingerprint(expr, values: Dict[str, np.ndarray], cache: dict) -> bytes:
    """The digest of `expr`'s output mod P (a standalone evaluation)."""
    return digest(_evaluate_mod(expr, values, cache))


def _evaluate_mod(expr, values, cache):
    if expr in cache:
        return cache[expr]
    if expr[0] == "input":
        out = values[expr[1]] % P
    else:
        out = evaluate_op(expr[0], expr[1], [_evaluate_mod(c, values, cache) for c in expr[2:]])
    cache[expr] = out
    return out
