"""A Kubeflow Pipelines (v2) component that runs a BatchJob: it applies the manifest, waits for
the BatchJob's end, whichever it is, and fails unless the BatchJob Succeeded. Running this file
compiles the pipeline below to hello-hpc.yaml, to upload in the Pipelines UI."""

import base64

from kfp import compiler, dsl

# bash -c SCRIPT batchjob MANIFEST_BASE64 NAME NAMESPACE TIMEOUT
SCRIPT = r"""
set -u
NAME=$2 NAMESPACE=$3 TIMEOUT=$4
printf '%s' "$1" | base64 -d | kubectl apply -n "$NAMESPACE" -f - || exit
kubectl wait -n "$NAMESPACE" "bj/$NAME" --for=condition=Complete --timeout="$TIMEOUT" &
complete=$!
kubectl wait -n "$NAMESPACE" "bj/$NAME" --for=condition=Failed --timeout="$TIMEOUT" &
failed=$!
wait -n
kill "$complete" "$failed" 2>/dev/null
phase=$(kubectl get -n "$NAMESPACE" "bj/$NAME" -o jsonpath='{.status.phase}')
kubectl get -n "$NAMESPACE" "bj/$NAME"
[ "$phase" = Succeeded ]
"""


@dsl.container_component
def batchjob(manifest_base64: str, name: str, namespace: str, timeout: str = "24h"):
    """Apply a BatchJob (its manifest base64-encoded, its name and namespace given again) and
    wait for its end, at most ``timeout`` (as kubectl wait --timeout takes it)."""
    return dsl.ContainerSpec(
        image="bitnami/kubectl:latest",
        command=["bash", "-c", SCRIPT, "batchjob"],
        args=[manifest_base64, name, namespace, timeout],
    )


def run_batchjob(manifest: str, name: str, namespace: str, timeout: str = "24h"):
    """A pipeline step that runs the BatchJob ``manifest``, YAML. Kubeflow puts a step's
    arguments in its Pod's spec, where Kubernetes would turn $$ into $ and expand $(VAR):
    base64 leaves nothing to expand."""
    encoded = base64.b64encode(manifest.encode()).decode()
    step = batchjob(manifest_base64=encoded, name=name, namespace=namespace, timeout=timeout)
    step.set_caching_options(False)  # a BatchJob is work to do, not a result to reuse
    return step


HELLO = """\
apiVersion: hpcbridge.io/v1alpha1
kind: BatchJob
metadata:
  name: hello-kubeflow
  namespace: research
spec:
  cluster:
    name: hpc-a
    secretRef: {name: hpc-login}
  script: |
    #!/bin/bash
    echo "hello from $(hostname)"
  resources: {timeLimit: 30m}
"""


@dsl.pipeline(name="hello-hpc", description="One BatchJob on the SLURM cluster hpc-a.")
def hello_hpc():
    run_batchjob(HELLO, name="hello-kubeflow", namespace="research", timeout="1h")


if __name__ == "__main__":
    compiler.Compiler().compile(hello_hpc, package_path="hello-hpc.yaml")
