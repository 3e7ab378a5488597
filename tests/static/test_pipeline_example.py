"""examples/pipeline/: a pipeline of three BatchJobs over two BatchClusters, SLURM then
HTCondor, passing data through the object store. Every object is valid, each step depends on
the one before it, reads what that one wrote, and names an example BatchCluster."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.static.admission import batchjob_violations, crd_schema
from tests.static.kube import EXAMPLES, Object, load_all, schema_violations, to_jsonschema
from tests.static.test_batchcluster_crd import batchcluster_crd

PIPELINE = EXAMPLES / "pipeline"
STEPS = ["preprocess", "simulate", "reduce"]


def objects(path: Path) -> list[Object]:
    return list(load_all(path))


def steps() -> dict[str, Object]:
    return {doc["metadata"]["name"]: doc for doc in objects(PIPELINE / "pipeline.yaml")
            if doc["kind"] == "BatchJob"}


def test_every_step_is_a_valid_batchjob() -> None:
    found = steps()
    assert list(found) == STEPS
    for batchjob in found.values():
        assert batchjob_violations(batchjob) == []


def test_the_htcondor_site_is_a_valid_batchcluster() -> None:
    (site,) = objects(PIPELINE / "batchcluster-htcondor.yaml")
    assert schema_violations(site, to_jsonschema(crd_schema(batchcluster_crd()))) == []
    assert site["spec"]["backend"] == "htcondor"


def test_each_step_waits_for_the_one_before_and_reads_its_outputs() -> None:
    found = steps()
    for before, after in itertools.pairwise(STEPS):
        spec = found[after]["spec"]
        assert spec["dependsOn"] == [{"name": before}]
        written = [(o["s3"]["bucket"], o["s3"]["prefix"])
                   for o in found[before]["spec"]["outputs"]]
        for item in spec["inputs"]:
            bucket, prefix = item["s3"]["bucket"], item["s3"]["prefix"]
            assert any(bucket == out_bucket and prefix.startswith(out_prefix)
                       for out_bucket, out_prefix in written), (before, after)


def test_the_steps_run_on_two_sites_of_both_backends() -> None:
    sites = {doc["metadata"]["name"]: doc["spec"]["backend"] for path in (
        EXAMPLES / "sites" / "batchcluster-slurm.yaml", PIPELINE / "batchcluster-htcondor.yaml")
        for doc in objects(path) if doc["kind"] == "BatchCluster"}
    used = [sites[step["spec"]["cluster"]["name"]] for step in steps().values()]
    assert used == ["slurm", "htcondor", "slurm"]
