"""`make bench-containers`: containers from create to Running on the SLURM test cluster.

With the hook server as `make run` starts it, driven by the Metacontroller stand-in of
tests/driver.py (a sync every ``--poll`` seconds, or sooner when an answer asks), it measures
for each runtime, ``--runs`` times: the seconds from a BatchJob's creation to its first status
``Running`` when its image is not in the site's cache (a fresh tag pushed to the test registry
just before: resolved, pulled on the login node, then submitted) and when it is (the same
image again: resolved, found in the cache, submitted). Then ``--shared`` BatchJobs created
together that ask for one uncached image: the seconds until all are Running or done, and how
many pulls the login node ran (from the attempts' pull logs; the guarantee is one). Figures go
to stdout and to bench/results.md (section ``containers``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.report import machine, update
from tests.driver import Driver, serving
from tests.integration.conftest import NAMESPACE, Cluster, cluster_from_state, read_env
from tests.integration.test_containers import Registry, batchjob, pull_logs, site

REPO = Path(__file__).resolve().parent.parent
STARTED = ("Running", "Succeeded")
COMMAND = ["/bin/sh", "-c", "sleep 2"]


def registry_of(state: Path) -> Registry:
    env = read_env(state / "env")
    return Registry(env["REGISTRY"], env["PRIVATE_REGISTRY"], env["REGISTRY_USER"],
                    env["REGISTRY_PASSWORD"])


def to_running(driver: Driver, names: list[str], poll: float, timeout: float = 600) -> float:
    """Sync ``names`` round after round until each has started; the seconds it took."""
    start, waiting = time.monotonic(), set(names)
    while waiting:
        for name in sorted(waiting):
            driver.sync(NAMESPACE, name)
            if (driver.get(NAMESPACE, name).get("status") or {}).get("phase") in STARTED:
                waiting.discard(name)
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{len(waiting)} BatchJobs did not start in {timeout} s")
        if waiting:
            time.sleep(poll)
    return time.monotonic() - start


def one(driver: Driver, on: str, image: str, runtime: str, poll: float) -> float:
    name = f"{on}-{uuid.uuid4().hex[:6]}"
    driver.create(batchjob(name, {"image": image, "runtime": runtime, "command": COMMAND},
                           on=on))
    seconds = to_running(driver, [name], poll)
    driver.finalize(NAMESPACE, name)
    return seconds


def shared(driver: Driver, cluster: Cluster, on: str, image: str, runtime: str, count: int,
           poll: float) -> tuple[float, int]:
    """``count`` BatchJobs asking for one uncached image: seconds until all started, pulls."""
    names = [f"{on}-s{index}" for index in range(count)]
    objs = [driver.create(batchjob(name, {"image": image, "runtime": runtime,
                                          "command": COMMAND}, on=on)) for name in names]
    seconds = to_running(driver, names, poll)
    pulls = sum(pull_logs(cluster.remote_root(obj)).count("hpcbridge: pulling") for obj in objs)
    for name in names:
        driver.finalize(NAMESPACE, name)
    return seconds, pulls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shared", type=int, default=100, metavar="N")
    parser.add_argument("--poll", type=float, default=0.5, metavar="SECONDS")
    parser.add_argument("--runtimes", default="podman,charliecloud")
    args = parser.parse_args()
    cluster = cluster_from_state("slurm")
    assert cluster is not None, "the SLURM test cluster is not up"
    registry = registry_of(Path("/var/tmp/hpcbridge-registry"))
    lines = ["## Containers: from create to Running on the SLURM test cluster", "",
             f"`make bench-containers BENCH_ARGS='--runs {args.runs} --shared {args.shared} "
             f"--poll {args.poll} --runtimes {args.runtimes}'` ([bench/containers.py]"
             "(containers.py)): the hook server as `make run` starts it, a sync every "
             f"{args.poll} s by tests/driver.py, a 2 s job in a busybox image of the test "
             "registry; medians of the runs (min-max).", "", machine(), "",
             "| runtime | image not cached (s) | image cached (s) |", "| --- | --- | --- |"]
    log = Path(tempfile.mkdtemp()) / "hooks.log"
    with serving(log) as url:
        driver = Driver(url, hook_version="v2")
        on = f"bench-{uuid.uuid4().hex[:6]}"
        site(driver, cluster, registry, on)
        for runtime in args.runtimes.split(","):
            cold, warm = [], []
            for _ in range(args.runs):
                image = f"{registry.public}/bench/cold:{uuid.uuid4().hex[:8]}"
                registry.push(image)
                cold.append(one(driver, on, image, runtime, args.poll))
                warm.append(one(driver, on, image, runtime, args.poll))
            lines.append(f"| {runtime} | {figure(cold)} | {figure(warm)} |")
            print(lines[-1], flush=True)
        image = f"{registry.public}/bench/shared:{uuid.uuid4().hex[:8]}"
        registry.push(image)
        seconds, pulls = shared(driver, cluster, on, image, "podman", args.shared, args.poll)
    lines += ["", f"{args.shared} BatchJobs created together, one uncached image (podman): all "
              f"Running or done after {seconds:.1f} s; pulls on the login node: {pulls}."]
    print(lines[-1])
    update(REPO / "bench/results.md", "containers", "\n".join(lines))


def figure(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


if __name__ == "__main__":
    main()
