"""The training distribution: the graphs an agent trains and is evaluated on.

Learned graph optimisers that generalise (GO, Zhou et al., NeurIPS 2020;
Placeto, Addanki et al., NeurIPS 2019; REGAL) train over a distribution of graphs, not one graph, and report on
graphs they never saw. This package is that distribution: 116 small members
(most under 100 ops; an environment step on them takes milliseconds) from
twelve families, split once and for all into `train`, `validation` and
`held_out`.

Families:

- zoo families at many sizes: `resnet` (CIFAR-style basic blocks),
  `resnext`, `squeezenet`, `vgg` (11/13/16/19), `bert`, `nasrnn`, and the
  held-out `vit`, `nasnet`, `inception`; built through the zoo's builders
  where they have size arguments, else by `families` (ResNet, SqueezeNet,
  InceptionV3's blocks);
- seeded random architectures (`random_graphs`): `nascell` (random DAG
  cells of convs, pools, adds and concats), `transformer` (random shapes,
  Q/K/V reading one tensor as zoo.bert), `mlp` (random widths, branches,
  residuals). Same seed, same graph.

The train / held-out split (`registry.split_of`; it depends on a member's
family and size class only; the validation members below are built apart):

- held out by family: every member of `inception`, `vit` and `nasnet`
  (`HELD_OUT_FAMILIES`); no training member comes from them. Each tests a
  transfer: vit from bert/transformer, nasnet from nascell/resnext,
  inception from resnet/squeezenet/nascell;
- held out by size: the `large` members of the nine training families
  (deeper ResNets, ResNeXt-50's block counts, more fires, VGG-19, 6-8 layer
  BERTs, a 4-step NasRNN, `large=True` draws of the generators);
- train: the `small` and `medium` members of the nine training families.

The validation split (`registry.VALIDATION_MEMBERS`, built apart): 23
members of the nine training families at sizes and seeds no other member
has (new configurations at the training sizes, wider ones, and the
generated families' draws at seeds from 100 on). It chooses among trained
policies (`xflowrl.generalist.selection`) and is never trained or tested
on; the held-out split and the zoo stay the test sets.

63 train, 23 validation and 30 held-out members (17 by size, 13 by
family); op counts, costs and greedy's gains per member: docs/zoo.md,
"The training distribution" (`benchmarks/corpus_bench.py`).

    from xflowrl import corpus
    spec = corpus.sample(np.random.default_rng(0), "train")  # a GraphSpec
    graph = spec.build()                                      # or corpus.get(spec.name)
    for spec in corpus.specs("held_out"): ...   # or "validation", "all"
"""

from xflowrl.corpus.random_graphs import random_mlp, random_nas_cell, random_transformer
from xflowrl.corpus.registry import (
                                     CORPUS,
                                     Corpus,
                                     GraphSpec,
                                     HELD_OUT_FAMILIES,
                                     HELD_OUT_SIZE_CLASS,
                                     MEMBERS,
                                     SIZE_CLASSES,
                                     SPLITS,
                                     VALIDATION_MEMBERS,
                                     VALIDATION_SEED_BASE,
                                     get,
                                     sample,
                                     specs,
                                     split_of,
)
