"""The rewrite layer of the backend program: use lists kept current, and the one way to change them.

Every build-time pass (fuse/qdq, fuse/patterns, build.py's epilogue fusion and dead-code
erasure) asks the same questions of a lowered :class:`~msc.backend.runtime.program.Program`:
which node computes this value, who reads it, is it read once. And every pass rewrites the
program. They share one :class:`Rewriter` (xDSL's ``PatternRewriter`` is the model): it indexes
the program once, and its methods are the only way a pass changes what a node reads or
computes, so the index stays true after every step instead of being rebuilt per pass::

    rw = Rewriter(program)
    rw.producer(vid)               # the node computing vid (None: a parameter or a constant)
    rw.users(vid)                  # the nodes reading vid, once per read
    rw.uses(vid)                   # reads of vid, the program's result counting as one
    rw.replace_node(node, [new])   # new stands where node stood and computes node's result
    rw.erase(node)                 # refused (BuildError naming it) while its result is read
    rw.erase_dead()                # pure nodes the rewrites left unread, then their inputs'
    rw.apply(patterns)             # patterns over a worklist until none matches anywhere

The contract. A reader of a value is any node of the program (top level or inside an If's
branches) listing it in ``ins``; an ``if`` node also reads its branches' results; the program's
``result`` is one more read, from outside. A value has at most one producer. Passes change
``ins``, ``out`` and ``branches`` only through the rewriter (``site``, ``fn`` and names are
theirs). Node lists stay in program order and hold exactly the indexed nodes, except inside
``with rw.batched():``, where erased nodes leave their lists at the end of the block (one pass
over each list, not one per node). build.py's rewriter lives from lowering to resolution,
which sets each call's ``ins`` to its kernel's inputs after the last rewrite.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import MappingProxyType

from ...errors import BuildError
from ..runtime.program import Node, Program, node_inputs

__all__ = ["Pattern", "Rewriter", "eliminate_dead", "is_pure", "rewriter_of"]

# a pattern looks at one node and rewrites through the rewriter; True when it changed something
Pattern = Callable[["Rewriter", Node], bool]

_PURE_PATHS = ("native", "numpy")
_REWRITES_PER_NODE = 64  # apply() gives up beyond this: patterns that undo each other


def is_pure(node: Node) -> bool:
    """Whether an unread ``node`` may go: every node but run-time calls with effects (print,
    assert, packed calls) and ``match_cast`` (it checks a shape at run time)."""
    if node.kind == "match_cast":
        return False
    return node.kind != "call" or node.site is not None or node.path in _PURE_PATHS


def _label(node: Node) -> str:
    return node.name or f"%{node.out}"


class Rewriter:
    """A program's producers and readers, and the edits that keep them true (see the module
    docstring for the contract)."""

    def __init__(self, program: Program):
        self.program = program
        self._producer: dict[int, Node] = {}
        self._users: defaultdict[int, list] = defaultdict(list)
        self._where: dict[int, tuple[Node, list]] = {}  # id(node) -> (node, its list)
        self._unread: list[int] = []  # values whose last reader went: erase_dead's seeds
        self._changed: list | None = None  # nodes to visit again, while apply() runs
        self._pending: dict[int, tuple[list, set]] = {}  # batched removals per list
        self._batch = 0
        for node in program.nodes:
            self._add(node, program.nodes)
        self._unread.clear()

    # -- queries ----------------------------------------------------------------------------
    def producer(self, vid: int) -> Node | None:
        return self._producer.get(vid)

    def users(self, vid: int) -> tuple:
        """The nodes reading ``vid``, once per read (an ``if`` reads its branch results)."""
        return tuple(self._users.get(vid, ()))

    def readers(self, vid: int) -> list:
        """``users(vid)``, plus ``None`` for the program's result (a reader from outside)."""
        readers = list(self._users.get(vid, ()))
        return readers + [None] if vid == self.program.result else readers

    def uses(self, vid: int) -> int:
        return len(self._users.get(vid, ())) + (vid == self.program.result)

    def only_user(self, vid: int) -> Node | None:
        """The node that reads ``vid`` when it is its one read (the result is a read too)."""
        users = self._users.get(vid, ())
        return users[0] if len(users) == 1 and vid != self.program.result else None

    def __contains__(self, node: Node) -> bool:
        entry = self._where.get(id(node))
        return entry is not None and entry[0] is node

    def block(self, node: Node) -> list:
        """The node list holding ``node`` (the top level or a branch), in program order."""
        self._require(node)
        block = self._where[id(node)][1]
        self._compact(block)
        return block

    def within(self, node: Node, nodes: list | None = None) -> bool:
        """Whether ``node`` is one of ``nodes`` (the top level by default), not in a branch."""
        entry = self._where.get(id(node))
        block = self.program.nodes if nodes is None else nodes
        return entry is not None and entry[0] is node and entry[1] is block

    def each(self, nodes: list | None = None, reverse: bool = False) -> Iterator[Node]:
        """The nodes of ``nodes`` (the top level by default) as they are now, for a loop that
        rewrites: nodes erased meanwhile are skipped, nodes added are not visited."""
        nodes = self.program.nodes if nodes is None else nodes
        self._compact(nodes)
        for node in (list(reversed(nodes)) if reverse else list(nodes)):
            if node in self:
                yield node

    @property
    def producers(self) -> MappingProxyType:
        """value -> its producer, read-only and always current."""
        return MappingProxyType(self._producer)

    @property
    def user_lists(self) -> MappingProxyType:
        """value -> the nodes reading it (as ``users``), read-only and always current."""
        return MappingProxyType(self._users)

    # -- edits ------------------------------------------------------------------------------
    def replace_uses(self, old: int, new: int) -> None:
        """Every read of ``old`` (ins, branch results, the program's result) reads ``new``."""
        if old == new:
            return
        for user in self._users.pop(old, []):
            self._users[new].append(user)
            self._touch(user)
        for user in {id(u): u for u in self._users.get(new, ())}.values():
            user.ins = tuple(new if v == old else v for v in user.ins)
            if user.branches:
                user.branches = tuple((nodes, new if r == old else r)
                                      for nodes, r in user.branches)
        if self.program.result == old:
            self.program.result = new
        self._went_unread(old)
        self._touch(self._producer.get(old))
        self._touch(self._producer.get(new))

    def set_ins(self, node: Node, ins: Iterable[int]) -> None:
        self._require(node)
        for vid in node.ins:
            self._unread_by(vid, node)
        node.ins = tuple(ins)
        for vid in node.ins:
            self._read_by(vid, node)
        self._touch(node)

    def replace_node(self, node: Node, new_nodes: list) -> None:
        """``new_nodes`` stand where ``node`` stood. When none computes ``node.out``, its
        readers read the last new node's result instead."""
        block = self.block(node)
        at = block.index(node)
        self._remove(node)
        block[at:at + 1] = new_nodes
        for new in new_nodes:
            self._add(new, block)
        if node.out not in self._producer and self.uses(node.out):
            if not new_nodes:
                raise BuildError(f"{_label(node)} replaced by nothing while its result is "
                                 "read", node=_label(node), op=node.op or node.kind,
                                 hint="replace its uses first, or erase it")
            self.replace_uses(node.out, new_nodes[-1].out)

    def absorb(self, node: Node, gone: list) -> None:
        """``node`` now computes the chain ``gone`` ends in: it takes over the last one's result
        and the nodes of ``gone`` leave. Every other result of the group must be read only
        inside it (a fused epilogue has no other reader)."""
        if not gone:
            return
        group = {id(n) for n in (node, *gone)}
        for member in (node, *gone[:-1]):
            outside = [u for u in self._users.get(member.out, ()) if id(u) not in group]
            if outside or member.out == self.program.result:
                raise BuildError(
                    f"{_label(member)} cannot be absorbed: its result is read outside the "
                    f"chain (by {', '.join(_label(u) for u in outside) or 'the result'})",
                    node=_label(member), op=member.op or member.kind,
                    hint="absorb only chains whose inner results have no other reader")
        for member in gone:
            self._drop(member)
        if self._producer.get(node.out) is node:
            del self._producer[node.out]
        node.out = gone[-1].out
        self._producer[node.out] = node
        self._touch_readers(node)

    def erase(self, node: Node) -> None:
        """Take ``node`` (with its branches) out of the program; refused while its result is
        read."""
        self._require(node)
        if self.uses(node.out):
            readers = ", ".join(_label(r) if r is not None else "the program's result"
                                for r in self.readers(node.out))
            raise BuildError(f"{_label(node)} cannot be erased: its result is read by "
                             f"{readers}", node=_label(node), op=node.op or node.kind,
                             hint="replace its uses first (Rewriter.replace_uses), or erase "
                                  "its readers")
        self._drop(node)

    def insert_before(self, anchor: Node, nodes: list) -> None:
        self._insert(anchor, nodes, 0)

    def insert_after(self, anchor: Node, nodes: list) -> None:
        self._insert(anchor, nodes, 1)

    def erase_dead(self, values: Iterable[int] = ()) -> int:
        """Erase the pure producers of ``values`` and of the values the edits so far left
        unread, when nothing reads them, then the producers those leave unread (a worklist
        over the use lists); returns how many nodes went."""
        work = [*self._unread, *values]
        self._unread.clear()
        count = 0
        with self.batched():
            while work:
                vid = work.pop()
                node = self._producer.get(vid)
                if node is None or self.uses(vid) or not is_pure(node):
                    continue
                self._drop(node)
                count += 1
                work.extend(self._unread)
                self._unread.clear()
        return count

    @contextmanager
    def batched(self):
        """Erased nodes leave their lists when the block ends, in one pass per list."""
        self._batch += 1
        try:
            yield self
        finally:
            self._batch -= 1
            if not self._batch:
                for block, _ in list(self._pending.values()):
                    self._compact(block)

    def apply(self, patterns: list, nodes: list | None = None) -> int:
        """Try ``patterns`` (``pattern(rewriter, node) -> bool``) on every node of ``nodes``
        (the top level by default), the first that rewrites wins; the nodes a rewrite touched
        (new nodes, nodes whose inputs changed, producers of values whose readers changed) are
        tried again, until no pattern matches. Returns how many rewrites were made."""
        work = deque(self.each(nodes))
        queued = {id(n) for n in work}
        count, limit = 0, _REWRITES_PER_NODE * max(len(work), 1)
        outer, self._changed = self._changed, []
        try:
            while work:
                node = work.popleft()
                queued.discard(id(node))
                if node in self and self._try(patterns, node):
                    count += 1
                    if count > limit:
                        raise BuildError("rewrite patterns did not reach a fixed point",
                                         node=_label(node), hint="a pattern undoes another")
                    for again in self._changed:
                        if again is not None and id(again) not in queued and again in self:
                            work.append(again)
                            queued.add(id(again))
                self._changed.clear()
        finally:
            self._changed = outer
        return count

    # -- the index --------------------------------------------------------------------------
    def _try(self, patterns: list, node: Node) -> bool:
        return any(pattern(self, node) for pattern in patterns)

    def _add(self, node: Node, block: list) -> None:
        if id(node) in self._where:
            raise BuildError(f"{_label(node)} is in the program twice", node=_label(node))
        if node.out in self._producer:
            raise BuildError(f"{_label(node)} computes %{node.out}, which "
                             f"{_label(self._producer[node.out])} computes already",
                             node=_label(node), hint="replace or erase the producer first")
        self._where[id(node)] = (node, block)
        self._producer[node.out] = node
        for branch_nodes, _ in node.branches:  # readers in program order: branches first
            for inner in branch_nodes:
                self._add(inner, branch_nodes)
        for vid in node_inputs(node):
            self._read_by(vid, node)
        self._touch_readers(node)

    def _remove(self, node: Node) -> None:
        """Out of the index (its branch nodes too); its list is the caller's."""
        del self._where[id(node)]
        if self._producer.get(node.out) is node:
            del self._producer[node.out]
        for vid in node_inputs(node):
            self._unread_by(vid, node)
        for branch_nodes, _ in node.branches:
            for inner in branch_nodes:
                self._remove(inner)

    def _drop(self, node: Node) -> None:
        """Out of the index and out of its list (at the end of a batch, if in one)."""
        block = self._where[id(node)][1]
        self._remove(node)
        if self._batch:
            self._pending.setdefault(id(block), (block, set()))[1].add(id(node))
        else:
            self._compact(block)
            block.remove(node)

    def _compact(self, block: list) -> None:
        pending = self._pending.pop(id(block), None)
        if pending is not None:
            block[:] = [n for n in block if id(n) not in pending[1]]

    def _insert(self, anchor: Node, nodes: list, after: int) -> None:
        block = self.block(anchor)
        at = block.index(anchor) + after
        block[at:at] = nodes
        for node in nodes:
            self._add(node, block)

    def _require(self, node: Node) -> None:
        if node not in self:
            raise BuildError(f"{_label(node)} is not in the program", node=_label(node),
                             op=node.op or node.kind, hint="it was erased or never inserted")

    def _read_by(self, vid: int, node: Node) -> None:
        self._users[vid].append(node)
        self._touch(self._producer.get(vid))

    def _unread_by(self, vid: int, node: Node) -> None:
        users = self._users[vid]
        users.remove(node)  # Node compares by identity
        if not users:
            del self._users[vid]
            self._went_unread(vid)
        self._touch(self._producer.get(vid))

    def _went_unread(self, vid: int) -> None:
        if vid != self.program.result and vid in self._producer:
            self._unread.append(vid)

    def _touch(self, node: Node | None) -> None:
        if self._changed is not None and node is not None:
            self._changed.append(node)

    def _touch_readers(self, node: Node) -> None:
        """``node`` and the readers of its result (their input has a new producer)."""
        if self._changed is not None:
            self._changed.append(node)
            self._changed.extend(self._users.get(node.out, ()))


def rewriter_of(program: Program | Rewriter) -> Rewriter:
    """The rewriter a pass works through: the build's, or a new one over ``program``."""
    return program if isinstance(program, Rewriter) else Rewriter(program)


def eliminate_dead(rewriter: Rewriter) -> int:
    """Erase every pure node whose result nothing reads, then those only they read."""
    program = rewriter.program
    return rewriter.erase_dead(node.out for node in reversed(list(program.walk())))
