"""The image registries the hook server asks which digest a ``spec.container.image`` names:
the resolution over the OCI distribution API (``resolve``), what a registry answered and the
sentences of its failures (``answers``), and the connections it may make (``public``)."""
