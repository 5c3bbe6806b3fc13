"""Dependency queries (get_producers / get_consumers / get_output_blocks), get_sref and
annotate / unannotate: answers from the buffers blocks read and write, recorded in the trace
and replayed; statements compare structurally."""

import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.tir.parser import parse_tir_text

from .test_schedule_primitives import MM_RELU


def _sch():
    return tir.Schedule(parse_tir_text(MM_RELU)["mm_relu"])


def test_producers_consumers_and_outputs():
    sch = _sch()
    (producer,) = sch.get_producers("C")
    (consumer,) = sch.get_consumers("Y")
    assert sch.get(producer).name == "Y" and sch.get(consumer).name == "C"
    assert sch.get_producers("Y") == [] and sch.get_consumers("C") == []
    assert [sch.get(b).name for b in sch.get_output_blocks("root")] == ["C"]
    testing.assert_structural_equal(sch.get_sref(producer).stmt, sch.get(sch.get_block("Y")))
    testing.verify_trace_roundtrip(sch, parse_tir_text(MM_RELU)["mm_relu"])


def test_annotate_and_unannotate_a_loop_and_a_block():
    sch = _sch()
    i = sch.get_loops("Y")[0]
    sch.annotate(i, "pragma_unroll", 4)
    sch.annotate("C", "note", ["a", 1])
    text = sch.mod["main"].script()
    assert "annotations={\"pragma_unroll\": 4}" in text
    assert 'T.sblock_attr({"note": ["a", 1]})' in text
    testing.verify_trace_roundtrip(sch, parse_tir_text(MM_RELU)["mm_relu"])
    sch.unannotate(i, "pragma_unroll")
    assert "pragma_unroll" not in sch.mod["main"].script()
    with pytest.raises(ScheduleError, match="no annotation 'pragma_unroll'"):
        sch.unannotate(i, "pragma_unroll")


def test_annotate_buffer_access_states_the_region():
    sch = _sch()
    sch.annotate_buffer_access("Y", 0, "read", lambda i, j, k: ((i - 1, i + 1), (k, k + 2)))
    block = sch.get(sch.get_block("Y"))
    assert block.annotations["explicit_read_region"] == [0]
    (lo0, hi0), (lo1, hi1) = block.reads[0].region
    assert [tir.to_str(e) for e in (lo0, hi0, lo1, hi1)] == ["vi - 1", "vi + 1", "vk", "vk + 2"]
    testing.verify_trace_roundtrip(sch, parse_tir_text(MM_RELU)["mm_relu"])
    with pytest.raises(ScheduleError, match="no read buffer 5"):
        sch.annotate_buffer_access("Y", 5, "read", lambda i, j, k: (i, k))
