"""Passes over the ONNX writer's nodes before they become a ModelProto: re-fusions of what importers
spell out (forms.py, acts.py, attention.py, ...) and tidying (tidy.py), run in the order
pipeline.py gives, all on one OnnxGraph (graph.py) whose producer / reader lists they keep
in step."""
