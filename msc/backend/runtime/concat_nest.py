"""Concats laid out inside other concats: densenet's dense blocks without copies.

The plan writes a concat's inputs straight into slices of its result when they lie end to end
in memory (plan.py). In a dense block each layer's concat is the first input of the next one
(``c2 = concat(c1, conv(...))``), so with one storage per concat every layer copied the
whole block so far into the next storage, O(layers^2) bytes a block. A concat whose result is
a slice of exactly one other concat is instead laid out inside it: the block is one storage,
each layer's conv writes its channels in place, and no concat of the chain copies.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["nested_concats"]


def nested_concats(groups: list) -> dict:
    """id(group) -> (the group it nests in, its slice index there): a concat whose result
    buffer is a slice of exactly one other concat (and of no other group) is laid out inside
    it, so its producers write straight into the outer result."""
    holders = defaultdict(list)  # buffer -> (group, slice index) of each group reading it
    for group in groups:
        for index, b in enumerate(group[0]):
            holders[b].append((group, index))
    return {id(group): holders[group[2]][0] for group in groups
            if group[2] is not None and len(holders[group[2]]) == 1}
