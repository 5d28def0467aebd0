"""Tests of the rule data model and formats: TASO's protobuf and the project's JSON.

These tests do not need the native engine.
"""

import collections
import dataclasses
import json
import os
import tempfile
from typing import List, Sequence, Tuple
from unittest import mock

from absl.testing import absltest

from xflowrl.rules import files as rule_files
from xflowrl.rules import rules_io, taso_pb
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule

_REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# TASO's shipped rule collection (graph_subst.pb, at the root of
# github.com/jiazhihao/TASO), when $XFLOWRL_TASO_PB names a copy.
TASO_PB = os.environ.get("XFLOWRL_TASO_PB", "")
BUILTIN_JSON = rule_files.path(rule_files.BUILTIN)
TASO_JSON = rule_files.path(rule_files.TASO)

X, W1, W2 = PatternTensor(-1), PatternTensor(-2), PatternTensor(-3)


def op(type_name: str, inputs: Sequence[PatternTensor], **params) -> PatternOp:
    return PatternOp(type_name, tuple(inputs), tuple(params.items()))


CONV_RELU = Rule(
    "conv_relu",
    src=(op("conv2d", [X, W1], activation=0), op("relu", [PatternTensor(0)])),
    dst=(op("conv2d", [X, W1], activation=2),),
    mapped_outputs=((PatternTensor(1), PatternTensor(0)),))


# ----------------------------------------------- a tiny protobuf encoder


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32: 64-bit two's complement, as protobuf
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _msg_field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _pb_op(taso_type: int, inputs: Sequence[Tuple[int, int]],
           params: Sequence[Tuple[int, int]] = ()) -> bytes:
    body = _int_field(1, taso_type)
    for op_id, ts_id in inputs:
        body += _msg_field(2, _int_field(1, op_id) + _int_field(2, ts_id))
    for key, value in params:
        body += _msg_field(3, _int_field(1, key) + _int_field(2, value))
    return body


def _pb_rule(src: List[bytes], dst: List[bytes],
             mapped: Sequence[Tuple[int, int, int, int]]) -> bytes:
    body = b"".join(_msg_field(1, o) for o in src) + b"".join(_msg_field(2, o) for o in dst)
    for s_op, d_op, s_ts, d_ts in mapped:
        body += _msg_field(3, _int_field(1, s_op) + _int_field(2, d_op) +
                           _int_field(3, s_ts) + _int_field(4, d_ts))
    return _msg_field(1, body)


def _write(test: absltest.TestCase, data, suffix: str) -> str:
    mode = "wb" if isinstance(data, bytes) else "w"
    with tempfile.NamedTemporaryFile(mode, suffix=suffix, delete=False) as f:
        f.write(data)
    test.addCleanup(os.remove, f.name)
    return f.name


# ------------------------------------------------------------------ tests


