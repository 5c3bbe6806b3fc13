"""benchmarks/speed.py --quick: one table with a row per model, every (precision, threads)
column group, SQNRs, and geomean rows that are the geomeans of the printed ratios. No timing
is asserted (this machine is shared), only the table's structure and arithmetic."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ["float 1T", "int8 1T"]
CELL = re.compile(r"(\d+\.\d\d)x( ahead| behind| even)?")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("speed") / "speed.json"
    proc = subprocess.run([sys.executable, "benchmarks/speed.py", "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


def table(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
            for line in lines[1:]]


def test_header_names_load_and_the_anchors(quick):
    text, _ = quick
    assert re.search(r"^uptime: .*load average", text, re.MULTILINE)
    assert "codegen.to_torch" in text and "quantize_dynamic" in text
    assert "quantize_static" in text


def test_one_row_per_model_with_every_column(quick):
    rows = table(quick[0])
    assert [r["model"] for r in rows] == ["squeezenet", "bert", "geomean zoo",
                                          "geomean transformers", "geomean all"]
    for row in rows[:2]:
        for config in CONFIGS:
            # msc and onnxruntime run everything; a torch cell may say n/a, never be blank
            assert float(row[f"{config} msc ms"]) > 0 and float(row[f"{config} ORT ms"]) > 0
            assert row[f"{config} torch ms"] == "n/a" or float(row[f"{config} torch ms"]) > 0
            ratio = float(row[f"{config} msc/ORT"].rstrip("x"))
            msc, ort = float(row[f"{config} msc ms"]), float(row[f"{config} ORT ms"])
            assert (msc - 0.005) / (ort + 0.005) - 0.005 <= ratio <= \
                (msc + 0.005) / (ort - 0.005) + 0.005
        # int8 output stays near float for both tools (8-bit: well above 15 dB)
        assert float(row["int8 SQNR msc dB"]) > 15 and float(row["int8 SQNR ORT dB"]) > 15


def _bounds(cell: str) -> tuple[float, float]:
    value = float(CELL.fullmatch(cell).group(1))
    return value - 0.005, value + 0.005


@pytest.mark.parametrize("anchor", ["ORT", "torch"])
def test_geomean_rows_are_geomeans_of_the_printed_ratios(quick, anchor):
    rows = {r["model"]: r for r in table(quick[0])}
    members = {"geomean zoo": ["squeezenet"], "geomean transformers": ["bert"],
               "geomean all": ["squeezenet", "bert"]}
    for name, models in members.items():
        for config in CONFIGS:
            cells = [rows[m][f"{config} msc/{anchor}"] for m in models]
            cells = [c for c in cells if c != "n/a"]
            printed = rows[name][f"{config} msc/{anchor}"]
            if not cells:
                assert printed == "n/a"
                continue
            match = CELL.fullmatch(printed)
            value = float(match.group(1))
            word = " even" if value == 1 else (" ahead" if value < 1 else " behind")
            assert match.group(2) == word, (name, config, printed)
            low = math.prod(_bounds(c)[0] for c in cells) ** (1 / len(cells))
            high = math.prod(_bounds(c)[1] for c in cells) ** (1 / len(cells))
            assert low - 0.005 <= value <= high + 0.005, (name, config, cells, printed)


def test_json_carries_best_and_median_of_every_round(quick):
    _, data = quick
    assert data["header"][0].startswith("uptime:")
    rows = {r["model"]: r for r in data["rows"]}
    cell = rows["squeezenet"]["seconds"]["float 1T msc"]
    assert cell["best"] == min(cell["rounds"]) and cell["best"] <= cell["median"]
    assert set(rows["bert"]["sqnr_db"]) == {"msc", "ORT", "torch"}
    means = data["geomean"]["all float 1T msc/ORT"]
    ratios = [r["seconds"]["float 1T msc"]["best"] / r["seconds"]["float 1T ORT"]["best"]
              for r in data["rows"]]
    assert means == pytest.approx(math.prod(ratios) ** (1 / len(ratios)), rel=1e-9)
