"""The corpus' members, their names and the train / validation / held-out split.

`MEMBERS` lists every member as a `GraphSpec`; `Corpus` answers queries
over a list of specs (by split, by name, a random draw); `CORPUS` is the
corpus of `MEMBERS`. The train / held-out split is a function of a spec's
family and size class alone (`split_of`); the validation members are built
apart (`VALIDATION_MEMBERS`: training families at sizes and seeds no other
member has) and are in no other split. See the package docstring and
docs/zoo.md, "The training distribution".
"""

import functools
import math
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence

import numpy as np

from xflowrl import zoo
from xflowrl.corpus import families, random_graphs
from xflowrl.engine.graph import Graph
from xflowrl.zoo.vgg import VGG19_LAYERS

SPLITS = ("train", "validation", "held_out", "all")
SIZE_CLASSES = ("small", "medium", "large")
# Whole families no training member comes from (held out by family).
HELD_OUT_FAMILIES = ("inception", "vit", "nasnet")
# Members of the training families at this size class are held out (by size).
HELD_OUT_SIZE_CLASS = "large"
# The generated families' validation members draw from these seeds on
# (training and held-out members use seeds below 16).
VALIDATION_SEED_BASE = 100

# `random_weights` gain that keeps float32 values finite: the softmax-free
# transformers are cubic in their input per layer (as zoo.weight_gain).
_HE_GAIN = math.sqrt(2.0)
_SMALL_GAIN = 0.2


class GraphSpec(NamedTuple):
    """One member of the corpus.

    Attributes:
      name: stable, unique name, "<family>/<size tag>" (e.g. "resnet/d14w16",
        "nascell/s17"); the tag spells the builder's size arguments or seed.
      family: the architecture family ("resnet", "nascell", ...).
      size_class: "small", "medium" or "large".
      build: builds the graph (deterministic: equal hashes on every call).
      split: "train" or "held_out" (`split_of(family, size_class)`), or
        "validation" for the members of `VALIDATION_MEMBERS`.
      weight_gain: the `random_weights` gain for finite values.
    """
    name: str
    family: str
    size_class: str
    build: Callable[[], Graph]
    split: str
    weight_gain: float = _HE_GAIN

    @property
    def held_out_by(self) -> Optional[str]:
        """"family", "size" or None (a training or validation member)."""
        if self.split == "validation":
            return None
        if self.family in HELD_OUT_FAMILIES:
            return "family"
        return "size" if self.size_class == HELD_OUT_SIZE_CLASS else None


def split_of(family: str, size_class: str) -> str:
    """"held_out" for a held-out family or the held-out size class, else "train"."""
    if family in HELD_OUT_FAMILIES or size_class == HELD_OUT_SIZE_CLASS:
        return "held_out"
    return "train"


def _spec(name: str, size_class: str, build: Callable[[], Graph],
          weight_gain: float = _HE_GAIN, split: Optional[str] = None) -> GraphSpec:
    if size_class not in SIZE_CLASSES:
        raise ValueError(f"{name}: size class {size_class!r} not in {SIZE_CLASSES}")
    family = name.split("/", 1)[0]
    return GraphSpec(name, family, size_class, build, split or split_of(family, size_class),
                     weight_gain)


# --------------------------------------------------------------------------
# Members, family by family
# --------------------------------------------------------------------------

def _resnets() -> List[GraphSpec]:
    # (blocks per stage, width, image, size class); depth = 2 * sum(blocks) + 2.
    rows = [((1, 1, 1), 16, 32, "small"), ((1, 1, 1), 32, 32, "small"),
            ((1, 1, 1, 1), 16, 64, "small"), ((2, 2, 2), 16, 32, "medium"),
            ((2, 2, 2), 32, 32, "medium"), ((3, 3, 3), 16, 32, "medium"),
            ((5, 5, 5), 16, 32, "large"), ((7, 7, 7), 16, 32, "large")]
    specs = []
    for blocks, width, image, size in rows:
        tag = f"d{2 * sum(blocks) + 2}w{width}" + (f"i{image}" if image != 32 else "")
        specs.append(_spec(f"resnet/{tag}", size, functools.partial(
            families.resnet, blocks=blocks, width=width, image_size=image)))
    return specs


