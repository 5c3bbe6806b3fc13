"""The backend program's rewrite layer (msc/backend/fuse/rewrite.py): after any sequence of edits
the maintained index equals one built afresh from the program, erasing a node that is still read
is refused by name, the worklist driver reaches a fixed point, and dead-code erasure keeps what
has effects."""

import random

import numpy as np
import pytest

from msc import relax
from msc.backend.fuse.rewrite import Rewriter, eliminate_dead
from msc.backend.runtime.program import Node
from msc.codegen import to_relax
from msc.compression.quantize.testing import qdq_block, tiny_conv_onnx
from msc.errors import BuildError
from msc.frontends.translate import from_onnx
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module, tensor

F32 = "float32"


def _index(rw: Rewriter) -> dict:
    """What the index says, by node identity: producers, readers (as multisets), the list
    each node is in."""
    program = rw.program
    values = range(len(program.values))
    blocks = _blocks(program)
    return {
        "producer": {v: id(rw.producer(v)) for v in values if rw.producer(v) is not None},
        "users": {v: sorted(id(u) for u in rw.users(v)) for v in values if rw.users(v)},
        "uses": {v: rw.uses(v) for v in values},
        "within": {id(n): [i for i, block in enumerate(blocks) if rw.within(n, block)]
                   for n in program.walk()},
    }


def _blocks(program) -> list:
    blocks = [program.nodes]
    for node in program.walk():
        blocks += [branch for branch, _ in node.branches]
    return blocks


def _assert_current(rw: Rewriter) -> None:
    assert _index(rw) == _index(Rewriter(rw.program))
    listed = [id(n) for n in rw.program.walk()]
    assert len(listed) == len(set(listed)) and all(n in rw for n in rw.program.walk())


def _program(mod):
    """The lowered main function of ``mod`` as relax.build leaves it (calls resolved)."""
    return relax.build(mod, fuse=False).programs["main"]


def _onnx_program(model):
    return _program(to_relax(*from_onnx(model)))


def _if_program():
    """main(c, x): y = c ? x * 2 + 1 : exp(x); -(y) + x: a program with branches."""
    c, x = relax.Var("c", tensor((), "bool")), relax.Var("x", tensor((3,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [c, x]):
        doubled = bb.normalize(R.multiply(x, relax.const(np.float32(2))))
        then = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(
            t := relax.Var("t", tensor((3,))), doubled)])],
            bb.normalize(R.add(t, relax.const(np.float32(1)))))
        other = relax.SeqExpr([], bb.normalize(R.exp(x)))
        y = relax.Var("y", tensor((3,)))
        bb.emit_normalized(relax.VarBinding(y, relax.If(c, then, other)))
        bb.emit_func_output(bb.emit(R.add(bb.emit(R.negative(y)), x)))
    return _program(bb.get())


PROGRAMS = {"tiny_conv": lambda: _onnx_program(tiny_conv_onnx()),
            "attention_block": lambda: _onnx_program(qdq_block()),
            "if": _if_program}


