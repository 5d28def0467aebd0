"""Tests of the rule formats: TASO's protobuf and the project's JSON."""

import collections
import os
import tempfile

from absl.testing import absltest

from xflowrl.graphs import rules_io
from xflowrl.graphs.xfers import BUILTIN_RULES, TASO_RULES_JSON, load_default_rules

TASO_PB = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data",
                       "taso_graph_subst.pb")


class TasoReaderTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        if not os.path.exists(TASO_PB):
            self.skipTest(f"{TASO_PB} not found (../shared beside the repository)")
        self.rules, self.skipped = rules_io.read_taso_rules(TASO_PB)

    def test_reads_all_133_rules(self):
        self.assertLen(self.rules, 133)
        self.assertEqual(self.skipped, [])

    def test_op_histogram_matches_the_collection(self):
        ops = collections.Counter(op.type for r in self.rules for op in r.src + r.dst)
        self.assertEqual(ops, {"concat": 182, "matmul": 144, "add": 140, "mul": 134,
                               "conv2d": 106, "relu": 39, "split": 10})
        sizes = collections.Counter((len(r.src), len(r.dst)) for r in self.rules)
        self.assertEqual(sizes, {(2, 1): 1, (2, 2): 5, (2, 3): 18, (3, 2): 12, (3, 3): 97})
        self.assertEqual(sum(len(r.mapped_outputs) == 2 for r in self.rules), 13)

    def test_shipped_json_is_the_converted_collection(self):
        self.assertEqual(rules_io.load_rules(TASO_RULES_JSON), self.rules)

    def test_truncated_file_names_the_offset(self):
        with open(TASO_PB, "rb") as f:
            data = f.read()
        with tempfile.NamedTemporaryFile(suffix=".pb") as f:
            f.write(data[:1000])
            f.flush()
            with self.assertRaisesRegex(ValueError, "truncated .* byte offset"):
                rules_io.read_taso_rules(f.name)


class JsonFormatTest(absltest.TestCase):

    def test_round_trip(self):
        rules = load_default_rules()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rules.json")
            rules_io.save_rules(rules, path)
            self.assertEqual(rules_io.load_rules(path), rules)

    def test_builtins(self):
        names = [r.name for r in rules_io.load_rules(BUILTIN_RULES)]
        self.assertLen(names, 14)
        self.assertFalse(any("mul" in n for n in names))  # not TASO's conv->mul

    def _load(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(text)
        self.addCleanup(os.remove, f.name)
        return rules_io.load_rules(f.name)

    def test_malformed_files(self):
        head = '{"format": "xflowrl-rules", "version": 1, "rules": ['
        relu = '{"type": "relu", "inputs": ["v1"]}'
        cases = {
            "not valid JSON": "{",
            "not an xflowrl-rules file": "[]",
            "unknown op type 'gelu'": head + '{"name": "r", "src": [{"type": "gelu", '
                                      '"inputs": ["v1"]}], "dst": [' + relu +
                                      '], "mapped_outputs": [["op0.0", "op0.0"]]}]}',
            "does not come before": head + '{"name": "r", "src": [{"type": "relu", '
                                    '"inputs": ["op0.0"]}], "dst": [' + relu +
                                    '], "mapped_outputs": [["op0.0", "op0.0"]]}]}',
            "refers to a missing op": head + '{"name": "r", "src": [' + relu + '], "dst": [' +
                                      relu + '], "mapped_outputs": [["op3.0", "op0.0"]]}]}',
            "bad tensor reference": head + '{"name": "r", "src": [{"type": "relu", '
                                    '"inputs": ["x"]}], "dst": [' + relu +
                                    '], "mapped_outputs": [["op0.0", "op0.0"]]}]}',
        }
        for message, text in cases.items():
            with self.subTest(message=message):
                with self.assertRaisesRegex(ValueError, message):
                    self._load(text)


if __name__ == "__main__":
    absltest.main()
