"""The offline substitution generator (TASO's approach, thesis §3.1): enumerate
small graphs, fingerprint them exactly, pair equal fingerprints, verify,
prune, and emit rules. `generate(k)` runs the whole pipeline."""

from xflowrl.generator.pipeline import Report, generate
