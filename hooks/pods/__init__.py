"""The programs the hooks' child Pods run in the product's image: ``logs`` (the log Pod) and
``movers`` (the inputs and outputs movers). Both log in to the cluster the same way, through
``login``, from the arguments ``hooks.core.wire.child_pod.login_args`` renders."""
