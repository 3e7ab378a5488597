"""SSH to login and submit nodes: the only package that imports paramiko."""
