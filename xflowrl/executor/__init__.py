"""Running graphs in numpy: the reference semantics of every engine
operator (`reference`: the ground truth for "a rewrite preserves
semantics") and the random inputs and weights graphs run on
(`weights`).
"""
