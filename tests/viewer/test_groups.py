"""Groups of the view: scopes from names, blocks cut where one tensor is alive."""

from msc.viewer.groups import MAX_ITEMS, Group, group_joints


def _labels(group):
    return [i.label if isinstance(i, Group) else i for i in group.items]


def _joints_under(group):
    return sorted(i for g in group.walk() for i in g.items if not isinstance(i, Group))


def test_module_paths_become_nested_groups():
    names = ["x", "layer1.0.conv1", "layer1.0.relu", "layer1.1.conv1", "layer1.1.relu", "fc"]
    root = group_joints(names, [(i, i + 1) for i in range(5)])
    assert _labels(root) == [0, "layer1", 5]
    layer1 = root.items[1]
    assert _labels(layer1) == ["0", "1"] and layer1.size == 4
    assert _joints_under(layer1.items[1]) == [3, 4] and layer1.items[1].parent is layer1
    assert [g.gid for g in root.walk()] == [0, 1, 2, 3]


def test_onnx_scopes_and_single_child_chains_merge():
    names = ["/model/enc/q/MatMul", "/model/enc/k/MatMul", "/model/enc/Add", "/head/Gemm",
             "/head/Relu"]
    root = group_joints(names, [(0, 2), (1, 2), (2, 3), (3, 4)])
    # "model" holds only "enc": one box "model/enc"; a one-joint scope ("q") is no group
    assert _labels(root) == ["model/enc", "head"]
    assert _labels(root.items[0]) == [0, 1, 2]


def test_flat_names_are_cut_at_single_tensor_points():
    # 30 residual blocks: a -> b -> c -> add(a_prev, c) ; names carry no scope
    names, edges, prev = ["input"], [], 0
    for k in range(30):
        base = len(names)
        names += [f"conv_{k}a", f"conv_{k}b", f"relu_{k}", f"add_{k}"]
        edges += [(prev, base), (base, base + 1), (base + 1, base + 2), (base + 2, base + 3),
                  (prev, base + 3)]
        prev = base + 3
    root = group_joints(names, edges)
    assert len(root.items) <= MAX_ITEMS
    assert _joints_under(root) == list(range(len(names)))
    # every block ends at an add (the only live tensor), never inside a residual block
    for block in (i for i in root.items if isinstance(i, Group)):
        assert names[_joints_under(block)[-1]].startswith("add_")


def test_a_long_chain_is_split_into_levels_of_bounded_size():
    n = 5000
    root = group_joints([f"op_{i}" for i in range(n)], [(i, i + 1) for i in range(n - 1)])
    assert all(len(g.items) <= MAX_ITEMS for g in root.walk())
    assert root.size == n and _joints_under(root) == list(range(n))


def test_onnx_paths_keep_dotted_module_names_whole():
    names = ["/layer1/layer1.0/conv1/Conv", "/layer1/layer1.0/relu/Relu",
             "/layer1/layer1.1/conv1/Conv", "/layer1/layer1.1/relu/Relu", "/fc/Gemm"]
    root = group_joints(names, [(i, i + 1) for i in range(4)])
    assert _labels(root) == ["layer1", 4]
    assert _labels(root.items[0]) == ["layer1.0", "layer1.1"]
