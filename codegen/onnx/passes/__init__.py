"""Passes over the ONNX writer's nodes before they become a ModelProto: re-fusions of what importers
spell out (forms.py, acts.py, attention.py, ...) and tidying (tidy.py runs them all)."""
