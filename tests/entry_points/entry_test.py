"""`exit_on_bad_input`: a `BadInput` ends the entry point with one line and
exit status 2; other errors pass."""

from unittest import mock

from absl.testing import absltest

from xflowrl.entry_points import exit_on_bad_input
from xflowrl.optimize import BadInput


class ExitOnBadInputTest(absltest.TestCase):

    def test_one_line_and_exit_status_2(self):
        def main(argv):
            del argv
            raise BadInput("m.onnx: no such file")
        with self.assertRaises(SystemExit) as raised, \
                mock.patch("sys.stderr") as stderr, \
                mock.patch("sys.argv", ["dir/entry.py"]):
            exit_on_bad_input(main)([])
        self.assertEqual(raised.exception.code, 2)
        stderr.write.assert_called_once_with("entry.py: error: m.onnx: no such file\n")

    def test_other_errors_pass(self):
        def main(argv):
            raise ValueError(argv)
        with self.assertRaisesRegex(ValueError, "x"):
            exit_on_bad_input(main)(["x"])

    def test_return_value_passes(self):
        self.assertEqual(exit_on_bad_input(lambda argv: argv)(["a"]), ["a"])


if __name__ == "__main__":
    absltest.main()
