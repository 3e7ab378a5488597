"""Where a BatchJob runs: BatchClusters (``batchcluster``) and their limits (``limits``), the
route a BatchJob takes (``routing``), label selectors (``selector``), the login Secret
(``secret``) and the OpenSSH texts it holds (``openssh``).
"""
