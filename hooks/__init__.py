"""hpcbridge: Metacontroller hooks that run Kubernetes BatchJobs on SLURM and HTCondor over SSH."""
