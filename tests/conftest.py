"""Shared pytest fixtures. Graph fixtures are fresh per test (some tests change the graph)."""

import pytest

from msc.graph import testing


@pytest.fixture
def conv_relu():
    return testing.conv_relu_graph()


@pytest.fixture
def residual():
    return testing.residual_graph()


@pytest.fixture
def dynamic():
    return testing.dynamic_graph()


@pytest.fixture
def shared():
    return testing.shared_weight_graph()


@pytest.fixture
def prunable():
    return testing.prune_graph()