class _Edits:
    """Random edits that keep the program well formed (one producer per value, readers after
    the values they read are made)."""

    def __init__(self, rw: Rewriter, seed: int):
        self.rw, self.rng = rw, random.Random(seed)
        self.values = rw.program.values

    def step(self) -> None:
        edit = self.rng.choice([self.set_ins, self.replace_uses, self.replace_node,
                                self.insert, self.insert, self.erase, self.absorb])
        edit()

    def _node(self, top: bool = False):
        nodes = list(self.rw.program.nodes if top else self.rw.program.walk())
        return self.rng.choice(nodes) if nodes else None

    def _earlier(self, node) -> list:
        """Values ``node`` may read: the parameters and what its list made before it."""
        if node is None:
            return []
        block = self.rw.block(node)
        return list(self.rw.program.params) + [n.out for n in block[:block.index(node)]]

    def _fresh(self, ins: tuple, like: Node) -> Node:
        out = self.rw.program.value(self.values[like.out].sinfo, "fresh")
        return Node("call", ins, out, op="fresh", path="numpy")

    def set_ins(self):
        node = self._node()
        choices = self._earlier(node)[-4:]  # near ones: most of the program stays read
        if choices and node.ins:
            self.rw.set_ins(node, [self.rng.choice(choices) for _ in node.ins])

    def replace_uses(self):
        node = self._node(top=True)
        choices = self._earlier(node)
        # readers of node.out all come after node: they may read an earlier value (the
        # result stays, or dead-code erasure would soon leave nothing to check)
        if choices and node.out != self.rw.program.result:
            self.rw.replace_uses(node.out, self.rng.choice(choices))

    def replace_node(self):
        node = self._node(top=True)
        if node is None or node.branches:
            return
        new = Node("call", node.ins, node.out, op="replaced", path="numpy")
        if self.rng.random() < 0.5:  # the last new node's result takes over the readers
            new = self._fresh(node.ins, node)
        self.rw.replace_node(node, [self._fresh(node.ins, node), new])

    def insert(self):
        node = self._node()
        choices = self._earlier(node)
        if choices:
            where = self.rw.insert_before if self.rng.random() < 0.5 else self.rw.insert_after
            reads = tuple(self.rng.choice(choices) for _ in range(2))
            if where == self.rw.insert_after:
                reads += (node.out,)
            where(node, [self._fresh(reads, node)])

    def erase(self):
        node = self._node()
        if node is None:
            return
        if self.rw.uses(node.out):
            with pytest.raises(BuildError, match="cannot be erased"):
                self.rw.erase(node)
        else:
            self.rw.erase(node)

    def absorb(self):
        node = self._node()
        reader = self.rw.only_user(node.out) if node is not None else None
        if reader is not None and not reader.branches and not node.branches and (
                self.rw.within(reader, self.rw.block(node))):
            self.rw.absorb(node, [reader])

    def erase_dead(self):
        self.rw.erase_dead([self._node().out] if self.rw.program.nodes else [])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_index_stays_equal_to_a_fresh_one_after_random_edits(name):
    program = PROGRAMS[name]()
    rw = Rewriter(program)
    _assert_current(rw)
    edits = _Edits(rw, seed=7)
    for step in range(120):
        edits.step()
        if step % 10 == 9:
            _assert_current(rw)
        if step % 30 == 29:
            with rw.batched():  # removals inside a batch leave the lists when it ends
                edits.absorb()
                edits.erase_dead()
    assert len(list(program.walk())) > 5  # the edits left a program to check
    _assert_current(rw)


def test_erasing_a_node_that_is_still_read_names_it_and_its_readers():
    x = relax.Var("x", tensor((4,)))
    rw = Rewriter(_program(one_function_module(
        [x], lambda bb, x: R.negative(bb.emit(R.exp(x))))))
    exp, neg = rw.program.nodes
    with pytest.raises(BuildError, match=r"cannot be erased: its result is read by .*hint"):
        rw.erase(exp)
    with pytest.raises(BuildError, match="the program's result"):
        rw.erase(neg)
    assert list(rw.program.nodes) == [exp, neg]  # a refused erase changes nothing
    rw.replace_uses(neg.out, exp.out)  # the function now returns exp(x)
    rw.erase(neg)
    assert rw.program.nodes == [exp] and rw.program.result == exp.out
    _assert_current(rw)


def test_absorbing_a_chain_with_an_outside_reader_is_refused():
    x = relax.Var("x", tensor((4,)))

    def body(bb, x):
        e = bb.emit(R.exp(x))
        return R.add(bb.emit(R.negative(e)), e)  # e is read by negative and by add

    rw = Rewriter(_program(one_function_module([x], body)))
    exp, neg, _ = rw.program.nodes
    with pytest.raises(BuildError, match="read outside the chain"):
        rw.absorb(exp, [neg])
    _assert_current(rw)


def _negatives(n: int):
    x = relax.Var("x", tensor((4,)))

    def body(bb, x):
        for _ in range(n - 1):
            x = bb.emit(R.negative(x))
        return R.negative(x)

    return _program(one_function_module([x], body))


def _double_negation(rw: Rewriter, node: Node) -> bool:
    """-(-y) -> y: the readers of the outer negation read y, and both go when unread."""
    inner = rw.producer(node.ins[0]) if node.op == "negative" else None
    if inner is None or inner.op != "negative":
        return False
    rw.replace_uses(node.out, inner.ins[0])
    rw.erase_dead([node.out])
    return True


