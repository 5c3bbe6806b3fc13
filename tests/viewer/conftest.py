"""Fixtures of the viewer tests: the light-zoo resnet50 (translated once per session)."""

import os

import onnx
import pytest

from msc.frontends.translate import from_onnx

RESNET50 = os.path.join(os.path.dirname(onnx.__file__),
                        "backend/test/data/light/light_resnet50.onnx")


@pytest.fixture(scope="session")
def resnet50():
    """``(graph, weights)`` of ONNX's light resnet50 (230 joints after translation)."""
    return from_onnx(RESNET50)
