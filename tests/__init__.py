"""The test suite. TensorFlow's CPU allocator statistics (xflowrl.measure)
need TF_CPU_ALLOCATOR_USE_BFC before TensorFlow is first imported, and any
test module may import TensorFlow first."""

import os

os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
