"""Tests of the world model's data: vocabulary, rollouts, sequences, batches."""

from absl.testing import absltest, parameterized
import numpy as np

from tests.world_model import fixtures
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.env import location_counts
from xflowrl.world_model import data


def _rollout(valid, actions, rewards, truncated, num_states=None):
    """A hand-made rollout; states are placeholders (to_sequences only counts them)."""
    t = len(actions)
    dones = np.zeros(t, bool)
    dones[-1] = True
    return data.Rollout(states=[None] * (num_states or t + 1), valid=valid,
                        actions=np.array(actions, np.int64).reshape(-1, 2),
                        rewards=np.array(rewards, np.float32), dones=dones,
                        truncated=truncated, final_cost=1.0)


class XferVocabularyTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.vocab = data.XferVocabulary([7, 3, 3, 10], num_real_xfers=12)

    def test_ids_are_sorted_and_unique(self):
        np.testing.assert_array_equal(self.vocab.xfer_ids, [3, 7, 10])
        self.assertEqual(self.vocab.size, 3)

    def test_round_trip(self):
        for compact, real in enumerate([3, 7, 10]):
            self.assertEqual(self.vocab.to_real(compact), real)
            self.assertEqual(self.vocab.to_compact(real), compact)
        for real in set(range(12)) - {3, 7, 10}:
            self.assertEqual(self.vocab.to_compact(real), -1)

    def test_noop_maps_to_m(self):
        self.assertEqual(self.vocab.to_real(3), 12)
        self.assertEqual(self.vocab.to_compact(12), 3)

    def test_allowed(self):
        expected = np.zeros(13, bool)
        expected[[3, 7, 10, 12]] = True
        np.testing.assert_array_equal(self.vocab.allowed(), expected)

    def test_compact_masks_against_manual_indexing(self):
        rng = np.random.default_rng(0)
        xfer_mask = rng.random(13) < 0.5
        location_mask = rng.random((13, 4)) < 0.5
        compact_xfer, compact_location = self.vocab.compact_masks(xfer_mask, location_mask)
        self.assertEqual(compact_xfer.shape, (4,))
        self.assertEqual(compact_location.shape, (4, 4))
        for compact in range(4):
            real = self.vocab.to_real(compact)
            self.assertEqual(compact_xfer[compact], xfer_mask[real])
            np.testing.assert_array_equal(compact_location[compact], location_mask[real])

    def test_json_round_trip(self):
        again = data.XferVocabulary.from_json(self.vocab.to_json())
        np.testing.assert_array_equal(again.xfer_ids, self.vocab.xfer_ids)
        self.assertEqual(again.num_real_xfers, 12)
        np.testing.assert_array_equal(again.allowed(), self.vocab.allowed())

    def test_empty_vocabulary_has_only_noop(self):
        vocab = data.XferVocabulary([], 5)
        self.assertEqual(vocab.size, 0)
        self.assertEqual(vocab.to_real(0), 5)
        self.assertEqual(vocab.to_compact(5), 0)
        np.testing.assert_array_equal(vocab.allowed(), [False] * 5 + [True])

    @parameterized.parameters([-1], [12], [100])
    def test_ids_outside_the_rule_set_raise(self, bad):
        with self.assertRaisesRegex(ValueError, r"xfer ids must lie in \[0, 12\)"):
            data.XferVocabulary([3, bad], 12)

    @parameterized.parameters([-1], [4])
    def test_compact_id_out_of_range_raises(self, bad):
        with self.assertRaisesRegex(ValueError, rf"compact xfer {bad} out of range \[0, 3\]"):
            self.vocab.to_real(bad)

    def test_from_rollouts_collects_every_valid_xfer(self):
        rollouts = [_rollout([{4: 2}, {1: 1, 4: 3}], [[4, 0]], [0.5], False),
                    _rollout([{9: 1}, {}], [[9, 0]], [0.1], False)]
        vocab = data.XferVocabulary.from_rollouts(rollouts, 12)
        np.testing.assert_array_equal(vocab.xfer_ids, [1, 4, 9])


