"""The offline substitution generator (TASO's approach, thesis §3.1): enumerate
small graphs, fingerprint them exactly, pair equal fingerprints, verify,
prune, and emit rules. `generate(k)` runs the whole pipeline.

Only the proof tier (`symbolic.py`, `z3_encoding.py`) imports z3; the
pipeline, including its check at other sizes (`sizes.py`,
`other_sizes.py`), runs without it. docs/generator.md maps the modules."""

from xflowrl.generator.pipeline import Report, generate
