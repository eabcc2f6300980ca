"""Tree all-reduce (draft)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError
from .group import Collective
from .ops import ReduceOp, check_value, copy, join, join_flat, split


@dataclass(frozen=True)
class Tree:
    parent: tuple
    children: tuple
    depth: tuple

    @property
    def root(self):
        return self.parent.index(None)

    @property
    def height(self):
        return max(self.depth)


def heap_tree(p: int) -> Tree:
    parent = tuple(None if i == 0 else (i - 1) // 2 for i in range(p))
    children = tuple(tuple(c for c in (2 * i + 1, 2 * i + 2) if c < p) for i in range(p))
    depth = tuple((i + 1).bit_length() - 1 for i in range(p))
    return Tree(parent, children, depth)


def mirror(tree: Tree) -> Tree:
    p = len(tree.parent)
    m = lambda r: p - 1 - r  # noqa: E731
    parent = tuple(None if tree.parent[m(r)] is None else m(tree.parent[m(r)]) for r in range(p))
    children = tuple(tuple(m(c) for c in tree.children[m(r)]) for r in range(p))
    depth = tuple(tree.depth[m(r)] for r in range(p))
    return Tree(parent, children, depth)


def _trees(c: Collective, value, op: ReduceOp, trees, pieces: int, order="lockstep"):
    """Reduce each part of ``value`` up its tree, then broadcast it down."""
    r, p = c.rank, c.p
    parts = [split(half, pieces) for half in split(value, len(trees))]
    ctx = c.ctx
    t0 = ctx.now
    for j in range(pieces):
        for t, tree in enumerate(trees):
            acc = parts[t][j]
            for ch in tree.children[r]:
                got = yield from c.recv(ch, "reduce", expect=acc, chunk=t * pieces + j)
                acc = op.combine(acc, got)
                c.span("reduce", t0, step=tree.height - tree.depth[ch], chunk=t, piece=j,
                       peer=c.task_name(ch), phase="reduce")
                t0 = ctx.now
            if tree.parent[r] is None:
                acc = op.finalize(acc, p)
            else:
                c.send(tree.parent[r], "reduce", acc, chunk=t * pieces + j)
            parts[t][j] = acc
    for j in range(pieces):
        for t, tree in enumerate(trees):
            up = tree.parent[r]
            if up is not None:
                parts[t][j] = yield from c.recv(up, "broadcast", chunk=t * pieces + j)
                c.span("broadcast", t0, step=tree.height + tree.depth[up], chunk=t, piece=j,
                       peer=c.task_name(up), phase="broadcast")
                t0 = ctx.now
            for ch in tree.children[r]:
                c.send(ch, "broadcast", parts[t][j], chunk=t * pieces + j)
    return join([join_flat(ps) for ps in parts], value)


def binary_tree_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1):
    op = ReduceOp.parse(op)
    value = check_value(value, "binary tree all-reduce")
    _check_pieces(pieces)
    c = Collective(ctx, members, "binary-tree", value)
    return (yield from _trees(c, copy(value), op, [heap_tree(c.p)], pieces))


def double_binary_tree_all_reduce(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1):
    op = ReduceOp.parse(op)
    value = check_value(value, "double binary tree all-reduce")
    _check_pieces(pieces)
    c = Collective(ctx, members, "double-binary-tree", value)
    a = heap_tree(c.p)
    return (yield from _trees(c, copy(value), op, [a, mirror(a)], pieces))


def _check_pieces(pieces):
    if not isinstance(pieces, int) or pieces < 1:
        raise InvalidArgumentError(f"pieces must be an int >= 1 (pipelining), got {pieces!r}")


def _one_tree(c, parts, op, tree, t, pieces, clock):
    r, p, ctx = c.rank, c.p, c.ctx
    for j in range(pieces):
        acc = parts[j]
        for ch in tree.children[r]:
            got = yield from c.recv(ch, "reduce", expect=acc, chunk=t * pieces + j)
            acc = op.combine(acc, got)
            c.span("reduce", clock[0], step=tree.height - tree.depth[ch], chunk=t, piece=j,
                   peer=c.task_name(ch), phase="reduce")
            clock[0] = ctx.now
        if tree.parent[r] is None:
            acc = op.finalize(acc, p)
        else:
            c.send(tree.parent[r], "reduce", acc, chunk=t * pieces + j)
        parts[j] = acc
    for j in range(pieces):
        up = tree.parent[r]
        if up is not None:
            parts[j] = yield from c.recv(up, "broadcast", chunk=t * pieces + j)
            c.span("broadcast", clock[0], step=tree.height + tree.depth[up], chunk=t, piece=j,
                   peer=c.task_name(up), phase="broadcast")
            clock[0] = ctx.now
        for ch in tree.children[r]:
            c.send(ch, "broadcast", parts[j], chunk=t * pieces + j)


def _trees_proc(c, value, op, trees, pieces):
    parts = [split(half, pieces) for half in split(value, len(trees))]
    clock = [c.ctx.now]
    procs = [c.ctx.process(_one_tree(c, parts[t], op, tree, t, pieces, clock))
             for t, tree in enumerate(trees)]
    yield c.ctx.env.all_of(procs)
    return join([join_flat(ps) for ps in parts], value)


def dbt_proc(ctx, members, value, op=ReduceOp.SUM, pieces: int = 1):
    op = ReduceOp.parse(op)
    c = Collective(ctx, members, "double-binary-tree", value)
    a = heap_tree(c.p)
    return (yield from _trees_proc(c, copy(value), op, [a, mirror(a)], pieces))
