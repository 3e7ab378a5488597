"""hpcbridge: Metacontroller hooks that run Kubernetes BatchJobs on SLURM and HTCondor over SSH.

``__version__`` is the product's one version: the package's (pyproject.toml reads it from
here), the metrics' ``hpcbridge_build_info``, the default log image's tag and the image's
label (the Makefile's ``image`` target passes it, the Dockerfile checks it).
"""

__version__ = "0.1.0"
