"""msc's test suite. The folders mirror the packages (tests/relax/op/ tests msc/relax/op/,
tests/frontends/onnx/ tests frontends/onnx/, ...). Every folder is a package, so test files
import as ``tests.<folder>.<file>`` and two folders may hold files of the same name. Test
files never import each other: shared builders and case tables live in tests/helpers/.
"""
