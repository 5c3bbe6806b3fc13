"""BN folding (compression.fold): the folded graph equals the unfolded one, with fewer joints."""

import numpy as np
import torch

from msc.compression.fold import fold_batch_norm
from msc.compression.quantize.runner import make_runner
from msc.frontends import translate


class _ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)   # grouped, with a bias
        self.b2 = torch.nn.BatchNorm2d(8)
        self.b3 = torch.nn.BatchNorm2d(8)                         # after an add: stays

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return self.b3(y + self.b2(self.c2(y)))


def _model():
    torch.manual_seed(0)
    model = _ConvBN()
    with torch.no_grad():
        for bn in (model.b1, model.b2, model.b3):  # statistics far from the identity
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.2, 3)
            bn.weight.uniform_(0.5, 2)
            bn.bias.uniform_(-1, 1)
    return model.eval()


def test_fold_batch_norm_is_exact_and_removes_the_foldable_bns():
    model = _model()
    graph, weights = translate.from_torch(model, [([2, 3, 8, 8], "float32")])
    folded, folded_weights, names = fold_batch_norm(graph, weights)
    folded.check()
    optypes = [n.optype for n in folded.get_nodes()]
    assert len(names) == 2 and optypes.count("nn.batch_norm") == 1  # b3 follows an add
    assert optypes.count("msc.conv2d_bias") == 2
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
    ref = model(torch.from_numpy(x)).detach().numpy()
    got = make_runner(folded, folded_weights)([x])[folded.output_names[0]]
    before = make_runner(graph, weights)([x])[graph.output_names[0]]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, before, rtol=1e-5, atol=1e-5)
    assert fold_batch_norm(folded, folded_weights)[2] == []  # nothing left to fold
