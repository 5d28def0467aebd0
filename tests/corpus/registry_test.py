"""Tests of the corpus registry: names, the split, queries."""

import collections

from absl.testing import absltest
import numpy as np

from xflowrl import corpus
from xflowrl.corpus import registry

TRAIN_FAMILIES = ("resnet", "resnext", "squeezenet", "vgg", "bert", "nasrnn", "nascell",
                  "transformer", "mlp")


class RegistryTest(absltest.TestCase):

    def test_counts(self):
        # docs/zoo.md, "The training distribution", and the package docstring.
        self.assertLen(corpus.specs("train"), 63)
        self.assertLen(corpus.specs("held_out"), 30)
        self.assertLen(corpus.specs("all"), 93)
        by = collections.Counter(s.held_out_by for s in corpus.specs("held_out"))
        self.assertEqual(by, {"size": 17, "family": 13})

    def test_names_are_unique_and_name_their_family(self):
        names = [s.name for s in corpus.MEMBERS]
        self.assertLen(set(names), len(names))
        for spec in corpus.MEMBERS:
            family, tag = spec.name.split("/")
            self.assertEqual(family, spec.family)
            self.assertTrue(tag)
            self.assertIn(spec.size_class, corpus.SIZE_CLASSES)

    def test_held_out_families_never_train(self):
        self.assertEqual(corpus.CORPUS.families("train"), list(TRAIN_FAMILIES))
        for family in corpus.HELD_OUT_FAMILIES:
            self.assertNotIn(family, corpus.CORPUS.families("train"))
            self.assertIn(family, corpus.CORPUS.families("held_out"))

    def test_every_training_family_holds_out_larger_members(self):
        for family in TRAIN_FAMILIES:
            train = [s.build().num_ops() for s in corpus.specs("train") if s.family == family]
            held = [s for s in corpus.specs("held_out") if s.family == family]
            self.assertNotEmpty(held, family)
            for spec in held:
                self.assertEqual((spec.size_class, spec.held_out_by), ("large", "size"))
                self.assertGreater(spec.build().num_ops(), np.median(train), spec.name)

    def test_split_is_a_function_of_family_and_size(self):
        for spec in corpus.MEMBERS:
            self.assertEqual(spec.split, corpus.split_of(spec.family, spec.size_class))
        self.assertEqual(corpus.split_of("resnet", "medium"), "train")
        self.assertEqual(corpus.split_of("resnet", "large"), "held_out")
        self.assertEqual(corpus.split_of("vit", "small"), "held_out")

    def test_members_are_distinct_graphs(self):
        hashes = {s.build().hash() for s in corpus.MEMBERS}
        self.assertLen(hashes, len(corpus.MEMBERS))

    def test_get_builds_the_named_member(self):
        spec = corpus.specs("train")[0]
        self.assertEqual(corpus.get(spec.name).hash(), spec.build().hash())
        self.assertEqual(corpus.get("nascell/s3").hash(),
                         corpus.random_nas_cell(3).hash())
        with self.assertRaisesRegex(KeyError, "no corpus member 'resnet/nope'"):
            corpus.get("resnet/nope")
        with self.assertRaisesRegex(ValueError, "unknown split 'test'"):
            corpus.specs("test")

    def test_sample_is_seeded_and_stays_in_its_split(self):
        def draws(split, by_family=True):
            rng = np.random.default_rng(3)
            return [corpus.sample(rng, split, by_family).name for _ in range(50)]

        self.assertEqual(draws("train"), draws("train"))
        held_out = set(corpus.CORPUS.names("held_out"))
        self.assertTrue(set(draws("held_out")) <= held_out)
        self.assertFalse(set(draws("train")) & held_out)
        self.assertTrue(set(draws("train", by_family=False)) <= set(corpus.CORPUS.names()))

    def test_sample_by_family_draws_families_evenly(self):
        rng = np.random.default_rng(0)
        n = 2700
        counts = collections.Counter(corpus.sample(rng).family for _ in range(n))
        self.assertEqual(set(counts), set(TRAIN_FAMILIES))
        expected = n / len(TRAIN_FAMILIES)  # 300 each; std about 16
        for family, count in counts.items():
            self.assertAlmostEqual(count, expected, delta=80, msg=family)

    def test_duplicate_names_are_refused(self):
        spec = corpus.MEMBERS[0]
        with self.assertRaisesRegex(ValueError, "duplicate corpus name"):
            corpus.Corpus([spec, spec])

    def test_unknown_size_class_is_refused(self):
        with self.assertRaisesRegex(ValueError, "size class 'huge'"):
            registry._spec("resnet/x", "huge", corpus.MEMBERS[0].build)


if __name__ == "__main__":
    absltest.main()
