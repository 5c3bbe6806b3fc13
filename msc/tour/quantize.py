"""Demo step: int8 quantization with a per-layer report that finds a broken layer."""

from __future__ import annotations

import os

from .shared import banner


def _damaged_mlp():
    """An MLP whose middle layer carries outlier weights on a hidden unit that never fires:
    harmless in float, ruinous for per-channel int8 (the outliers set every row's scale)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8)).eval()
    with torch.no_grad():
        model[0].bias[5] = -100.0
        model[2].weight[:, 5] = 50.0
    return model


def step_quantize(out: str) -> None:
    """quantize -> report -> suggested excludes -> QDQ graph on the msc backend."""
    import numpy as np
    import torch

    from msc.codegen import to_relax
    from msc.compression.quantize import apply_plan, calibrate, quantize, save_plan
    from msc.frontends import translate

    from .. import relax

    model = _damaged_mlp()
    graph, weights = translate.from_torch(model, [([4, 16], "float32")])
    rng = np.random.default_rng(0)
    data = [{"inp_0": rng.standard_normal((4, 16)).astype("float32")} for _ in range(6)]
    banner("compression.quantize: int8 QDQ, per-layer report (target output SQNR 30 dB)")
    _, _, report = quantize(graph, weights, data, {"target_sqnr": 30.0})
    print(report.table(rows=6))
    excludes = report.suggested_excludes
    plan = calibrate(graph, weights, data, {"exclude": excludes})
    save_plan(plan, os.path.join(out, "mlp_int8_plan.json"))
    qgraph, qweights = apply_plan(graph, weights, plan)
    vm = relax.VirtualMachine(relax.build(to_relax(qgraph, qweights)), relax.cpu())
    x = np.concatenate([d["inp_0"] for d in data])
    ref = model(torch.from_numpy(x)).detach().numpy()
    got = np.concatenate([vm["main"](d["inp_0"]).numpy() for d in data])
    sqnr = 10 * np.log10((ref.astype(np.float64) ** 2).sum() / ((ref - got) ** 2).sum())
    banner(f"QDQ graph without {excludes}, on the msc backend (relax.build)")
    print(f"{qgraph.inspect()['nodes']}\noutput SQNR vs torch float: {sqnr:.2f} dB "
          f"(wrote {out}/mlp_int8_plan.json)")
    if report.to_dict()["layers"][0]["node"] not in excludes or sqnr < 30.0:
        raise SystemExit("demo: the suggested excludes do not meet the target")
