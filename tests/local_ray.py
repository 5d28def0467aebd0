"""A test case base on one local Ray instance of 2 CPUs, started once per class."""

from absl.testing import absltest


class LocalRayTestCase(absltest.TestCase):
    """Starts Ray (2 CPUs, no dashboard, a small object store) before the
    class's tests and shuts it down after them."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import ray  # pylint: disable=import-outside-toplevel
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 object_store_memory=100 * 2**20)

    @classmethod
    def tearDownClass(cls):
        import ray  # pylint: disable=import-outside-toplevel
        ray.shutdown()
        super().tearDownClass()
