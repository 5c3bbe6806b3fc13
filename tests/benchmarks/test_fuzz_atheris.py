"""benchmarks/fuzz_atheris.py stays in step with the readers: every target takes its seeds
(the repository's own files) without an exception, and turns hostile bytes into msc errors
only (the property the long campaign checks; atheris itself is not needed here)."""

import pytest

from benchmarks.fuzz_atheris import READERS, TARGETS, _checked, _seed_files, _small_onnx


@pytest.mark.parametrize("target", TARGETS)
def test_target_reads_its_seeds_and_refuses_garbage(target):
    one = _checked(READERS[target])
    seeds = _small_onnx() if target == "onnx" else _seed_files(target)[:3]
    assert seeds
    for seed in seeds:
        one(seed)  # raises on anything but success or an MSCError with a message
    for junk in (b"", b"\xff\xfe\x00garbage", seeds[0][: len(seeds[0]) // 2]):
        one(junk)


def test_the_command_line_names_unknown_targets(capsys):
    import sys
    from unittest import mock

    from benchmarks import fuzz_atheris
    with mock.patch.object(sys, "argv", ["fuzz_atheris.py", "--targets", "nope"]), \
            pytest.raises(SystemExit):
        fuzz_atheris.main()
    assert "unknown targets ['nope']" in capsys.readouterr().err
