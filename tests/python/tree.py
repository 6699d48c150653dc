"""Where the tests find this tree: its build (top_builddir, else ../../_build)
and its sources (top_srcdir), and use_tree() to import sigmatorch from the
sources over the build's libsigma-runtime in this process."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("top_builddir", os.path.join(HERE, "..", "..",
                                                    "_build"))
SRC = os.environ.get("top_srcdir", os.path.join(HERE, "..", ".."))
LIB = os.path.join(BUILD, "lib", ".libs", "libsigma-runtime.so.0")


def use_tree():
    """sigmatorch from SRC/python, over LIB, for `import sigmatorch`."""
    os.environ["SIGMA_RUNTIME_LIB"] = LIB
    sys.path.insert(0, os.path.join(SRC, "python"))
