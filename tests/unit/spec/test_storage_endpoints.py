"""``spec.storage.s3.endpoint`` leads to a public store unless an allow-list names it: every
spelling of an inward address and every cluster-internal name is refused (``InvalidSpec``, one
sentence naming the field), public names and addresses are accepted, and an endpoint exactly on
the installation's list (``HPCBRIDGE_S3_ENDPOINTS``) or on the BatchCluster's
(``spec.storage.allowedEndpoints``, for the BatchJobs routed through it) is accepted whatever
its address, its mover Pods told so (``--endpoint-allowed``)."""

from __future__ import annotations

import copy
import ipaddress
from dataclasses import replace
from typing import Any

import pytest

from hooks.core.decide import sync
from hooks.core.sites.batchcluster import SiteError, parse_site
from hooks.core.sites.routing import parse_routed
from hooks.core.spec import endpoints
from hooks.core.spec.batchjob import digest, parse
from hooks.core.spec.endpoints import Endpoint, address_kind
from hooks.core.values.fields import SpecError
from hooks.core.values.job import JobRequest
from hooks.core.values.reasons import Reason
from hooks.core.wire import mover_pods
from hooks.core.wire.request import Policy, parse_call
from hooks.schedulers.registry import REGISTRY
from hooks.settings import Settings
from tests.unit.builders import HOST_KEY, SUBMITTED, drive, request
from tests.unit.conftest import NOW, POLICY, UID, raw_spec

FIELD = "spec.storage.s3.endpoint"
INPUTS = [{"s3": {"bucket": "data", "key": "runs/42/params.json"}, "path": "params.json"}]


def storage(endpoint: str) -> dict[str, Any]:
    return {"s3": {"endpoint": endpoint, "secretRef": {"name": "s3-creds"}}}


def parsed(endpoint: str, allowed: tuple[Endpoint, ...] = ()) -> Any:
    return parse(raw_spec(storage=storage(endpoint), inputs=INPUTS), REGISTRY,
                 endpoints=allowed)


def allow(*urls: str) -> tuple[Endpoint, ...]:
    return endpoints.parse_list(urls, "test")


REFUSED = {
    # Cloud metadata, loopback and the other addresses that are not global unicast.
    "metadata": "http://169.254.169.254",
    "metadata-port": "http://169.254.169.254:80/",
    "loopback": "http://127.0.0.1:9000",
    "loopback-elsewhere": "https://127.8.9.10",
    "private-10": "http://10.0.0.5:9000",
    "private-172": "https://172.16.3.4",
    "private-192": "http://192.168.1.20:9000",
    "cgnat": "http://100.64.1.1",
    "unspecified": "http://0.0.0.0:9000",
    "this-network": "http://0.1.2.3",
    "multicast": "http://224.0.0.1",
    "reserved": "http://240.0.0.1",
    "broadcast": "http://255.255.255.255",
    "documentation": "http://192.0.2.10",
    "benchmarking": "http://198.18.0.1",
    "ietf-protocol": "http://192.0.0.9",
    "ipv6-loopback": "http://[::1]:9000",
    "ipv6-unspecified": "http://[::]",
    "ipv6-link-local": "http://[fe80::1]",
    "ipv6-unique-local": "http://[fd12:3456::1]",
    "ipv6-site-local": "http://[fec0::1]",
    "ipv6-multicast": "http://[ff02::1]",
    "ipv6-documentation": "http://[2001:db8::1]",
    "ipv4-mapped-loopback": "http://[::ffff:127.0.0.1]",
    "ipv4-mapped-metadata": "http://[::ffff:169.254.169.254]",
    "ipv4-mapped-private": "http://[::ffff:10.1.2.3]",
    "ipv4-compatible": "http://[::7f00:1]",
    "nat64-metadata": "http://[64:ff9b::a9fe:a9fe]",
    "6to4-loopback": "http://[2002:7f00:1::]",
    # Numeric spellings other than a.b.c.d, which the resolver reads as addresses.
    "decimal": "http://2130706433",
    "hex": "http://0x7f000001",
    "hex-metadata": "http://0xa9fea9fe",
    "octal": "http://0177.0.0.1",
    "short": "http://127.1",
    "short-three": "http://127.0.1",
    "mixed": "http://0x7f.1",
    "leading-zero": "http://127.000.000.001",
    "trailing-dot": "http://127.0.0.1.",
    "trailing-dot-public": "http://8.8.8.8.",
    "five-parts": "http://1.2.3.4.5",
    "hex-last-label": "http://store.0x1",
    "mapped-in-hex": "http://[::ffff:7f00:1]",
    "ipv6-leading-zeros": "http://[0:0:0:0:0:0:0:1]",
    "ipv6-not-compressed": "http://[2606:4700:4700:0:0:0:0:1111]",
    # The cluster's own names.
    "localhost": "http://localhost:9000",
    "localhost-dot": "http://localhost.",
    "kubernetes": "https://kubernetes",
    "kubernetes-default": "https://kubernetes.default",
    "kubernetes-default-svc": "https://kubernetes.default.svc",
    "kubernetes-fqdn": "https://kubernetes.default.svc.cluster.local",
    "service-in-kube-system": "http://metrics.kube-system",
    "single-label": "http://minio:9000",
    "single-label-upper": "http://MINIO:9000",
    "svc": "http://minio.storage.svc:9000",
    "cluster-local": "http://minio.storage.svc.cluster.local:9000",
    "mdns": "http://store.local",
    "internal": "http://metadata.google.internal",
    "ec2-internal": "http://instance-data.ec2.internal",
    "sub-localhost": "http://a.localhost",
    "localdomain": "http://localhost.localdomain",
    "home-arpa": "http://nas.home.arpa",
}


