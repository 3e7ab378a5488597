"""Where a BatchJob runs: BatchClusters (``batchcluster``) and their limits (``limits``), the
route a BatchJob takes (``routing``), label selectors (``selector``) and the login Secret
(``secret``).
"""
