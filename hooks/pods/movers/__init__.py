"""The mover Pods' program, ``python -m hooks.pods.movers inputs|outputs``: the data of a BatchJob
between the object store or claims and the cluster (``hooks.core.wire.mover_pods`` builds the
Pods)."""
