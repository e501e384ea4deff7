"""The ``gpu`` marker: where no CUDA device is, a test marked gpu is a skip saying why (tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import NO_CUDA


def test_a_gpu_test_is_a_skip_saying_why_where_no_cuda_device_is(pytester):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: a test marked gpu runs here")
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs CUDA\n")
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems\n")
    pytester.makepyfile("import pytest\n\n\n@pytest.mark.gpu\ndef test_on_cuda():\n    assert False\n\n\n"
                        "def test_anywhere():\n    pass\n")
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"*{NO_CUDA}*"])
