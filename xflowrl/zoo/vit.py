"""ViT-Base as the thesis built it, in the style of TASO's BERT example.

The thesis' ViT (its code's graphs/vit.py) is "6 attention layers on 64x1024
tokens, 16 heads", mirroring vit-pytorch's ViT(image_size=256,
patch_size=32, dim=1024, depth=6, heads=16, mlp_dim=2048): a 256x256 RGB
image cut into 8x8 = 64 patches of 32*32*3 = 3072 values. Built here:

- patch embedding: the input is the 64x3072 patch matrix (vit-pytorch's
  `Rearrange`, a pure relayout, is left to the data pipeline), one matmul
  to 64x1024 and an add of a 64x1024 positional-embedding weight;
- per layer, the attention of `bert.py` (TASO's corrected example): Q/K/V
  matmuls on the layer input, heads split by reshape + transpose (q, v
  perm (1, 0, 2), k perm (1, 2, 0)), two batched matmuls, heads merged by
  transpose + reshape, the output projection (no activation: vit-pytorch's
  `to_out` is a plain Linear, where TASO's BERT fuses a ReLU) and the
  residual add;
- per layer, what a ViT block adds over the BERT example: the MLP block
  1024 -> 2048 (fused ReLU) -> 1024 and its residual add;
- the head: mean over the 64 tokens (transpose to 1024x64, reshape to
  1x1024x64x1, a 64x1 average pool, reshape to 1x1024; vit-pytorch's
  pool="mean", since there is no class token) and a 1024 -> `classes` matmul.

Left out, because the engine has no such ops (as in TASO's BERT): softmax,
the LayerNorms, GELU (a ReLU stands in, fused into the MLP's first matmul),
the class token, dropout and all biases. So 18 ops a layer (8 matmuls, 4
reshapes, 4 transposes, 2 adds) plus 2 for the embedding and 5 for the
head: 115 ops and 50 matmuls at 6 layers; analytic cpu cost 117.12 ms
(docs/zoo.md, `benchmarks/zoo_bench.py`).
"""

from xflowrl.engine.graph import Graph, GraphBuilder
from xflowrl.zoo.common import attention


def _mlp(b: GraphBuilder, x, mlp_dim: int, name: str):
    hidden = x.shape[1]
    h = b.matmul(a=x, b=b.weight(name=f"{name}.fc1", shape=(hidden, mlp_dim)),
                 activation="RELU")
    out = b.matmul(a=h, b=b.weight(name=f"{name}.fc2", shape=(mlp_dim, hidden)))
    return b.add(x=out, y=x)


def vit(patches: int = 64, patch_dim: int = 3072, hidden: int = 1024, heads: int = 16,
        layers: int = 6, mlp_dim: int = 2048, classes: int = 1000) -> Graph:
    """Builds the thesis' ViT-Base.

    Args:
      patches: tokens (image patches).
      patch_dim: values per patch (3 * patch_size**2).
      hidden: the model width.
      heads: attention heads (divides `hidden`).
      layers: transformer blocks.
      mlp_dim: the MLP block's inner width.
      classes: logits of the head.
    """
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not divisible by heads {heads}")
    b = GraphBuilder()
    x = b.input(name="data", shape=(patches, patch_dim))
    x = b.matmul(a=x, b=b.weight(name="patch_embedding", shape=(patch_dim, hidden)))
    x = b.add(x=x, y=b.weight(name="pos_embedding", shape=(patches, hidden)))
    for layer in range(layers):
        x = attention(b, x, heads, f"layer{layer}.attention")
        x = _mlp(b, x, mlp_dim, f"layer{layer}.mlp")
    pooled = b.reshape(input=b.transpose(input=x, perm=(1, 0)), shape=(1, hidden, patches, 1))
    pooled = b.avgpool2d(input=pooled, kernel=(patches, 1), strides=1, padding="VALID")
    pooled = b.reshape(input=pooled, shape=(1, hidden))
    return b.build([b.matmul(a=pooled, b=b.weight(name="head", shape=(hidden, classes)))])
