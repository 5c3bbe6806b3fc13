"""The op table covers MSC's optype vocabulary and the ops TVM's importers emit. (Whether each
op has every piece its consumers need: tests/relax/op/test_op_facts.py.)"""

import pytest

from msc.relax.op import OP_ALIASES, OPS
from msc.relax.op.defs_manipulate import TRILU

# msc-conventions.md 4.5, minus the graph-only optypes (input get_item shape tuple plugin
# constant), which are expression kinds rather than ops.
VOCABULARY = """
abs acos acosh asin asinh atan atanh bitwise_not ceil cos cosh erf exp floor isfinite isinf
isnan log logical_not negative round rsqrt sigmoid sign sin sinh square sqrt tan tanh
add bitwise_and bitwise_or bitwise_xor divide equal floor_divide greater greater_equal less
less_equal logical_and logical_or logical_xor maximum minimum multiply not_equal power subtract
where argmax argmin max min mean sum prod std nn.softmax nn.log_softmax expand_dims squeeze
astype cast broadcast_to clip concat concatenate cumsum einsum matmul permute_dims transpose
repeat reshape scatter_elements scatter_nd split stack strided_slice take tile full ones
ones_like zeros zeros_like tril triu nn.adaptive_avg_pool2d nn.avg_pool2d nn.max_pool2d
nn.batch_matmul nn.batch_norm nn.bias_add nn.conv1d nn.conv2d nn.dense nn.gelu nn.group_norm
nn.layer_norm nn.nll_loss nn.pad nn.relu nn.silu image.resize2d msc.attention msc.conv1d_bias
msc.conv2d_bias msc.embedding msc.gelu msc.linear msc.linear_bias msc.matmul
""".split()

# Issue 3's list of ops TVM's torch and ONNX importers emit for common CNNs and transformers.
IMPORTER_OPS = """
nn.conv1d nn.conv2d nn.conv3d nn.conv2d_transpose nn.pad nn.attention nn.dropout nn.leakyrelu
nn.prelu nn.softplus nn.instance_norm nn.rms_norm nn.max_pool1d nn.max_pool3d nn.avg_pool1d
nn.avg_pool3d image.resize2d arange full_like flip gather_elements gather_nd scatter_nd topk
sort argsort variance einsum layout_transform call_tir call_dps_packed call_pure_packed
quantize dequantize
""".split()


def _resolve(name: str) -> str:
    return OP_ALIASES.get(name, name)


@pytest.mark.parametrize("name", VOCABULARY + IMPORTER_OPS)
def test_op_is_in_the_table(name):
    assert _resolve(name) in OPS, f"{name} has no op record"


def test_trilu_maps_to_records():
    assert set(TRILU.values()) <= set(OPS)