@pytest.mark.parametrize("endpoint", REFUSED.values(), ids=REFUSED.keys())
def test_inward_endpoints_are_invalid_specs_naming_the_field(endpoint: str) -> None:
    found = parsed(endpoint)
    assert found.spec is None and found.reason is Reason.INVALID_SPEC
    assert found.error.startswith(FIELD), found.error
    assert found.error.count(". ") == 0 and found.error.endswith("."), found.error


@pytest.mark.parametrize(("endpoint", "said"), [
    ("http://169.254.169.254", "link-local address 169.254.169.254"),
    ("http://[::ffff:127.0.0.1]", "IPv4-mapped loopback address ::ffff:127.0.0.1"),
    ("http://2130706433", "reads it as 127.0.0.1"),
    ("http://0x7f000001", "reads it as 127.0.0.1"),
    ("http://0177.0.0.1", "reads it as 127.0.0.1"),
    ("http://127.1", "reads it as 127.0.0.1"),
    ("http://[::ffff:7f00:1]", "[::ffff:127.0.0.1]"),
    ("http://minio:9000", "single-label name 'minio'"),
    ("https://kubernetes.default", "cluster-internal name 'kubernetes.default'"),
])
def test_the_sentence_says_what_the_endpoint_names(endpoint: str, said: str) -> None:
    assert said in parsed(endpoint).error


ACCEPTED = {
    "name": "https://s3.example.org",
    "name-port": "http://s3.site:9000",
    "name-trailing-slash": "https://s3.eu-west-1.amazonaws.com/",
    "name-absolute": "https://s3.example.org.",
    "numeric-labels-inside": "https://10.0.0.5.nip.example.com",
    "ipv4-public": "https://8.8.8.8",
    "ipv4-public-port": "http://203.0.114.7:9000",
    "ipv6-public": "https://[2606:4700:4700::1111]",
    "ipv4-mapped-public": "https://[::ffff:8.8.8.8]",
}


@pytest.mark.parametrize("endpoint", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_public_names_and_addresses_are_accepted(endpoint: str) -> None:
    found = parsed(endpoint)
    assert found.spec is not None, found.error
    assert found.spec.storage.endpoint == endpoint.rstrip("/")
    assert found.spec.storage.allowed is False


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.1:9000", "http://10.0.0.5:9000", "http://minio:9000",
    "https://minio.storage.svc.cluster.local:9000", "http://[fd12:3456::1]:9000",
    "http://169.254.169.254",
])
def test_an_endpoint_on_an_allow_list_is_accepted_whatever_its_address(endpoint: str) -> None:
    found = parsed(endpoint, allow("https://s3.example.org", endpoint))
    assert found.spec is not None, found.error
    assert found.spec.storage.allowed is True


