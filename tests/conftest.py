"""Make the repository root importable (``lib`` and ``tools``) however pytest is started."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


import pytest


@pytest.fixture
def one_torch_thread():
    """Run a test with torch on one thread, then restore the count.

    Small LSTMs and tiny tensors run fastest on one thread; more threads only fight other processes for the
    two cores of CI. Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
