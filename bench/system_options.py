"""The system benchmark's command line (bench/system.py)."""

from __future__ import annotations

import argparse
from pathlib import Path


def parse(argv: list[str] | None, description: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--cluster-env", type=Path, metavar="FILE",
                       help="a SLURM cluster's env file (tests/clusters/slurm-up.sh's): the "
                            "login Secret and spec.cluster; sacct counts the scheduler jobs")
    where.add_argument("--batchcluster", metavar="NAME", help="spec.cluster.name")
    parser.add_argument("--secret", metavar="NAME", help="with --batchcluster: the login "
                        "Secret to copy from --secret-namespace")
    parser.add_argument("--secret-namespace", metavar="NS", default="default")
    parser.add_argument("--namespace-label", action="append", default=[], metavar="KEY=VALUE",
                        help="a label of the bench namespace, e.g. for a BatchCluster's "
                             "namespaceSelector (repeatable)")
    parser.add_argument("--backend", default="slurm")
    parser.add_argument("--jobs", type=int, default=300, metavar="N")
    parser.add_argument("--script-seconds", type=float, default=0, metavar="S",
                        help="the script sleeps S seconds (default: it runs `true`)")
    parser.add_argument("--timeout", type=float, default=900, metavar="S",
                        help="for every BatchJob to succeed, and again for all to be gone")
    parser.add_argument("--disrupt", metavar="CMD", help="a shell command run once, when "
                        "half of the BatchJobs have job ids")
    parser.add_argument("--steady", type=float, default=0, metavar="SECONDS",
                        help="measure request rates over SECONDS once all are active (needs "
                             "long scripts; the run then waits for the end, up to --timeout)")
    parser.add_argument("--settle", type=float, default=0, metavar="SECONDS",
                        help="with --steady, wait SECONDS once all are active before measuring "
                             "(the syncs of the burst and its writes die down)")
    parser.add_argument("--hooks-metrics", metavar="URL",
                        help="the hooks' Prometheus endpoint, e.g. http://127.0.0.1:8080/metrics")
    parser.add_argument("--cpu", action="append", default=[], metavar="NAME=PID",
                        help="a process tree whose CPU to measure (repeatable)")
    parser.add_argument("--mc-args", default="", metavar="TEXT",
                        help="Metacontroller's flags, recorded with the figures")
    parser.add_argument("--label", default="run")
    parser.add_argument("--keep", action="store_true", help="leave the namespace as it is")
    parser.add_argument("--dump-writes", metavar="NAME",
                        help="print every write of BatchJob NAME, with what changed")
    parser.add_argument("--out", type=Path, default=Path("bench/results.md"))
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs takes a positive number")
    if args.batchcluster and not args.secret:
        parser.error("--batchcluster needs --secret")
    if any("=" not in c or not c.split("=", 1)[1].isdigit() for c in args.cpu):
        parser.error("--cpu takes NAME=PID")
    if any("=" not in label for label in args.namespace_label):
        parser.error("--namespace-label takes KEY=VALUE")
    return args
