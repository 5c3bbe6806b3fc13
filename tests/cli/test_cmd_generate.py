"""`msc generate`: a transformers decoder from file.py:factory generates transformers' greedy
tokens, with the tokens/s report; bad prompts are refused by name."""

import pytest

from msc.cli.main import main
from tests.helpers.decoders import PROMPT, decoder, reference_tokens

FACTORY = '''
from tests.helpers.decoders import decoder


def make_model():
    return decoder("qwen3")
'''


@pytest.fixture
def lm(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parents[2]))
    path = tmp_path / "lm.py"
    path.write_text(FACTORY)
    return f"{path}:make_model"


def test_generate_prints_transformers_greedy_tokens_and_a_rate(lm, capsys):
    ids = ",".join(map(str, PROMPT))
    assert main(["generate", lm, "--prompt-ids", ids, "--max-new-tokens", "12",
                 "--stop-ids", "none", "--threads", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [int(t) for t in out[0].split(",")] == reference_tokens(decoder("qwen3"), PROMPT, 12)
    assert out[2] == f"prefill: {len(PROMPT)} tokens in " + out[2].split(" in ")[1]
    assert out[3].startswith("decode: 11 tokens in ") and out[3].endswith(" tokens/s")


@pytest.mark.parametrize("ids", ["1,x", ",", "-3"])
def test_bad_prompt_ids_are_refused(lm, ids, capsys):
    assert main(["generate", lm, "--prompt-ids", ids]) == 2
    assert "--prompt-ids" in capsys.readouterr().err


def test_help_names_the_options(capsys):
    assert main(["generate", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(o in out for o in ("--prompt-ids", "--max-new-tokens", "--top-p", "tokens/s"))