class VocabularyCapacityTest(absltest.TestCase):
    """Free slots (capacity > known) and growing into them."""

    def setUp(self):
        super().setUp()
        # Known 3, 7, 10 (compact 0, 1, 2), free slots 3 and 4, NO-OP 5.
        self.vocab = data.XferVocabulary([7, 3, 10], num_real_xfers=12, capacity=5)

    def test_size_is_the_capacity(self):
        self.assertEqual(self.vocab.size, 5)
        self.assertEqual(self.vocab.capacity, 5)
        self.assertEqual(self.vocab.known, 3)
        self.assertEqual(data.XferVocabulary([7, 3, 10], 12).size, 3, "default: no free slot")

    def test_free_slots_map_to_no_real_xfer(self):
        self.assertEqual([self.vocab.to_real(c) for c in range(6)], [3, 7, 10, -1, -1, 12])
        self.assertEqual(self.vocab.to_compact(12), 5, "NO-OP is M = capacity")
        for real in set(range(12)) - {3, 7, 10}:
            self.assertEqual(self.vocab.to_compact(real), -1)
        expected = np.zeros(13, bool)
        expected[[3, 7, 10, 12]] = True
        np.testing.assert_array_equal(self.vocab.allowed(), expected)

    def test_compact_masks_never_mark_a_free_slot_valid(self):
        rng = np.random.default_rng(1)
        xfer_mask = np.ones(13, bool)  # every real xfer valid, NO-OP too
        location_mask = rng.random((13, 4)) < 0.5
        location_mask[:, 0] = True
        compact_xfer, compact_location = self.vocab.compact_masks(xfer_mask, location_mask)
        self.assertEqual(compact_xfer.shape, (6,))
        self.assertEqual(compact_location.shape, (6, 4))
        np.testing.assert_array_equal(compact_xfer, [True, True, True, False, False, True])
        self.assertFalse(compact_location[3:5].any())
        for compact, real in enumerate([3, 7, 10]):
            np.testing.assert_array_equal(compact_location[compact], location_mask[real])
        # NO-OP stays last: its real row lands at M, whatever the real NO-OP flag is.
        np.testing.assert_array_equal(compact_location[5], location_mask[12])
        xfer_mask[12] = False
        self.assertFalse(self.vocab.compact_masks(xfer_mask, location_mask)[0][5])

    def test_grow_appends_unknown_ids_in_the_given_order(self):
        grown, dropped = self.vocab.grow([5, 3, 1, 5, 10])
        self.assertEqual(dropped, [])
        np.testing.assert_array_equal(grown.xfer_ids, [3, 7, 10, 5, 1])
        self.assertEqual((grown.known, grown.size, grown.num_real_xfers), (5, 5, 12))
        # Known ids keep their compact ids; the new ones fill the free slots in order.
        for compact, real in enumerate([3, 7, 10, 5, 1]):
            self.assertEqual(grown.to_compact(real), compact)
            self.assertEqual(grown.to_real(compact), real)
        self.assertEqual(grown.to_compact(12), 5)
        self.assertEqual(grown.to_real(5), 12)
        # The vocabulary grown from is unchanged.
        np.testing.assert_array_equal(self.vocab.xfer_ids, [3, 7, 10])
        self.assertEqual(self.vocab.to_compact(5), -1)

    def test_grow_returns_what_does_not_fit(self):
        grown, dropped = self.vocab.grow([9, 3, 0, 11, 0])
        np.testing.assert_array_equal(grown.xfer_ids, [3, 7, 10, 9, 0])
        self.assertEqual(dropped, [11])
        full, dropped = grown.grow([4, 9, 2])
        np.testing.assert_array_equal(full.xfer_ids, grown.xfer_ids)
        self.assertEqual(dropped, [4, 2])
        self.assertEqual(full.size, 5)
        # Nothing new: nothing dropped.
        same, dropped = grown.grow([3, 0])
        np.testing.assert_array_equal(same.xfer_ids, grown.xfer_ids)
        self.assertEqual(dropped, [])
        # No free slot at all.
        _, dropped = data.XferVocabulary([1, 2], 12).grow([2, 6, 5])
        self.assertEqual(dropped, [6, 5])

    def test_json_round_trip_keeps_capacity_and_order(self):
        for vocab in (self.vocab, self.vocab.grow([11, 0])[0], self.vocab.grow([11, 0, 4])[0]):
            again = data.XferVocabulary.from_json(vocab.to_json())
            np.testing.assert_array_equal(again.xfer_ids, vocab.xfer_ids)
            self.assertEqual((again.capacity, again.known, again.num_real_xfers),
                             (vocab.capacity, vocab.known, vocab.num_real_xfers))
            for real in range(13):
                self.assertEqual(again.to_compact(real), vocab.to_compact(real), real)
        # The grown order is not sorted, and survives.
        grown = data.XferVocabulary.from_json(self.vocab.grow([11, 0])[0].to_json())
        np.testing.assert_array_equal(grown.xfer_ids, [3, 7, 10, 11, 0])

    def test_json_without_capacity_is_full(self):
        # A vocabulary saved before capacities existed.
        old = data.XferVocabulary.from_json('{"xfer_ids": [4, 2], "num_real_xfers": 6}')
        self.assertEqual((old.size, old.known), (2, 2))
        np.testing.assert_array_equal(old.xfer_ids, [4, 2])

    def test_capacity_below_the_known_xfers_raises(self):
        with self.assertRaisesRegex(ValueError, "capacity 2 < 3 known xfers"):
            data.XferVocabulary([7, 3, 10], 12, capacity=2)

    def test_from_rollouts_headroom(self):
        rollouts = [_rollout([{4: 2}, {1: 1, 4: 3}], [[4, 0]], [0.5], False),
                    _rollout([{9: 1}, {}], [[9, 0]], [0.1], False)]
        vocab = data.XferVocabulary.from_rollouts(rollouts, 12, headroom=3)
        np.testing.assert_array_equal(vocab.xfer_ids, [1, 4, 9])
        self.assertEqual((vocab.known, vocab.size), (3, 6))
        self.assertEqual(vocab.to_compact(12), 6)
        self.assertEqual(data.XferVocabulary.from_rollouts(rollouts, 12).size, 3)

    def test_visited_xfers(self):
        rollouts = [_rollout([{4: 2}, {1: 1, 4: 3}], [[4, 0]], [0.5], False),
                    _rollout([{9: 1}, {}], [[9, 0]], [0.1], False)]
        self.assertEqual(data.visited_xfers(rollouts), [1, 4, 9])
        self.assertEqual(data.visited_xfers(rollouts[1:]), [9])
        self.assertEqual(data.visited_xfers([]), [])
        real = fixtures.rollouts(12, seed=0, max_steps=6)
        expected = sorted({x for r in real for v in r.valid for x in v})
        self.assertEqual(data.visited_xfers(real), expected)
        self.assertNotEmpty(expected)


class CollectRolloutsTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env = fixtures.real_env(max_steps=6)
        cls.rollouts = fixtures.rollouts(12, seed=0, max_steps=6)

    def test_structure(self):
        for r in self.rollouts:
            fixtures.check_rollout_structure(self, r, max_steps=6)

    def test_real_steps_counts_actions(self):
        self.assertEqual(data.real_steps(self.rollouts),
                         sum(len(r.actions) for r in self.rollouts))
        self.assertEqual(data.real_steps(self.rollouts[:1]), len(self.rollouts[0].actions))
        self.assertEqual(data.real_steps([]), 0)

    def test_first_state_is_the_initial_graph(self):
        obs = self.env.reset()
        counts = location_counts(obs.location_mask[:-1])
        expected = {int(x): int(counts[x]) for x in np.flatnonzero(counts)}
        for r in self.rollouts:
            self.assertEqual(r.valid[0], expected)
            np.testing.assert_array_equal(r.states[0].nodes, obs.state.nodes)

    def test_actions_were_valid_and_rewards_telescope(self):
        noop = self.env.noop
        for r in self.rollouts:
            for t, (x, l) in enumerate(r.actions):
                if x != noop:
                    self.assertIn(int(x), r.valid[t])
                    self.assertLess(l, r.valid[t][int(x)])
                else:
                    self.assertEqual(t, len(r.actions) - 1, "NO-OP ends the episode")
            # Relative rewards sum to the final relative cost drop.
            self.assertAlmostEqual(float(r.rewards.sum()),
                                   100 * (self.env.initial_cost - r.final_cost)
                                   / self.env.initial_cost, places=3)

    def test_truncated_exactly_when_the_step_limit_cut(self):
        kinds = set()
        for r in self.rollouts:
            cut = (len(r.actions) == 6 and r.actions[-1, 0] != self.env.noop
                   and bool(r.valid[-1]))
            self.assertEqual(r.truncated, cut)
            kinds.add(r.truncated)
        self.assertEqual(kinds, {True, False}, "the sample should hold both kinds")

    def test_allowed_restricts_the_xfers_taken(self):
        vocab = data.XferVocabulary.from_rollouts(self.rollouts, self.env.num_xfers)
        keep = vocab.xfer_ids[::3]  # a third of the known xfers
        allowed = np.zeros(self.env.num_xfers + 1, bool)
        allowed[keep] = True
        allowed[self.env.noop] = True
        rollouts = data.collect_rollouts(self.env, 10, RandomAgent.thesis_collector(3),
                                         allowed)
        taken = {int(x) for r in rollouts for x in r.actions[:, 0]}
        self.assertTrue(taken <= set(keep.tolist()) | {self.env.noop}, taken)
        self.assertTrue(taken & set(keep.tolist()), "some allowed xfer should be taken")
        # The recorded validity is the real environment's, not the restricted view.
        self.assertEqual(rollouts[0].valid[0], self.rollouts[0].valid[0])


class SequencesTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.vocab = data.XferVocabulary([2, 5, 8], 10)  # compact 0, 1, 2; NO-OP 3

    def test_compact_ids_counts_and_valid(self):
        rollout = _rollout(valid=[{2: 3, 5: 1}, {8: 4, 9: 2}, {}],
                           actions=[[5, 0], [8, 3]], rewards=[0.5, -0.25], truncated=True)
        latents = np.arange(6, dtype=np.float64).reshape(3, 2)
        s = data.to_sequences(rollout, latents, self.vocab)
        np.testing.assert_array_equal(s.xfers, [1, 2])
        np.testing.assert_array_equal(s.locations, [0, 3])
        np.testing.assert_allclose(s.rewards, [0.5, -0.25])
        np.testing.assert_array_equal(s.xfer_valid, [[1, 1, 0], [0, 0, 1], [0, 0, 0]])
        np.testing.assert_array_equal(s.counts, [[3, 1, 0], [0, 0, 4], [0, 0, 0]])
        self.assertEqual(s.latents.dtype, np.float32)
        np.testing.assert_array_equal(s.latents, latents)

    def test_truncated_last_step_is_not_terminal(self):
        rollout = _rollout([{2: 1}] * 3, [[2, 0], [2, 0]], [0.0, 0.0], truncated=True)
        s = data.to_sequences(rollout, np.zeros((3, 2)), self.vocab)
        np.testing.assert_array_equal(s.terminals, [0.0, 0.0])
        # The rollout itself still records the episode's end.
        np.testing.assert_array_equal(rollout.dones, [False, True])

    def test_real_end_is_terminal(self):
        rollout = _rollout([{2: 1}] * 3, [[2, 0], [10, 0]], [0.0, 0.0], truncated=False)
        s = data.to_sequences(rollout, np.zeros((3, 2)), self.vocab)
        np.testing.assert_array_equal(s.terminals, [0.0, 1.0])
        np.testing.assert_array_equal(s.xfers, [0, 3])  # NO-OP is M

    def test_real_rollouts(self):
        rollouts = fixtures.rollouts(12, seed=0, max_steps=6)
        vocab = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        for r in rollouts:
            s = data.to_sequences(r, np.zeros((len(r.states), 4)), vocab)
            self.assertEqual(s.terminals[-1], 0.0 if r.truncated else 1.0)
            self.assertEqual(s.terminals[:-1].sum(), 0.0)
            for t, v in enumerate(r.valid):
                self.assertEqual(s.xfer_valid[t].sum(), len(v))
                for real, count in v.items():
                    self.assertEqual(s.counts[t, vocab.to_compact(real)], count)


    def test_grown_vocabulary_labels_the_new_slot(self):
        vocab = data.XferVocabulary([2, 5, 8], 10, capacity=5)  # free 3, 4; NO-OP 5
        rollout = _rollout(valid=[{2: 3, 9: 2}, {9: 4, 7: 1}, {5: 1, 9: 1}],
                           actions=[[9, 1], [10, 0]], rewards=[0.5, 0.0], truncated=False)
        # Before growing, 9 is unknown: its validity is not labelled and taking it raises.
        with self.assertRaisesRegex(ValueError, "outside the vocabulary"):
            data.to_sequences(rollout, np.zeros((3, 2)), vocab)
        grown, dropped = vocab.grow(data.visited_xfers([rollout]))
        self.assertEqual(dropped, [])
        np.testing.assert_array_equal(grown.xfer_ids, [2, 5, 8, 7, 9])  # sorted visits
        s = data.to_sequences(rollout, np.zeros((3, 2)), grown)
        np.testing.assert_array_equal(s.xfers, [4, 5])  # 9 -> slot 4, NO-OP -> M = 5
        np.testing.assert_array_equal(s.xfer_valid, [[1, 0, 0, 0, 1], [0, 0, 0, 1, 1],
                                                     [0, 1, 0, 0, 1]])
        np.testing.assert_array_equal(s.counts, [[3, 0, 0, 0, 2], [0, 0, 0, 1, 4],
                                                 [0, 1, 0, 0, 1]])
        # Grown by 9 alone, slot 4 stays free: never valid, 7 not labelled.
        partial = vocab.grow([9])[0]
        s = data.to_sequences(rollout, np.zeros((3, 2)), partial)
        np.testing.assert_array_equal(s.xfers, [3, 5])
        np.testing.assert_array_equal(s.xfer_valid[:, 4], 0)
        np.testing.assert_array_equal(s.xfer_valid, [[1, 0, 0, 1, 0], [0, 0, 0, 1, 0],
                                                     [0, 1, 0, 1, 0]])

    def test_xfer_outside_the_vocabulary_raises(self):
        rollout = _rollout([{3: 1}, {}], [[3, 0]], [0.0], truncated=False)
        with self.assertRaisesRegex(ValueError, "outside the vocabulary"):
            data.to_sequences(rollout, np.zeros((2, 2)), self.vocab)