def _resnexts() -> List[GraphSpec]:
    # (stages as (width, blocks, first stride), groups, image, size class)
    rows = [(((32, 1, 1), (64, 1, 2)), 4, 32, "small"),
            (((32, 1, 1), (64, 1, 2)), 8, 64, "small"),
            (((32, 1, 1), (64, 2, 2), (128, 2, 2)), 4, 64, "medium"),
            (((64, 2, 1), (128, 2, 2)), 8, 32, "medium"),
            (((32, 2, 1), (64, 2, 2), (128, 2, 2), (256, 1, 2)), 8, 64, "medium"),
            (((32, 3, 1), (64, 4, 2), (128, 6, 2), (256, 3, 2)), 8, 64, "large")]
    specs = []
    for stages, groups, image, size in rows:
        tag = ("b" + "-".join(str(s[1]) for s in stages) + f"w{stages[0][0]}g{groups}"
               + (f"i{image}" if image != 32 else ""))
        specs.append(_spec(f"resnext/{tag}", size, functools.partial(
            zoo.resnext50, image_size=image, stem_channels=16, groups=groups, stages=stages)))
    return specs


def _squeezenets() -> List[GraphSpec]:
    rows = [(2, 8, "small"), (2, 16, "small"), (4, 16, "medium"), (6, 16, "medium"),
            (8, 8, "medium"), (10, 16, "large"), (12, 16, "large")]
    return [_spec(f"squeezenet/f{fires}w{width}", size, functools.partial(
        families.squeezenet, fires=fires, width=width, image_size=64))
        for fires, width, size in rows]


