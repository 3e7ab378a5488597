"""sbatch's options: which take a value, which take none. Pure data."""

from __future__ import annotations

# Which of sbatch's options take a value, from sbatch(1) of Slurm 22.05.8 (the test cluster's)
# and of every later release up to 25.11: its OPTIONS list each as "--name=<value>" (a value is
# required), "--name[=value]" (optional, only ever attached) or "--name" (none). An option in
# the first form in any of them is in SBATCH_LONG_WITH_VALUE.
SBATCH_LONG_WITH_VALUE = frozenset({
    "account", "acctg-freq", "array", "batch", "bb", "bbf", "begin", "chdir",
    "cluster-constraint", "clusters", "comment", "constraint", "container", "container-id",
    "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu", "cpus-per-task", "deadline",
    "delay-boot", "dependency", "distribution", "error", "exclude", "export", "export-file",
    "extra", "extra-node-info", "gid", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node",
    "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "hint", "input", "job-name",
    "kill-on-invalid-dep", "licenses", "mail-type", "mail-user", "mcs-label", "mem", "mem-bind",
    "mem-per-cpu", "mem-per-gpu", "mem-update", "mincpus", "network", "nodefile", "nodelist",
    "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node",
    "ntasks-per-socket", "open-mode", "output", "partition", "power", "prefer", "priority",
    "profile", "qos", "reservation", "resources", "runtime", "segment", "signal",
    "sockets-per-node", "switches", "thread-spec", "threads-per-core", "time", "time-min", "tmp",
    "tres-bind", "tres-per-task", "uid", "wait-all-nodes", "wckey", "wrap",
})
SBATCH_LONG_WITHOUT_VALUE = frozenset({
    "consolidate-segments", "contiguous", "exclusive", "get-user-env", "help", "hold",
    "ignore-pbs", "nice", "no-kill", "no-requeue", "oom-kill-step", "overcommit",
    "oversubscribe", "parsable", "propagate", "quiet", "reboot", "requeue", "resv-ports",
    "spread-job", "spread-segments", "stepmgr", "test-only", "usage", "use-min-nodes",
    "verbose", "version", "wait",
})
"""Options that take no value, or only an attached one (``--exclusive[=user]``)."""
SBATCH_SHORT_WITH_VALUE = frozenset("ABCDFGJLMNSabcdeimnopqtwx")
SBATCH_SHORT_OPTIONAL_VALUE = frozenset("k")
"""``-k``/``--no-kill[=off]``: the rest of its element, if any, is its value (``-koff``)."""
SBATCH_SHORT_FLAGS = frozenset("HOQVWhsv")
"""sbatch's short options that take no value: others may be bundled after them (``-vJx``)."""
