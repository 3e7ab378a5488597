"""Metacontroller's wire: the request read into a ``Call`` (``request``), the response envelope and
resync (``response``), and the children the hooks ask for: the log Pod (``log_pod``) and the
mover Pods (``mover_pods``).
"""
