"""Tests of `Locations.hashes_of`: one xfer's candidate hashes alone."""

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import XferSet


class HashesOfTest(absltest.TestCase):

    def test_is_the_row_of_hashes(self):
        xfers = XferSet.default()
        for name in ("squeezenet1_1", "nasrnn", "small_cnn"):
            locs = xfers.locations(zoo.get_graph(name))
            rows = locs.hashes()
            active = locs.active_xfers()
            self.assertGreater(len(active), 0)
            for xfer in range(len(xfers)):
                self.assertEqual(locs.hashes_of(xfer), rows[xfer])
            # And the graphs they name.
            xfer = int(active[0])
            self.assertEqual(locs.hashes_of(xfer)[0], locs.apply(xfer, 0).hash())

    def test_out_of_range(self):
        locs = XferSet.default().locations(zoo.get_graph("small_cnn"))
        with self.assertRaises(ValueError):
            locs.hashes_of(-1)
        with self.assertRaises(ValueError):
            locs.hashes_of(locs.num_xfers)


if __name__ == "__main__":
    absltest.main()
