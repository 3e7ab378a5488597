"""Where a BatchJob runs: BatchClusters (``batchcluster``), the route a BatchJob takes
(``routing``), label selectors (``selector``) and the login Secret (``secret``).
"""
