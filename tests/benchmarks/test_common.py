"""benchmarks/common.py: the timing helpers on a fake clock (what each one calls, in which order,
and which figure it keeps), the report helpers' text, and the light zoo's names."""

import math

import pytest

from benchmarks import common


class Clock:
    """A clock that each call of the timed function advances by the next of ``steps``."""

    def __init__(self, steps):
        self.now, self.steps, self.calls = 0.0, list(steps), []

    def __call__(self) -> float:
        return self.now

    def fn(self, who: str = "f"):
        def call():
            self.calls.append(who)
            self.now += self.steps.pop(0) if self.steps else 1.0
            return len(self.calls)
        return call


def test_per_call_is_the_mean_over_a_chunk_of_at_least_min_time():
    clock = Clock([1, 2, 3, 4])
    assert common.per_call(clock.fn(), 5.5, clock) == 6 / 3  # three calls reach 6 >= 5.5
    assert common.per_call(clock.fn(), 0.0, clock) == 4  # at least one call


def test_call_times_are_each_call_until_min_time_has_passed():
    clock = Clock([3, 1, 2, 7])
    assert common.call_times(clock.fn(), 5.0, clock) == [3, 1, 2]
    assert common.call_times(clock.fn(), 0.0, clock) == [7]


def test_single_calls_and_best_of():
    clock = Clock([4, 2, 3])
    assert common.single_calls(clock.fn(), 2, clock) == [4, 2]
    clock = Clock([4, 2, 3])
    assert common.best_of(clock.fn(), 3, clock) == (3, 2)  # (last result, fastest)


def test_interleaved_warms_then_runs_the_contenders_round_robin():
    clock = Clock([])
    fns = {"a": clock.fn("a"), "b": clock.fn("b")}
    seen = common.interleaved(fns, 2, lambda fn: fn())
    assert clock.calls == ["a", "b", "a", "b", "a", "b"]
    assert seen == {"a": [3, 5], "b": [4, 6]}
    clock.calls.clear()
    common.interleaved(fns, 1, lambda fn: fn(), warm=False)
    assert clock.calls == ["a", "b"]


def test_best_interleaved_keeps_each_contenders_smallest_measurement():
    figures = iter([5, 1, 2, 9, 3, 4])
    fns = {"a": None, "b": None}
    assert common.best_interleaved(fns, 3, lambda fn: next(figures), warm=False) == \
        {"a": 2, "b": 1}


def test_best_call_seconds_is_the_fastest_single_call_of_interleaved_chunks():
    clock = Clock([9, 9, 5, 1, 2, 6, 8, 3])  # warm a, warm b; then chunks of >= 3 s
    best = common.best_call_seconds({"a": clock.fn("a"), "b": clock.fn("b")}, 2, 3.0, clock)
    # round 1: a [5] b [1, 2]; round 2: a [6] b [8]: a 5, b 1
    assert best == {"a": 5, "b": 1}


def test_report_helpers():
    assert common.geomean([2.0, None, 8.0]) == pytest.approx(4.0)
    assert common.geomean([None, math.inf, 0.0]) is None
    assert math.isnan(common.geomean([], math.nan))
    assert (common.ms(0.0123), common.ms(None), common.ms(0.5, digits=1)) == ("12.30", "-",
                                                                              "500.0")
    assert (common.ratio(3.0, 2.0), common.ratio(None, 2.0, "n/a")) == ("1.50x", "n/a")
    assert common.sqnr([[1.0, 2.0]], [[1.0, 2.0]]) > 100
    assert common.sqnr([[3.0, 4.0]], [[3.0, 3.0]]) == pytest.approx(10 * math.log10(25))


def test_print_table_writes_markdown_rows_as_they_come(capsys):
    def rows():
        yield ["a", 1]
        print("between")
        yield ["b", 2.5]
    common.print_table(["name", "value"], rows())
    assert capsys.readouterr().out.splitlines() == [
        "| name | value |", "|---|---|", "| a | 1 |", "between", "| b | 2.5 |"]


def test_the_light_zoo():
    pytest.importorskip("onnx")
    names = common.light_names()
    assert set(common.ZOO) <= set(names) and names == sorted(names)
    model = common.light_model("squeezenet")
    assert common.data_input(model).name not in {i.name for i in model.graph.initializer}
    assert common.input_shape(model) == [1, 3, 224, 224]