# torchvision's configurations A, B, D, E: output channels, "M" = 2x2/2 max pool.
VGG_LAYERS: Dict[int, tuple] = {
    11: (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    13: (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    16: (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
         512, 512, 512, "M"),
    19: VGG19_LAYERS,
}


def _vggs() -> List[GraphSpec]:
    # (depth, channel divisor, size class); 32x32 input, hidden 256, 10 classes.
    rows = [(11, 16, "small"), (11, 8, "small"), (13, 16, "medium"), (13, 8, "medium"),
            (16, 8, "medium"), (19, 8, "large"), (19, 4, "large")]
    return [_spec(f"vgg/{depth}w{64 // divisor}", size, functools.partial(
        zoo.vgg19, image_size=32, classes=10, hidden=256, layers=VGG_LAYERS[depth],
        channel_divisor=divisor)) for depth, divisor, size in rows]


def _berts() -> List[GraphSpec]:
    # (layers, hidden, heads, sequence, size class)
    rows = [(1, 64, 2, 16, "small"), (1, 128, 4, 32, "small"), (2, 64, 4, 32, "small"),
            (2, 128, 8, 64, "medium"), (3, 128, 4, 32, "medium"), (3, 256, 8, 64, "medium"),
            (6, 128, 8, 64, "large"), (8, 256, 8, 64, "large")]
    return [_spec(f"bert/l{layers}h{hidden}a{heads}s{seq}", size, functools.partial(
        zoo.bert, seq_len=seq, hidden=hidden, heads=heads, layers=layers), _SMALL_GAIN)
        for layers, hidden, heads, seq, size in rows]


def _nasrnns() -> List[GraphSpec]:
    rows = [(1, 32, "small"), (1, 128, "small"), (2, 64, "medium"), (3, 64, "medium"),
            (4, 64, "large")]
    return [_spec(f"nasrnn/t{steps}h{hidden}", size, functools.partial(
        zoo.nasrnn, hidden=hidden, steps=steps)) for steps, hidden, size in rows]


def _vits() -> List[GraphSpec]:
    # (layers, hidden, heads, patches, patch values, size class); MLP 2x hidden.
    rows = [(1, 64, 4, 16, 48, "small"), (2, 64, 4, 16, 48, "small"),
            (2, 128, 8, 64, 192, "medium"), (6, 128, 8, 64, 192, "large")]
    return [_spec(f"vit/l{layers}h{hidden}p{patches}", size, functools.partial(
        zoo.vit, patches=patches, patch_dim=patch_dim, hidden=hidden, heads=heads,
        layers=layers, mlp_dim=2 * hidden, classes=10), _SMALL_GAIN)
        for layers, hidden, heads, patches, patch_dim, size in rows]


def _nasnets() -> List[GraphSpec]:
    # (stages, normal cells, width, image, size class); stem 16 channels.
    rows = [(1, 1, 8, 32, "small"), (1, 2, 16, 32, "small"), (2, 1, 8, 32, "medium"),
            (2, 2, 8, 32, "medium"), (3, 2, 8, 64, "large")]
    return [_spec(f"nasnet/s{stages}n{normal}w{width}", size, functools.partial(
        zoo.nasnet_a, image_size=image, stem_channels=16, width=width, stages=stages,
        normal_cells=normal)) for stages, normal, width, image, size in rows]


def _inceptions() -> List[GraphSpec]:
    # (A blocks, C blocks, D + E on top, width, size class); 32x32 input.
    rows = [(1, 1, False, 16, "small"), (1, 1, False, 32, "medium"),
            (2, 1, False, 16, "medium"), (2, 2, True, 16, "large")]
    return [_spec(f"inception/a{a}c{c}{'t' if top else ''}w{width}", size, functools.partial(
        families.inception, a_blocks=a, c_blocks=c, top=top, width=width))
        for a, c, top, width, size in rows]


def _random(family: str, generate: Callable[..., Graph], seeds: int, large_seeds: int,
            weight_gain: float = _HE_GAIN) -> List[GraphSpec]:
    specs = [_spec(f"{family}/s{seed}", "small", functools.partial(generate, seed),
                   weight_gain) for seed in range(seeds)]
    specs += [_spec(f"{family}/large-s{seed}", "large",
                    functools.partial(generate, seed, large=True), weight_gain)
              for seed in range(large_seeds)]
    return specs


def _validation() -> List[GraphSpec]:
    """The validation members: each of the nine training families at a size
    or seed no training or held-out member has: at the training sizes
    (small, medium), and larger (the zoo-derived families wider than any
    other member, the generated families one large draw each).
    They pick among trained policies (`xflowrl.generalist.selection`)
    without touching the held-out families, the held-out members or the
    zoo, which stay test sets."""
    def v(name, size_class, build, weight_gain=_HE_GAIN):
        return _spec(name, size_class, build, weight_gain, split="validation")
    specs = [
        v("resnet/d12w24", "medium", functools.partial(
            families.resnet, blocks=(2, 2, 1), width=24, image_size=32)),
        v("resnext/b1-2w48g4", "small", functools.partial(
            zoo.resnext50, image_size=32, stem_channels=16, groups=4,
            stages=((48, 1, 1), (96, 2, 2)))),
        v("squeezenet/f3w12", "small", functools.partial(
            families.squeezenet, fires=3, width=12, image_size=64)),
        v("vgg/13w32", "medium", functools.partial(
            zoo.vgg19, image_size=32, classes=10, hidden=256, layers=VGG_LAYERS[13],
            channel_divisor=2)),
        v("bert/l2h96a4s48", "medium", functools.partial(
            zoo.bert, seq_len=48, hidden=96, heads=4, layers=2), _SMALL_GAIN),
        v("nasrnn/t2h32", "small", functools.partial(zoo.nasrnn, hidden=32, steps=2)),
        # Wider than any other member of the family, as the zoo's models are.
        v("resnet/d20w64i64", "large", functools.partial(
            families.resnet, blocks=(3, 3, 3), width=64, image_size=64)),
        v("resnext/b1-2-2w64g8i64", "large", functools.partial(
            zoo.resnext50, image_size=64, stem_channels=16, groups=8,
            stages=((64, 1, 1), (128, 2, 2), (256, 2, 2)))),
        v("squeezenet/f8w32", "large", functools.partial(
            families.squeezenet, fires=8, width=32, image_size=64)),
        v("vgg/16w32", "large", functools.partial(
            zoo.vgg19, image_size=32, classes=10, hidden=256, layers=VGG_LAYERS[16],
            channel_divisor=2)),
        v("bert/l4h512a8s64", "large", functools.partial(
            zoo.bert, seq_len=64, hidden=512, heads=8, layers=4), _SMALL_GAIN),
        v("nasrnn/t3h256", "large", functools.partial(zoo.nasrnn, hidden=256, steps=3)),
    ]
    generated = (("nascell", random_graphs.random_nas_cell, 4, _HE_GAIN),
                 ("transformer", random_graphs.random_transformer, 2, _SMALL_GAIN),
                 ("mlp", random_graphs.random_mlp, 2, _HE_GAIN))
    for family, generate, small, gain in generated:
        seeds = range(VALIDATION_SEED_BASE, VALIDATION_SEED_BASE + small)
        specs += [v(f"{family}/s{seed}", "small", functools.partial(generate, seed), gain)
                  for seed in seeds]
        specs.append(v(f"{family}/large-s{VALIDATION_SEED_BASE}", "large",
                       functools.partial(generate, VALIDATION_SEED_BASE, large=True), gain))
    return specs


VALIDATION_MEMBERS: Sequence[GraphSpec] = tuple(_validation())

MEMBERS: Sequence[GraphSpec] = tuple(
    _resnets() + _resnexts() + _squeezenets() + _vggs() + _berts() + _nasrnns()
    + _random("nascell", random_graphs.random_nas_cell, 16, 3)
    + _random("transformer", random_graphs.random_transformer, 8, 2, _SMALL_GAIN)
    + _random("mlp", random_graphs.random_mlp, 8, 2)
    + _vits() + _nasnets() + _inceptions() + list(VALIDATION_MEMBERS))


# --------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------

class Corpus:
    """Queries over a list of members: by split, by name, random draws."""

    def __init__(self, members: Iterable[GraphSpec]):
        self._members = tuple(members)
        self._by_name: Dict[str, GraphSpec] = {}
        for spec in self._members:
            if spec.name in self._by_name:
                raise ValueError(f"duplicate corpus name {spec.name!r}")
            self._by_name[spec.name] = spec

    def specs(self, split: str = "train") -> List[GraphSpec]:
        """The members of `split` ("train", "validation", "held_out" or "all"),
        in table order.

        Raises:
          ValueError: unknown split.
        """
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose from {SPLITS}")
        return [s for s in self._members if split == "all" or s.split == split]

    def names(self, split: str = "train") -> List[str]:
        return [s.name for s in self.specs(split)]

    def families(self, split: str = "all") -> List[str]:
        """The families with a member in `split`, in table order."""
        return list(dict.fromkeys(s.family for s in self.specs(split)))

    def spec(self, name: str) -> GraphSpec:
        """The member called `name`.

        Raises:
          KeyError: no such member (the message lists the families).
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no corpus member {name!r}; families: {self.families()}") from None

    def get(self, name: str) -> Graph:
        """Builds the member called `name` (KeyError if there is none)."""
        return self.spec(name).build()

    def sample(self, rng: np.random.Generator, split: str = "train",
               by_family: bool = True) -> GraphSpec:
        """A random member of `split`.

        Args:
          rng: the numpy generator to draw with.
          split: "train", "validation", "held_out" or "all".
          by_family: draw a family uniformly, then a member of it uniformly,
            so that a family with many members (the random generators) does
            not dominate; False draws a member uniformly.
        """
        members = self.specs(split)
        if by_family:
            family = _pick(rng, self.families(split))
            members = [s for s in members if s.family == family]
        return _pick(rng, members)


def _pick(rng: np.random.Generator, items: Sequence):
    return items[int(rng.integers(len(items)))]


CORPUS = Corpus(MEMBERS)


def specs(split: str = "train") -> List[GraphSpec]:
    """`CORPUS.specs`: the members of a split ("train", "validation", "held_out", "all")."""
    return CORPUS.specs(split)


def get(name: str) -> Graph:
    """`CORPUS.get`: builds the member called `name`."""
    return CORPUS.get(name)


def sample(rng: np.random.Generator, split: str = "train", by_family: bool = True) -> GraphSpec:
    """`CORPUS.sample`: a random member of `split`."""
    return CORPUS.sample(rng, split, by_family)
