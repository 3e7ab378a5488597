"""The image of an attempt with ``spec.container`` through whole sync calls: resolved once
and recorded in ``status.image``, pulled by the login node while the BatchJob waits, then
submitted with a script that runs it; a failed pull backs off like a kubelet; ``Never`` and
an unreachable registry fall back on the cache; the spec's digest is the spec as written."""

from __future__ import annotations

import base64
import json
from typing import Any

from hooks.core.decide.effects import PrepareImage, ResolveImage, Submit, Trouble
from hooks.core.runtimes.wrapper import SCRIPT
from hooks.core.values.image import ImageConfig, Prepared, PreparedImage, ResolvedImage
from hooks.core.values.reasons import Reason
from tests.unit.builders import SUBMITTED, Loop, request
from tests.unit.conftest import call

DIGEST = "sha256:" + "ab" * 32
CONFIG = ImageConfig(("/bin/echo",), ("hi",), (("GREETING", "hi"),))
RESOLVED = ResolvedImage(DIGEST, CONFIG)
PATH = f"/scratch/images/hpcuser/podman/sha256-{'ab' * 32}.tar"
READY = PreparedImage(Prepared.READY, DIGEST, PATH, CONFIG)
PULLING = PreparedImage(Prepared.PULLING)
CONTAINER = {"image": "registry.example.org/lab/sim:2.1", "runtime": "apptainer"}


def loop(**container: Any) -> Loop:
    """A BatchJob that runs the image's own entrypoint (no script)."""
    body = request({"container": {**CONTAINER, **container}})
    del body["parent"]["spec"]["script"]
    return Loop(body)


def results(more: dict[type, Any] | None = None) -> dict[type, Any]:
    return {ResolveImage: RESOLVED, PrepareImage: READY, **SUBMITTED, **(more or {})}


def test_resolved_pulled_then_submitted_with_a_script_that_runs_the_cached_image() -> None:
    bj = loop()
    first = bj.sync(results({PrepareImage: PULLING}))
    assert first.kinds == ["ResolveImage", "PrepareImage"]
    assert (first.status["phase"], first.status["reason"]) == ("Pending", "PullingImage")
    assert first.status["image"] == {"reference": CONTAINER["image"], "runtime": "apptainer",
                                     "digest": DIGEST}
    second = bj.sync(results())
    assert second.kinds == ["PrepareImage", "Submit", "Track"]  # the digest is not asked again
    (pull,) = [a for a in second.actions if isinstance(a, PrepareImage)]
    assert pull.pull.digest == DIGEST and pull.pull.source.endswith(f"lab/sim@{DIGEST}")
    (submit,) = [a for a in second.actions if isinstance(a, Submit)]
    script = submit.job.spec.script
    assert script.startswith("#!/bin/sh\n") and "apptainer run" in script and PATH in script
    assert second.status["image"]["digest"] == DIGEST
    assert second.status["attemptSpecHash"] == call(bj.body).parsed.digest


def test_the_batchjobs_script_runs_inside_the_image_as_a_file_of_its_own() -> None:
    bj = Loop(request({"container": CONTAINER,
                       "script": "#!/bin/bash\n#SBATCH --mail-type=END\necho inside\n"}))
    run = bj.sync(results())
    (submit,) = [a for a in run.actions if isinstance(a, Submit)]
    files = {item.path: item.content for item in submit.job.inputs}
    assert files[SCRIPT] == b"#!/bin/bash\n#SBATCH --mail-type=END\necho inside\n"
    assert submit.job.spec.script.splitlines()[1] == "#SBATCH --mail-type=END"
    assert f'"$d/{SCRIPT}"' in submit.job.spec.script


def test_a_failed_pull_backs_off_and_is_tried_again_as_a_retry() -> None:
    bj = loop()
    failed = PreparedImage(Prepared.FAILED, message="unauthorized: authentication required")
    run = bj.sync(results({PrepareImage: failed}))
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "ImagePullBackOff")
    assert "authentication required; tried again in 10 s." in run.status["message"]
    assert run.status["image"]["pullFailures"] == 1
    assert 2 <= run.answer.body["resyncAfterSeconds"] <= 13
    bj.later(5)
    assert bj.sync(results()).kinds == []  # still backing off: nothing is asked
    bj.later(6)
    retried = bj.sync(results())
    (pull,) = [a for a in retried.actions if isinstance(a, PrepareImage)]
    assert pull.pull.retry and retried.kinds[-2:] == ["Submit", "Track"]
    assert "pullFailures" not in retried.status["image"]


def test_a_registry_that_refuses_backs_off_with_its_answer() -> None:
    refused = Trouble(Reason.IMAGE_PULL_BACKOFF,
                      "Registry registry.example.org refused the credentials for lab/sim.")
    run = loop().sync(results({ResolveImage: refused}))
    assert run.kinds == ["ResolveImage"]
    assert run.status["reason"] == "ImagePullBackOff"
    assert run.status["message"].startswith("Registry registry.example.org refused")


def test_if_not_present_stands_in_the_cache_for_a_registry_out_of_reach() -> None:
    away = Trouble(Reason.CLUSTER_UNREACHABLE, "Registry registry.example.org did not answer.")
    run = loop().sync(results({ResolveImage: away}))
    (pull,) = [a for a in run.actions if isinstance(a, PrepareImage)]
    assert pull.pull.digest == ""  # a lookup of what the cache recorded for the reference
    assert run.kinds[-2:] == ["Submit", "Track"] and run.status["image"]["digest"] == DIGEST
    missing = loop().sync(results({ResolveImage: away,
                                     PrepareImage: PreparedImage(Prepared.MISSING)}))
    assert missing.status["reason"] == "ImagePullBackOff"
    assert "did not answer" in missing.status["message"]
    always = loop(imagePullPolicy="Always").sync(results({ResolveImage: away}))
    assert always.kinds == ["ResolveImage"] and always.status["reason"] == "ImagePullBackOff"


def test_never_asks_no_registry_and_fails_without_the_image() -> None:
    run = loop(imagePullPolicy="Never").sync(results({PrepareImage: PreparedImage(
        Prepared.MISSING)}))
    assert run.kinds == ["PrepareImage"]
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "ErrImageNeverPull")
    cached = loop(imagePullPolicy="Never").sync(results())
    assert cached.kinds == ["PrepareImage", "Submit", "Track"]


def test_a_missing_pull_secret_waits_and_a_present_one_reaches_the_pull_alone() -> None:
    waiting = loop(imagePullSecrets=[{"name": "regcred"}]).sync(results())
    assert (waiting.status["reason"], waiting.kinds) == ("SecretNotFound", [])
    config = {"auths": {"registry.example.org": {"username": "u", "password": "p4ss"}}}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
              "metadata": {"name": "regcred", "namespace": "research"},
              "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()
                                                             ).decode()}}
    bj = Loop(request({"container": {**CONTAINER, "imagePullSecrets": [{"name": "regcred"}]}},
                      secrets={"regcred": secret}))
    run = bj.sync(results())
    (resolve,) = [a for a in run.actions if isinstance(a, ResolveImage)]
    (pull,) = [a for a in run.actions if isinstance(a, PrepareImage)]
    assert resolve.credentials == pull.pull.credentials == ("u", "p4ss")
    assert "p4ss" not in repr(resolve) + repr(pull) + json.dumps(run.answer.body)


def test_an_image_file_outside_what_the_route_allows_is_invalid() -> None:
    run = loop(image="/scratch/images/sim.sif").sync(results())
    assert run.kinds == []
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "InvalidSpec")
    assert run.status["message"].startswith("spec.container.image /scratch/images/sim.sif")
