"""The device acceptance run (``python -m bench.gpu_acceptance``): its stages, the planted CUDA registry and
the expectations it is held to, and the summary it writes. Only :mod:`bench.gpu.planted` and the sources in
``csrc/`` need a GPU; everything else here runs, and is tested, on the CPU."""
