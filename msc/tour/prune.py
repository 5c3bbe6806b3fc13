"""``msc demo`` step: structured pruning of a small residual CNN (``step_prune``)."""

from __future__ import annotations

import os

from .shared import banner


def _residual_cnn():
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16)
            self.c1, self.c2 = nn.Conv2d(16, 32, 3, 1, 1), nn.Conv2d(32, 16, 3, 1, 1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = F.relu(self.bn(self.stem(x)))
            x = F.relu(x + self.c2(F.relu(self.c1(x))))  # residual: stem and c2 are tied
            return self.fc(x.mean((2, 3)))

    torch.manual_seed(0)
    return Net().eval()


def step_prune(out: str) -> None:
    """A residual CNN pruned to half its channels: tied groups, the plan, a before/after report
    with backend latency, and both codegens computing the same pruned model."""
    import numpy as np
    import torch

    from msc.codegen import to_relax, to_torch
    from msc.compression.prune import format_report, prune, save_plan
    from msc.frontends.translate import from_torch

    from .. import relax

    graph, weights = from_torch(_residual_cnn(), [([1, 3, 16, 16], "float32")])
    small, small_w, report = prune(graph, weights, {"density": 0.5, "latency_repeat": 5})
    banner("compression.prune: density 0.5, stride 8 (residual stem + c2 pruned together)")
    for group in report["groups"]:
        print(f"group {group['name']}: {group['channels'][0]} -> {group['channels'][1]} "
              f"channels, owners {group['owners']}")
    print(format_report(report))
    path = save_plan(report["plan"], os.path.join(out, "prune_plan.json"))
    print(f"(plan written to {path}; re-apply it with prune(graph, weights, {{'plan': path}}))")
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype("float32")
    with torch.no_grad():
        got_torch = to_torch(small, small_w, {"need_test": False},
                             build_folder=os.path.join(out, "pruned_torch"))(
            torch.from_numpy(x)).numpy()
    mod = to_relax(small, small_w, {"need_test": False},
                   build_folder=os.path.join(out, "pruned_relax"))
    got_vm = relax.VirtualMachine(relax.build(mod), relax.cpu())["main"](x).numpy()
    diff = float(np.abs(got_torch - got_vm).max())
    print(f"pruned model: to_torch vs relax VM max |diff| = {diff:.2e}")
    if diff > 1e-4 or report["total"]["params"][1] >= report["total"]["params"][0]:
        raise SystemExit("demo: the pruned model is not smaller or its codegens disagree")