class TasoCollectionTest(absltest.TestCase):
    """The real graph_subst.pb: 133 rules (TASO's src/core/rules.proto schema)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.path.exists(TASO_PB):
            raise absltest.SkipTest("TASO's graph_subst.pb: set XFLOWRL_TASO_PB to a copy "
                                    f"(now {TASO_PB!r})")
        cls.rules, cls.skipped = taso_pb.read_taso_rules(TASO_PB)
        cls.all_rules, cls.none_skipped = taso_pb.read_taso_rules(TASO_PB, drop_unsound=False)

    def test_reads_all_133_rules_and_drops_the_4_unsound(self):
        self.assertLen(self.all_rules, 133)
        self.assertEqual(self.none_skipped, [])
        self.assertEqual([r.name for r in self.all_rules], [f"taso_{i}" for i in range(133)])
        unsound = sorted(taso_pb.TASO_UNSOUND)
        self.assertEqual(unsound, [99, 100, 130, 131])
        self.assertEqual([r.name for r in self.rules],
                         [f"taso_{i}" for i in range(133) if i not in unsound])
        self.assertEqual([m.split(":")[0] for m in self.skipped],
                         [f"taso_{i}" for i in unsound])
        self.assertTrue(all("unsound" in m for m in self.skipped))

    def test_op_histogram(self):
        ops = collections.Counter(o.type for r in self.all_rules for o in r.src + r.dst)
        self.assertEqual(ops, {"concat": 182, "matmul": 144, "add": 140, "mul": 134,
                               "conv2d": 106, "relu": 39, "split": 10})

    def test_pattern_sizes_and_mapped_outputs(self):
        sizes = collections.Counter((len(r.src), len(r.dst)) for r in self.all_rules)
        self.assertEqual(sizes, {(2, 1): 1, (2, 2): 5, (2, 3): 18, (3, 2): 12, (3, 3): 97})
        self.assertEqual(sum(len(r.mapped_outputs) == 2 for r in self.all_rules), 13)

    def test_parameters(self):
        convs = [o for r in self.rules for o in r.src + r.dst if o.type == "conv2d"]
        for conv in convs:
            params = dict(conv.params)
            self.assertNotIn("kernel_h", params)   # dropped, as TASO's loader does
            self.assertNotIn("kernel_w", params)
            self.assertEqual((params["stride_h"], params["stride_w"], params["padding"]),
                             (1, 1, rules_io.PADDINGS["SAME"]))
            self.assertIn(params["activation"], (0, 2))
        # Split outputs other than 0 are decoded (dstTsId): 10 splits, 10 such maps.
        self.assertEqual(sum(d.index == 1 for r in self.rules
                             for _, d in r.mapped_outputs), 10)

    def test_spot_checks(self):
        # Rule 0: (x * w1) * w2 -> x * (w1 * w2) (matmul associativity).
        self.assertEqual(self.rules[0], Rule(
            "taso_0",
            src=(op("matmul", [PatternTensor(-1), PatternTensor(-4)], activation=0),
                 op("matmul", [PatternTensor(0), PatternTensor(-5)], activation=0)),
            dst=(op("matmul", [PatternTensor(-4), PatternTensor(-5)], activation=0),
                 op("matmul", [PatternTensor(-1), PatternTensor(0)], activation=0)),
            mapped_outputs=((PatternTensor(1), PatternTensor(1)),)))
        # The only 2 -> 1 rule is conv + relu fusion.
        (fusion,) = [r for r in self.rules if (len(r.src), len(r.dst)) == (2, 1)]
        self.assertEqual([o.type for o in fusion.src], ["conv2d", "relu"])
        self.assertEqual(fusion.dst[0].param("activation"), rules_io.ACTIVATIONS["RELU"])
        self.assertEqual(fusion.mapped_outputs, ((PatternTensor(1), PatternTensor(0)),))

    def test_shipped_json_is_the_converted_collection(self):
        self.assertEqual(rules_io.load_rules(TASO_JSON), self.rules)

    def test_truncated_file(self):
        with open(TASO_PB, "rb") as f:
            data = f.read()
        path = _write(self, data[:1000], ".pb")
        with self.assertRaisesRegex(ValueError, r"truncated .*byte offset \d+"):
            taso_pb.read_taso_rules(path)
        # Every cut inside the first rule (155 bytes with its header) fails.
        for cut in range(1, 155):
            with self.subTest(cut=cut):
                with self.assertRaisesRegex(ValueError, "byte offset"):
                    taso_pb.decode_taso_rules(data[:cut])
        # A cut on a rule boundary is a valid, shorter collection.
        rules, _ = taso_pb.decode_taso_rules(data[:155])
        self.assertEqual(rules, self.rules[:1])


class TasoDecoderTest(absltest.TestCase):
    """Hand-encoded collections."""

    def test_expressible_and_inexpressible_rules(self):
        relu = _pb_op(8, [(-1, 0)])
        data = (
            # 0: conv(x, w) with a kernel constraint, relu -> fused conv.
            _pb_rule([_pb_op(3, [(-1, 0), (-2, 0)], [(4, 3), (5, 3), (9, 0)]),
                      _pb_op(8, [(0, 0)])],
                     [_pb_op(3, [(-1, 0), (-2, 0)], [(9, 2)])], [(1, 0, 0, 0)])
            # 1: a max pool.
            + _pb_rule([_pb_op(6, [(-1, 0), (-2, 0)])], [relu], [(0, 0, 0, 0)])
            # 2: a transpose with TASO's encoded perm.
            + _pb_rule([relu], [_pb_op(15, [(-1, 0)], [(12, 5)])], [(0, 0, 0, 0)])
            # 3: split into two, mapped output 1 -> 1.
            + _pb_rule([_pb_op(13, [(-1, 0)], [(11, 1), (2, 2)]), _pb_op(8, [(0, 1)])],
                       [_pb_op(13, [(-1, 0)], [(11, 1), (2, 2)])],
                       [(0, 0, 0, 0), (1, 0, 0, 1)])
            # 4: refers to an op that does not come first.
            + _pb_rule([_pb_op(8, [(1, 0)]), relu], [relu], [(0, 0, 0, 0)]))
        rules, skipped = taso_pb.decode_taso_rules(data)
        self.assertEqual([r.name for r in rules], ["taso_0", "taso_3"])
        self.assertEqual(rules[0], Rule(
            "taso_0", src=(op("conv2d", [X, PatternTensor(-2)], activation=0, group=1),
                           op("relu", [PatternTensor(0)])),
            dst=(op("conv2d", [X, PatternTensor(-2)], activation=2),),
            mapped_outputs=((PatternTensor(1), PatternTensor(0)),)))
        self.assertEqual(rules[1].src[1].inputs, (PatternTensor(0, 1),))
        self.assertEqual(rules[1].mapped_outputs[1], (PatternTensor(1, 0),
                                                      PatternTensor(0, 1)))
        self.assertLen(skipped, 3)
        self.assertRegex(skipped[0], r"^taso_1: src op 0 \(TASO POOL2D_MAX\): .*implicit "
                                     "weight")
        self.assertRegex(skipped[1], r"^taso_2: dst op 0 \(TASO TRANSPOSE\): .*perm")
        self.assertRegex(skipped[2], r"^taso_4: not a valid rule .*src op 0 \(relu\): "
                                     r"op1\.0 refers to op 1, which does not come before")

    def test_unknown_parameter_key(self):
        data = _pb_rule([_pb_op(8, [(-1, 0)], [(13, 1)])], [_pb_op(8, [(-1, 0)])],
                        [(0, 0, 0, 0)])
        _, skipped = taso_pb.decode_taso_rules(data)
        self.assertEqual(len(skipped), 1)
        self.assertRegex(skipped[0], r"taso_0: src op 0 \(TASO RELU\): parameter key 13=1: "
                                     "OUTSHUFFLE")

    def test_malformed_bytes_name_the_offset(self):
        cases = {
            # field 1 with wire type 3 (start group) at offset 0
            r"unsupported wire type 3 \(field 1\) at byte offset 0": b"\x0b",
            # wire type 7 inside a rule body, which starts at offset 2
            r"unsupported wire type 7 \(field 1\) at byte offset 2": b"\x0a\x01\x0f",
            r"Rule field 1 at byte offset 0: expected a message": b"\x08\x01",
            r"truncated field 1: 5 bytes announced at byte offset 0": b"\x0a\x05\x00",
            r"truncated varint at byte offset 1": b"\x08\x80",
            r"invalid field number 0 at byte offset 0": b"\x02\x00",
            r"Operator at byte offset 2 lacks required field type": (
                _msg_field(1, _msg_field(1, _msg_field(2, _int_field(1, -1) +
                                                       _int_field(2, 0))))),
            r"Tensor at byte offset 6 lacks required field tsId": (
                _msg_field(1, _msg_field(1, _int_field(1, 8) +
                                         _msg_field(2, _int_field(1, 3))))),
        }
        for message, data in cases.items():
            with self.subTest(message=message):
                with self.assertRaisesRegex(ValueError, message):
                    taso_pb.decode_taso_rules(data)
        path = _write(self, b"\x0b", ".pb")
        with self.assertRaisesRegex(ValueError, f"{path}: unsupported wire type"):
            taso_pb.read_taso_rules(path)

    def test_skips_unknown_fields(self):
        data = (_int_field(7, 5) + b"\x15\x01\x02\x03\x04" +  # varint and fixed32 fields
                _pb_rule([_pb_op(8, [(-1, 0)])], [_pb_op(9, [(-1, 0)])], [(0, 0, 0, 0)]))
        rules, skipped = taso_pb.decode_taso_rules(data)
        self.assertEqual((len(rules), skipped), (1, []))
        self.assertEqual(rules[0].dst[0].type, "sigmoid")


class BuiltinRulesTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.rules = {r.name: r for r in rules_io.load_rules(BUILTIN_JSON)}

    def test_names(self):
        combos = [f"s{s}_{p}" for s in (1, 2) for p in ("same", "valid")]
        want = ([f"conv_relu_{c}" for c in combos] + ["bias_add_relu"] +
                [f"conv_bn_{c}" for c in combos] +
                ["enlarge_merge_convs_s1_same_none", "enlarge_merge_convs_s1_same_relu"] +
                [f"merge_gconv_s{s}_{a}" for s in (1, 2) for a in ("none", "relu")])
        self.assertEqual(list(self.rules), want)

    def test_bias_add_relu_completes_the_bn_fold(self):
        rule = self.rules["bias_add_relu"]
        self.assertEqual([o.type for o in rule.src], ["broadcast_add", "relu"])
        self.assertEqual([o.type for o in rule.dst], ["broadcast_add"])
        self.assertEqual(dict(rule.dst[0].params), {"activation": 2})

    def test_no_conv_mul_rule(self):
        self.assertFalse(any(o.type == "mul" for r in self.rules.values()
                             for o in r.src + r.dst))

    def test_conv_relu(self):
        for name, rule in self.rules.items():
            if not name.startswith("conv_relu"):
                continue
            with self.subTest(name=name):
                self.assertEqual([o.type for o in rule.src], ["conv2d", "relu"])
                self.assertEqual(rule.src[0].param("activation"), 0)
                (conv,) = rule.dst
                self.assertEqual(conv.param("activation"), 2)
                for key in ("stride_h", "stride_w", "padding"):
                    self.assertEqual(conv.param(key), rule.src[0].param(key))

    def test_conv_bn_carries_epsilon(self):
        rule = self.rules["conv_bn_s2_valid"]
        self.assertEqual([o.type for o in rule.src], ["conv2d", "batchnorm"])
        self.assertEqual(rule.src[0].params, (("activation", 0), ("padding", 1),
                                              ("stride_h", 2), ("stride_w", 2)))
        types = [o.type for o in rule.dst]
        self.assertCountEqual(types, ["fuse_conv_bn_alpha_var", "conv2d",
                                      "fuse_conv_bn_bias", "broadcast_add"])
        bn_inputs = rule.src[1].inputs  # (conv, scale, bias, mean, var)
        for o in rule.dst:
            if o.type.startswith("fuse"):
                self.assertEqual(o.param("epsilon"), "src:1")
        alpha = rule.dst[types.index("fuse_conv_bn_alpha_var")]
        self.assertEqual(alpha.inputs, (rule.src[0].inputs[1], bn_inputs[1], bn_inputs[4]))
        bias = rule.dst[types.index("fuse_conv_bn_bias")]
        self.assertEqual(bias.inputs, bn_inputs[1:])
        (mapped,) = rule.mapped_outputs
        self.assertEqual(rule.dst[mapped[1].op].type, "broadcast_add")

    def test_enlarge_merge(self):
        for act in ("none", "relu"):
            rule = self.rules[f"enlarge_merge_convs_s1_same_{act}"]
            with self.subTest(act=act):
                self.assertEqual(rule.src[0].inputs[0], rule.src[1].inputs[0])  # shared x
                self.assertEqual([o.type for o in rule.dst],
                                 ["enlarge", "concat", "conv2d", "split"])
                split = rule.dst[3]
                self.assertEqual(split.param("axis"), 1)
                self.assertIsNone(split.param("sizes"))
                self.assertEqual(rule.dst[1].param("axis"), 0)
                self.assertEqual(rule.mapped_outputs, (
                    (PatternTensor(0), PatternTensor(3, 0)),
                    (PatternTensor(1), PatternTensor(3, 1))))

    def test_merge_gconv(self):
        rule = self.rules["merge_gconv_s2_relu"]
        merge, conv = rule.dst
        self.assertEqual((merge.type, merge.param("count"), merge.param("group")),
                         ("merge_gconv", 2, "src:0"))
        self.assertEqual(conv.inputs, (rule.src[0].inputs[0], PatternTensor(0)))
        self.assertEqual((conv.param("stride_h"), conv.param("activation"),
                          conv.param("padding")), (2, 2, "src:0"))


class JsonFormatTest(absltest.TestCase):

    def _temp_path(self) -> str:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        return os.path.join(directory.name, "rules.json")

    def test_round_trip(self):
        rules = rules_io.load_rules(BUILTIN_JSON) + rules_io.load_rules(TASO_JSON)
        rules.append(Rule("float_epsilon",
                          src=(op("batchnorm", [X, W1, W2, PatternTensor(-4),
                                                PatternTensor(-5)], epsilon=1e-3),),
                          dst=(op("batchnorm", [X, W1, W2, PatternTensor(-4),
                                                PatternTensor(-5)], epsilon="src:0"),),
                          mapped_outputs=((PatternTensor(0), PatternTensor(0)),)))
        path = self._temp_path()
        rules_io.save_rules(rules, path)
        self.assertEqual(rules_io.load_rules(path), rules)
        with open(path) as f:
            self.assertLen(f.readlines(), len(rules) + 2)  # one rule per line

    def test_a_file_read_again_is_parsed_only_when_its_bytes_change(self):
        path = self._temp_path()
        rules_io.save_rules([CONV_RELU], path)
        with mock.patch.object(rules_io, "_parse_rules", wraps=rules_io._parse_rules) as parse:
            first = rules_io.load_rules(path)
            again = rules_io.load_rules(path)
            self.assertEqual(parse.call_count, 1)
            self.assertEqual(again, first)
            again.append(CONV_RELU)  # the caller's list, not the kept one
            self.assertEqual(rules_io.load_rules(path), [CONV_RELU])
            # Rewritten in place (the same path and size): read anew.
            renamed = dataclasses.replace(CONV_RELU, name="conv_reLU")
            rules_io.save_rules([renamed], path)
            self.assertEqual(rules_io.load_rules(path), [renamed])
            self.assertEqual(parse.call_count, 2)

    def test_params_are_canonical(self):
        a = PatternOp("conv2d", (X, W1), (("stride_w", 1), ("padding", 0)))
        b = PatternOp("conv2d", [X, W1], [("padding", 0), ("stride_w", 1)])
        self.assertEqual(a, b)
        self.assertEqual(hash(a), hash(b))
        with self.assertRaisesRegex(ValueError, "duplicate parameter keys"):
            PatternOp("relu", (X,), (("axis", 0), ("axis", 1)))

    def test_json_shape(self):
        self.assertEqual(rules_io.rule_to_json(CONV_RELU), {
            "name": "conv_relu",
            "src": [{"type": "conv2d", "inputs": ["v1", "v2"], "params": {"activation": 0}},
                    {"type": "relu", "inputs": ["op0.0"]}],
            "dst": [{"type": "conv2d", "inputs": ["v1", "v2"], "params": {"activation": 2}}],
            "mapped_outputs": [["op1.0", "op0.0"]]})

    def _load_rule(self, rule: dict):
        doc = {"format": "xflowrl-rules", "version": 1, "rules": [rule]}
        return rules_io.load_rules(_write(self, json.dumps(doc), ".json"))

    def test_malformed_files(self):
        for message, text in {
                "not valid JSON": "{",
                "not an xflowrl-rules file": "[]",
                "unsupported version 2": '{"format": "xflowrl-rules", "version": 2}',
                "'rules' must be a list": '{"format": "xflowrl-rules", "version": 1}',
        }.items():
            with self.subTest(message=message):
                with self.assertRaisesRegex(ValueError, message):
                    rules_io.load_rules(_write(self, text, ".json"))

    def test_malformed_rules_name_rule_and_field(self):
        good = rules_io.rule_to_json(CONV_RELU)

        def variant(**changes):
            rule = json.loads(json.dumps(good))
            for path, value in changes.items():
                side, j, field = path.split("__") if "__" in path else (path, None, None)
                if j is None:
                    rule[side] = value
                else:
                    rule[side][int(j)][field] = value
            return rule

        cases = [
            ("rule 0 \\('conv_relu'\\) src op 1: bad tensor reference 'x'",
             variant(src__1__inputs=["x"])),
            ("rule 0: rule 'conv_relu' src op 1 \\(gelu\\): unknown op type 'gelu'",
             variant(src__1__type="gelu")),
            ("src op 1 \\(relu\\): op1.0 refers to op 1, which does not come before it",
             variant(src__1__inputs=["op1.0"])),
            ("src op 1 \\(relu\\): op5.0 refers to a missing op",
             variant(src__1__inputs=["op5.0"])),
            ("src op 1 \\(relu\\): op0.1: conv2d has a single output",
             variant(src__1__inputs=["op0.1"])),
            ("src op 1 \\(relu\\): relu takes 1 inputs, got 2",
             variant(src__1__inputs=["op0.0", "v1"])),
            ("dst op 0 \\(conv2d\\): reads variable v3, which the source does not bind",
             variant(dst__0__inputs=["v1", "v3"])),
            ("mapped output 0 \\(source\\): op3.0 refers to a missing op",
             variant(mapped_outputs=[["op3.0", "op0.0"]])),
            ("mapped output 0 \\(target\\): op0.1: conv2d has a single output",
             variant(mapped_outputs=[["op1.0", "op0.1"]])),
            ("mapped output 0: the source tensor v1 is a variable",
             variant(mapped_outputs=[["v1", "op0.0"]])),
            ("mapped output 1: source tensor op1.0 is mapped twice",
             variant(mapped_outputs=[["op1.0", "op0.0"], ["op1.0", "op0.0"]])),
            ("mapped output 0: must be a \\[source, target\\] pair",
             variant(mapped_outputs=[["op1.0"]])),
            ("needs a non-empty list 'dst'", variant(dst=[])),
            ("unknown fields \\['comment'\\]", variant(comment="hi")),
            ("src op 0 \\(conv2d\\): unknown parameter 'dilation'",
             variant(src__0__params={"dilation": 2})),
            ("src op 0 \\(conv2d\\): parameter activation='src:0': only target ops",
             variant(src__0__params={"activation": "src:0"})),
            ("dst op 0 \\(conv2d\\): parameter activation='src:2': the source has only 2",
             variant(dst__0__params={"activation": "src:2"})),
            ("dst op 0 \\(conv2d\\): parameter activation='copy': only target ops may copy",
             variant(dst__0__params={"activation": "copy"})),
            ("src op 0 \\(conv2d\\): parameter stride_h must be an int, got 1.5",
             variant(src__0__params={"stride_h": 1.5})),
            ("src op 0 \\(conv2d\\): parameter padding=2 is out of range \\[0, 2\\)",
             variant(src__0__params={"padding": 2})),
            ("src op 0 \\(conv2d\\): parameter activation must be a number, got True",
             variant(src__0__params={"activation": True})),
        ]
        for message, rule in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(ValueError, message):
                    self._load_rule(rule)
        self.assertEqual(self._load_rule(good), [CONV_RELU])

    def test_duplicate_names(self):
        path = self._temp_path()
        with self.assertRaisesRegex(ValueError, r"duplicate rule names \['conv_relu'\]"):
            rules_io.save_rules([CONV_RELU, CONV_RELU], path)
        self.assertFalse(os.path.exists(path))

    def test_save_validates(self):
        bad = Rule("bad", src=(op("relu", [X]),), dst=(op("relu", [W1]),),
                   mapped_outputs=((PatternTensor(0), PatternTensor(0)),))
        path = self._temp_path()
        with self.assertRaisesRegex(ValueError, "rule 'bad' dst op 0 \\(relu\\): reads "
                                    "variable v2"):
            rules_io.save_rules([bad], path)


if __name__ == "__main__":
    absltest.main()