class MakeBatchTest(absltest.TestCase):

    def _sequences(self, length, offset, m=3, z=2):
        rng = np.random.default_rng(offset)
        return data.Sequences(
            latents=(offset + np.arange((length + 1) * z, dtype=np.float32)).reshape(-1, z),
            xfers=rng.integers(0, m + 1, length), locations=rng.integers(0, 4, length),
            rewards=rng.normal(size=length).astype(np.float32),
            terminals=np.eye(length, dtype=np.float32)[-1],
            xfer_valid=(rng.random((length + 1, m)) < 0.5).astype(np.float32),
            counts=rng.integers(0, 5, (length + 1, m)).astype(np.float32),
            gains=rng.normal(size=(length + 1, m, 2)).astype(np.float32))

    def test_padding_shapes_and_alignment(self):
        sequences = [self._sequences(3, 100), self._sequences(5, 200)]
        batch = data.make_batch(sequences)
        self.assertEqual(batch.latents.shape, (2, 5, 2))
        self.assertEqual(batch.next_latents.shape, (2, 5, 2))
        for name in ("xfers", "locations", "rewards", "terminals", "weights"):
            self.assertEqual(getattr(batch, name).shape, (2, 5), name)
        self.assertEqual(batch.xfer_valid.shape, (2, 5, 3))
        self.assertEqual(batch.counts.shape, (2, 5, 3))
        self.assertEqual(batch.xfers.dtype, np.int32)
        np.testing.assert_array_equal(batch.weights, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
        for i, s in enumerate(sequences):
            n = len(s.xfers)
            np.testing.assert_array_equal(batch.latents[i, :n], s.latents[:n])
            np.testing.assert_array_equal(batch.next_latents[i, :n], s.latents[1:])
            # z_{t+1} of step t is z of step t+1.
            np.testing.assert_array_equal(batch.next_latents[i, :n - 1], batch.latents[i, 1:n])
            np.testing.assert_array_equal(batch.xfers[i, :n], s.xfers)
            np.testing.assert_array_equal(batch.locations[i, :n], s.locations)
            np.testing.assert_array_equal(batch.rewards[i, :n], s.rewards)
            np.testing.assert_array_equal(batch.terminals[i, :n], s.terminals)
            # Mask targets are those of s_t, not s_{t+1}.
            np.testing.assert_array_equal(batch.xfer_valid[i, :n], s.xfer_valid[:n])
            np.testing.assert_array_equal(batch.counts[i, :n], s.counts[:n])
        # Padding is zero everywhere.
        for field in batch:
            self.assertFalse(np.any(field[0, 3:]))


if __name__ == "__main__":
    absltest.main()