@pytest.mark.parametrize(("listed", "named"), [
    ("http://10.0.0.5:9000", "http://10.0.0.5:9001"),
    ("http://10.0.0.5:9000", "https://10.0.0.5:9000"),
    ("http://10.0.0.5:9000", "http://10.0.0.6:9000"),
    ("http://minio:9000", "http://minio.storage.svc:9000"),
    ("https://minio.lan", "http://minio.lan"),
    ("https://minio.lan", "https://minio.lan:80"),
])
def test_only_exactly_the_listed_scheme_host_and_port(listed: str, named: str) -> None:
    assert parsed(named, allow(listed)).spec is None


@pytest.mark.parametrize(("listed", "named"), [
    ("https://minio.lan", "https://minio.lan:443"),
    ("http://MinIO.lan:80", "http://minio.lan"),
    ("http://minio.lan:80/", "http://minio.lan/"),
    ("http://[fd12:3456::1]:9000", "http://[FD12:3456::1]:9000"),
])
def test_the_schemes_port_and_the_hosts_case_do_not_matter(listed: str, named: str) -> None:
    assert parsed(named, allow(listed)).spec is not None


@pytest.mark.parametrize("listed", ["http://0x7f000001:9000", "http://127.1:9000",
                                    "http://[::ffff:7f00:1]", "minio:9000", "http://a/b",
                                    "ftp://minio", "http://minio:0"])
def test_an_allow_list_entry_is_an_endpoint_in_its_canonical_spelling(listed: str) -> None:
    with pytest.raises(SpecError):
        allow(listed)


def test_the_mover_pods_are_told_when_the_endpoint_is_allowed() -> None:
    def args(endpoint: str, allowed: tuple[Endpoint, ...] = ()) -> list[str]:
        spec = parsed(endpoint, allowed).spec
        pod = mover_pods.inputs_pod(JobRequest("research", "sim", UID, 1, spec, 120), image="i")
        (container,) = pod["spec"]["containers"]
        return container["args"]  # type: ignore[no-any-return]

    assert "--endpoint-allowed" not in args("https://s3.example.org")
    assert "--endpoint-allowed" in args("http://10.0.0.5:9000", allow("http://10.0.0.5:9000"))
    listed_public = args("https://s3.example.org", allow("https://s3.example.org"))
    assert "--endpoint-allowed" in listed_public


def test_the_allowance_does_not_change_the_attempt() -> None:
    """Whether a store is allowed is the platform team's to edit: not part of the digest."""
    on = parsed("https://s3.example.org", allow("https://s3.example.org"))
    off = parsed("https://s3.example.org")
    assert on.spec != off.spec and on.digest == off.digest == digest(on.spec)


# The installation's list, through a whole sync call.

def sync_with(policy: Policy, endpoint: str) -> Any:
    body = request({"storage": storage(endpoint), "inputs": INPUTS})
    call = parse_call(copy.deepcopy(body), rules=REGISTRY, policy=policy, now=NOW)
    return drive(sync.decide(call), SUBMITTED)


def test_a_sync_refuses_the_metadata_service_and_starts_no_mover() -> None:
    run = sync_with(POLICY, "http://169.254.169.254")
    assert (run.status["phase"], run.status["reason"]) == ("Failed", "InvalidSpec")
    assert FIELD in run.status["message"] and "169.254.169.254" in run.status["message"]
    assert run.answer.body["children"] == [] and "Submit" not in run.kinds


def test_the_installations_list_allows_its_store() -> None:
    policy = replace(POLICY, s3_endpoints=allow("http://10.0.0.5:9000"))
    run = sync_with(policy, "http://10.0.0.5:9000")
    assert (run.status["phase"], run.status["reason"]) == ("Pending", "StagingInputs")
    (pod,) = run.answer.body["children"]
    assert "--endpoint-allowed" in pod["spec"]["containers"][0]["args"]
    refused = sync_with(policy, "http://10.0.0.6:9000")
    assert (refused.status["phase"], refused.status["reason"]) == ("Failed", "InvalidSpec")