@pytest.mark.parametrize("n", [1, 2, 7, 8])
def test_the_worklist_reaches_a_fixed_point_on_a_chain(n):
    program = _negatives(n)
    rw = Rewriter(program)
    rewrites = rw.apply([_double_negation])
    assert rewrites == n // 2  # each rewrite removes two negations; none is left to pair
    ops = [node.op for node in program.nodes]
    assert ops == ["negative"] * (n % 2)
    expected = program.nodes[0].out if n % 2 else program.params[0]
    assert program.result == expected and rw.apply([_double_negation]) == 0
    _assert_current(rw)


def test_the_worklist_visits_again_the_readers_of_a_replaced_producer():
    """-(exp(x)) visited reader first: once exp is replaced by a negation, the outer negation
    has a new producer to pair with and is tried again."""
    x = relax.Var("x", tensor((4,)))
    program = _program(one_function_module([x], lambda bb, x: R.negative(bb.emit(R.exp(x)))))
    rw = Rewriter(program)

    def exp_to_negative(rw, node):
        if node.op != "exp":
            return False
        rw.replace_node(node, [Node("call", node.ins, node.out, op="negative", path="numpy")])
        return True

    order = list(reversed(program.nodes))  # the reader comes first
    assert rw.apply([exp_to_negative, _double_negation], nodes=order) == 2
    assert program.nodes == [] and program.result == program.params[0]
    _assert_current(rw)


def test_patterns_that_undo_each_other_are_stopped():
    program = _negatives(1)
    rw = Rewriter(program)

    def flip(rw, node):  # renames the op back and forth: always "rewrites"
        rw.set_ins(node, node.ins)
        node.op = "negative" if node.op == "neg" else "neg"
        return True

    with pytest.raises(BuildError, match="fixed point"):
        rw.apply([flip])


def test_dead_code_erasure_keeps_effects_and_shape_checks():
    """Unread pure calls go with the chains that fed only them; print (an effect) and
    match_cast (a run-time shape check) stay, and so does what they read."""
    x = relax.Var("x", relax.TensorStructInfo(None, F32, ndim=1))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit(R.exp(bb.emit(R.sqrt(x))))  # dead chain
        bb.emit(R.print(bb.emit(R.abs(x)), format="{}"))  # an effect
        bb.match_cast(bb.emit(R.negative(x)), tensor((4,)))  # a check
        bb.emit_func_output(bb.emit(R.sin(x)))
    mod = bb.get()
    program = relax.build(mod, fuse=False).programs["main"]
    ops = [n.op for n in program.nodes]
    assert "sqrt" not in ops and "exp" not in ops  # build already erased the dead chain
    assert {"abs", "negative", "sin"} <= set(ops) and "match_cast" in [n.kind for n in
                                                                       program.nodes]
    rw = Rewriter(program)
    assert eliminate_dead(rw) == 0  # a fixed point: nothing more goes
    vm = relax.VirtualMachine(relax.build(mod))
    xv = np.arange(4, dtype=F32)
    np.testing.assert_allclose(vm["main"](xv).numpy(), np.sin(xv), rtol=1e-6)


def test_a_value_read_inside_a_branch_stays_out_of_a_fused_region():
    """x = a * a is read by exp(x) and inside an If branch: the elementwise pattern's region
    may take only producers read inside it, and the rewriter's use lists count branch readers
    (an index of the top level alone fused exp(a * a) and kept the multiply: computed twice)."""
    c, a = relax.Var("c", tensor((), "bool")), relax.Var("a", tensor((64, 64)))
    bb = relax.BlockBuilder()
    with bb.function("main", [c, a]):
        x = bb.emit(R.multiply(a, a))
        y = bb.emit(R.exp(x))
        then = relax.SeqExpr([], bb.normalize(R.add(x, relax.const(np.float32(1)))))
        other = relax.SeqExpr([], bb.normalize(R.negative(a)))
        z = relax.Var("z", tensor((64, 64)))
        bb.emit_normalized(relax.VarBinding(z, relax.If(c, then, other)))
        bb.emit_func_output(bb.emit(R.add(y, z)))
    ex = relax.build(bb.get())
    assert "elementwise" not in ex.stats["fused"]
    assert sum(ex.stats["ops"]["multiply"].values()) == 1
    vm = relax.VirtualMachine(ex)
    av = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32) * 0.5
    for cv in (True, False):
        want = np.exp(av * av) + (av * av + 1 if cv else -av)
        np.testing.assert_allclose(vm["main"](np.array(cv), av).numpy(), want, rtol=1e-6,
                                   atol=1e-6)
