"""Tests of the corpus registry: names, the splits, queries."""

import collections

from absl.testing import absltest
import numpy as np

from xflowrl import corpus, zoo
from xflowrl.corpus import registry
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig
from xflowrl.generalist.distribution import training_env

TRAIN_FAMILIES = ("resnet", "resnext", "squeezenet", "vgg", "bert", "nasrnn", "nascell",
                  "transformer", "mlp")
# The validation split, pinned: the members that choose the shipped
# generalist (docs/zoo.md, "The validation split") stay these.
VALIDATION = (
    "resnet/d12w24", "resnext/b1-2w48g4", "squeezenet/f3w12", "vgg/13w32", "bert/l2h96a4s48",
    "nasrnn/t2h32", "resnet/d20w64i64", "resnext/b1-2-2w64g8i64", "squeezenet/f8w32",
    "vgg/16w32", "bert/l4h512a8s64", "nasrnn/t3h256", "nascell/s100", "nascell/s101",
    "nascell/s102", "nascell/s103", "nascell/large-s100", "transformer/s100",
    "transformer/s101", "transformer/large-s100", "mlp/s100", "mlp/s101", "mlp/large-s100")


class RegistryTest(absltest.TestCase):

    def test_counts(self):
        # docs/zoo.md, "The training distribution", and the package docstring.
        self.assertLen(corpus.specs("train"), 63)
        self.assertLen(corpus.specs("validation"), 23)
        self.assertLen(corpus.specs("held_out"), 30)
        self.assertLen(corpus.specs("all"), 116)
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
            if spec.split != "validation":
                self.assertEqual(spec.split, corpus.split_of(spec.family, spec.size_class))
        self.assertEqual(corpus.split_of("resnet", "medium"), "train")
        self.assertEqual(corpus.split_of("resnet", "large"), "held_out")
        self.assertEqual(corpus.split_of("vit", "small"), "held_out")

    def test_the_splits_are_disjoint_and_cover_the_corpus(self):
        names = {split: set(corpus.CORPUS.names(split)) for split in corpus.SPLITS}
        self.assertFalse(names["train"] & names["validation"])
        self.assertFalse(names["train"] & names["held_out"])
        self.assertFalse(names["validation"] & names["held_out"])
        self.assertEqual(names["train"] | names["validation"] | names["held_out"], names["all"])
        self.assertEqual(sorted(s.split for s in corpus.MEMBERS if s.name in names["validation"]),
                         ["validation"] * len(VALIDATION))

    def test_the_validation_split_is_stable(self):
        self.assertEqual(tuple(corpus.CORPUS.names("validation")), VALIDATION)
        self.assertEqual(corpus.VALIDATION_MEMBERS, tuple(corpus.specs("validation")))
        for spec in corpus.specs("validation"):
            self.assertEqual(spec.build().hash(), spec.build().hash(), spec.name)
            self.assertIsNone(spec.held_out_by)

    def test_validation_is_training_families_never_trained_on_nor_tested(self):
        self.assertEqual(corpus.CORPUS.families("validation"), list(TRAIN_FAMILIES))
        others = {s.build().hash() for s in corpus.MEMBERS if s.split != "validation"}
        others |= {zoo.get_graph(name).hash() for name in zoo.GRAPHS}
        for spec in corpus.specs("validation"):
            self.assertNotIn(spec.build().hash(), others, spec.name)

    def test_validation_members_are_never_drawn_for_training(self):
        validation = set(corpus.CORPUS.names("validation"))
        rng = np.random.default_rng(1)
        for by_family in (True, False):
            draws = {corpus.sample(rng, "train", by_family).name for _ in range(2000)}
            self.assertFalse(draws & validation)
        env = training_env(XferSet.default(), CostModel("analytic", profile="v100"),
                           EnvConfig())
        self.assertEqual(list(env.names), corpus.CORPUS.names("train"))
        self.assertFalse(set(env.names) & validation)
        self.assertFalse({env.draw() for _ in range(2000)} & validation)
        for split in ("validation", "all"):
            with self.assertRaisesRegex(ValueError, "never trained on"):
                training_env(XferSet.default(), CostModel("analytic"), EnvConfig(),
                             split=split)

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
        self.assertTrue(set(draws("validation")) <= set(corpus.CORPUS.names("validation")))
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