def test_the_settings_read_the_list() -> None:
    settings = Settings.from_env(
        {"HPCBRIDGE_S3_ENDPOINTS": " http://127.0.0.1:2333, https://minio.site.example:9000,"})
    assert settings.s3_endpoints == (Endpoint("http", "127.0.0.1", 2333),
                                     Endpoint("https", "minio.site.example", 9000))
    assert Settings().s3_endpoints == ()
    for wrong in ("http://0x7f000001", "minio:9000", "http://a/b"):
        with pytest.raises(ValueError, match="HPCBRIDGE_S3_ENDPOINTS"):
            Settings.from_env({"HPCBRIDGE_S3_ENDPOINTS": wrong})


# A BatchCluster's list, for the BatchJobs routed through it.

SITE: dict[str, Any] = {
    "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
    "metadata": {"name": "hpc-a"},
    "spec": {"backend": "slurm", "host": "login.hpc", "knownHosts": f"login.hpc {HOST_KEY}\n",
             "namespaceSelector": {},
             "storage": {"allowedEndpoints": ["https://minio.site.example:9000",
                                              "http://10.20.0.7:9000"]}},
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}}


def routed(endpoint: str, *, site: dict[str, Any] = SITE, on_site: bool = True,
           installation: tuple[Endpoint, ...] = ()) -> Any:
    spec = (raw_spec(storage=storage(endpoint), inputs=INPUTS) if not on_site else {
        "cluster": {"name": "hpc-a", "secretRef": {"name": "login"}},
        "script": "#!/bin/sh\ntrue\n", "storage": storage(endpoint), "inputs": INPUTS})
    return parse_routed(spec, REGISTRY, sites={"hpc-a": site}, namespace=NAMESPACE, direct=True,
                        endpoints=installation)


def test_a_batchclusters_list_allows_its_stores_to_its_batchjobs_only() -> None:
    assert parse_site(SITE, REGISTRY).endpoints == allow("https://minio.site.example:9000",
                                                         "http://10.20.0.7:9000")
    for endpoint in ("https://minio.site.example:9000", "http://10.20.0.7:9000"):
        found = routed(endpoint)
        assert found.spec is not None and found.spec.storage.allowed, found.error
    direct = routed("http://10.20.0.7:9000", on_site=False)
    assert direct.spec is None and direct.error.startswith(FIELD)
    other = routed("http://10.20.0.8:9000")
    assert other.spec is None and other.reason is Reason.INVALID_SPEC


def test_either_list_allows() -> None:
    installation = allow("http://10.9.9.9:9000")
    assert routed("http://10.9.9.9:9000", installation=installation).spec is not None
    assert routed("http://10.20.0.7:9000", installation=installation).spec is not None
    assert routed("http://10.9.9.9:9000", on_site=False,
                  installation=installation).spec is not None


@pytest.mark.parametrize(("storage_field", "said"), [
    ({"allowedEndpoints": ["http://0x7f000001:9000"]}, "spec.storage.allowedEndpoints[0]"),
    ({"allowedEndpoints": ["https://ok.example", "minio"]}, "spec.storage.allowedEndpoints[1]"),
    ({"allowedEndpoints": "http://minio:9000"}, "spec.storage.allowedEndpoints"),
    ({"allowedEndpoints": [f"http://s{i}.example" for i in range(33)]},
     "spec.storage.allowedEndpoints"),
    ({"allowed": ["http://minio:9000"]}, "spec.storage"),
    ("everything", "spec.storage"),
])
def test_a_batchcluster_with_a_wrong_list_is_invalid(storage_field: object, said: str) -> None:
    site = copy.deepcopy(SITE)
    site["spec"]["storage"] = storage_field
    with pytest.raises(SiteError, match=r"BatchCluster hpc-a is invalid: ") as caught:
        parse_site(site, REGISTRY)
    assert said in str(caught.value)
    found = routed("https://s3.example.org", site=site)
    assert found.reason is Reason.INVALID_BATCH_CLUSTER


# What the mover checks the connected peer against.

@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "loopback"), ("169.254.169.254", "link-local"), ("10.1.2.3", "private"),
    ("100.64.0.1", "shared (carrier-grade NAT)"), ("0.0.0.0", "unspecified"),
    ("::1", "loopback"), ("fe80::1", "link-local"), ("fd00::1", "unique-local"),
    ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64-translated link-local"),
    ("8.8.8.8", ""), ("2606:4700:4700::1111", ""), ("::ffff:8.8.8.8", ""),
])
def test_address_kinds(address: str, kind: str) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind
