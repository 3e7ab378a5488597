"""Key exchanges in the middle of work, against the real sshd of both clusters: paramiko
rekeys every 512 MiB received (here every 64 KiB), and channels that the server closes during
an exchange once hung the connection for 30 s and killed it ("Key-exchange timed out waiting
for key negotiation", ``hooks.ssh.transport``). A transfer through one exec channel and many
short commands beside it go on across exchanges, with AES-GCM as the cipher."""

from __future__ import annotations

import hashlib

from hooks.deadline import Deadline
from hooks.ssh import channels
from hooks.ssh.client import Target
from hooks.ssh.login import connect
from tests.integration.conftest import Cluster
from tests.integration.test_ssh_route import login

REKEY_EVERY = 64 * 1024


def test_channels_closing_during_key_exchanges_never_hang_the_connection(
        cluster: Cluster) -> None:
    conn = connect(Target(cluster.host, cluster.port), login(cluster, cluster.known_hosts),
                   deadline=Deadline.after(20))
    try:
        assert conn.transport.remote_cipher == "aes128-gcm@openssh.com"
        conn.transport.packetizer.REKEY_BYTES = REKEY_EVERY
        for _ in range(100):
            done = conn.run(["head", "-c", "70000", "/dev/zero"], deadline=Deadline.after(20))
            assert done.stdout == bytes(70000)
        script = "head -c 20000000 /dev/zero; echo done >&2"
        with channels.reading(conn, ["sh", "-c", script], what="a stream") as chunks:
            digest = hashlib.sha256()
            for chunk in chunks:
                digest.update(chunk)
        assert digest.hexdigest() == hashlib.sha256(bytes(20_000_000)).hexdigest()
    finally:
        conn.close()
