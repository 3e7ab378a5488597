"""The image registries the hook server asks which digest a ``spec.container.image`` names:
the resolution over the OCI distribution API (``resolve``) and the connections it may make
(``public``)."""
