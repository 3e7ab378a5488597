"""The image registry, asked over the OCI distribution API which manifest digest a reference
names and what its image's config says, before the cluster pulls the image by that digest.

A BatchJob chooses the registry, so the hook server must not become its way into the cluster's
network. Unless the route's BatchCluster lists the registry (``host[:port]`` as the reference
writes it) in ``spec.containers.allowedRegistries``, the registry's host, a Bearer realm's host
and every redirect's host meet the object stores' rules (``hooks.core.spec.endpoints``): by
name before any request, and by the address each connection is actually made to, checked
right after the TCP connection and before TLS, as the movers check theirs
(``hooks.pods.movers.peer``), so that a public name that resolves inward — now, or at the
next lookup — is caught too. A listed registry is asked wherever it is, and so are its realm
and its redirects while they stay on its host; elsewhere the rules hold again.

Every answer is read with care: HTTPS only, with the certificate verified (``ca_bundle`` adds
authorities); no proxy or ``.netrc`` from the environment; bodies streamed and capped;
redirects followed by hand, each hop checked; the manifest's bytes hashed against the digest
the registry claims and the one the reference pins, the config's against the manifest's.
What goes wrong is a ``RegistryError`` whose sentence says what the registry answered, for
the BatchJob's status: never a credential, never a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import SplitResult, urlencode, urljoin, urlunsplit

import requests

from hooks.core.sites.pull_secrets import PULL_SECRETS
from hooks.core.spec import endpoints, manifests
from hooks.core.spec.manifests import Challenge, Platform
from hooks.core.values.fields import SpecError
from hooks.core.values.image import DIGEST, ImageConfig, ImageRef, Transport
from hooks.core.values.text import readable
from hooks.registry.answers import (
    Answer,
    RegistryError,
    answer_text,
    cause,
    inward,
    split_url,
    unreadable,
)
from hooks.registry.public import Adapter, Inward, tls_context

ALLOW = "the BatchCluster lists it in spec.containers.allowedRegistries"
MAX_TOKEN_ANSWER = 64 * 1024
MAX_REDIRECTS = 3
CHUNK = 64 * 1024
REDIRECTS = frozenset({301, 302, 303, 307, 308})
RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})
AUTHORIZATION = "Authorization"


@dataclass(frozen=True, slots=True)
class Resolved:
    """The manifest digest a reference names (the platform's manifest, for an index), and
    its image's config (empty for an ``oras://`` artifact)."""

    digest: str
    config: ImageConfig


def resolve(ref: ImageRef, credentials: tuple[str, str] | None, *, allowed: Collection[str],
            timeout: float, ca_bundle: str | None = None,
            platform: Platform = ("linux", "amd64")) -> Resolved:
    """Ask ``ref``'s registry, with ``credentials`` when it asks for a login, within
    ``timeout`` seconds in all. ``allowed`` are the registries asked whatever their address;
    ``ca_bundle`` a PEM file of authorities trusted besides the system's."""
    client = _Client(ref, credentials, allowed, time.monotonic() + timeout, ca_bundle)
    with client.session:
        body, kind, digest = client.manifest(ref.digest or ref.tag)
        if kind in manifests.INDEXES:
            with unreadable(ref):
                chosen = manifests.pick_manifest(body, platform)
            body, kind, digest = client.manifest(chosen)
            if kind not in manifests.MANIFESTS:
                raise RegistryError(f"Registry {ref.registry} lists, for {'/'.join(platform)} "
                                    f"of {client.name}, an index instead of a manifest.",
                                    retryable=False)
        if ref.transport is Transport.ORAS:
            return Resolved(digest, ImageConfig())
        return Resolved(digest, client.config(body))


class _Client:
    """One resolution's requests: the session, the login once the registry asked for one,
    and the rules every URL meets before it is asked."""

    def __init__(self, ref: ImageRef, credentials: tuple[str, str] | None,
                 allowed: Collection[str], deadline: float, ca_bundle: str | None) -> None:
        self.ref, self.credentials, self.deadline = ref, credentials, deadline
        self.api = manifests.docker_hub_api(ref.registry)
        self.host = split_url(f"https://{self.api}/", f"Registry {ref.registry}").hostname
        self.trusted = ref.registry in {registry.lower() for registry in allowed}
        self.name = f"{ref.repository}@{ref.digest}" if ref.digest else (
            f"{ref.repository}:{ref.tag}")
        self.authorization = ""
        context = tls_context(ca_bundle)
        self.plain = Adapter(context, public=False)
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers["Accept-Encoding"] = "identity"
        self.session.mount("https://", Adapter(context, public=True))

    def manifest(self, reference: str) -> tuple[bytes, str, str]:
        """The manifest or index ``reference`` (a tag or a digest) names: its bytes, its media
        type and its digest, checked against the registry's claim and a pinned digest."""
        pinned = DIGEST.fullmatch(reference) is not None
        what = f"manifest {self.ref.repository}{'@' if pinned else ':'}{reference}"
        answer = self.ask(f"manifests/{reference}", manifests.accept_header(),
                          manifests.MAX_DOCUMENT, what)
        with unreadable(self.ref):
            kind = manifests.media_type(answer.body, answer.headers.get("Content-Type", ""))
        computed = "sha256:" + hashlib.sha256(answer.body).hexdigest()
        digest = reference if pinned else computed
        claimed = answer.headers.get("Docker-Content-Digest", "")
        for expected in dict.fromkeys(d for d in (digest, claimed) if d and d != computed):
            self.verify(answer.body, expected, what)
        return answer.body, kind, digest

    def config(self, manifest: bytes) -> ImageConfig:
        """The config of the image ``manifest`` describes, read from its blob."""
        with unreadable(self.ref):
            digest, kind = manifests.config_digest(manifest)
        if kind not in manifests.IMAGE_CONFIGS:
            hint = "; write it as oras://" if kind == manifests.SIF_CONFIG else ""
            raise RegistryError(f"{self.name} at registry {self.ref.registry} is an artifact "
                                f"of type {readable(kind, 80)}, not a container image{hint}.",
                                retryable=False)
        what = f"config {digest} of {self.ref.repository}"
        answer = self.ask(f"blobs/{digest}", "application/json, */*", manifests.MAX_DOCUMENT,
                          what)
        self.verify(answer.body, digest, what)
        with unreadable(self.ref):
            return manifests.parse_config(answer.body)

    def verify(self, body: bytes, digest: str, what: str) -> None:
        """Refuse ``body`` unless it hashes to ``digest``."""
        algorithm, _, expected = digest.partition(":")
        if not DIGEST.fullmatch(digest) or hashlib.new(algorithm, body).hexdigest() != expected:
            raise RegistryError(f"Registry {self.ref.registry} sent {what} in bytes that do "
                                f"not match the digest {readable(digest, 80)}.", retryable=False)

    def ask(self, path: str, accept: str, limit: int, what: str) -> Answer:
        """The registry's 200 answer to ``GET /v2/<repository>/<path>``, logged in first when
        it asks for a login."""
        url = f"https://{self.api}/v2/{self.ref.repository}/{path}"
        answer = self.fetch(url, f"Registry {self.ref.registry}", self.headers(accept), limit)
        if answer.status == 401 and not self.authorization:
            self.authorization = self.login(answer)
            answer = self.fetch(url, f"Registry {self.ref.registry}", self.headers(accept),
                                limit)
        if answer.status != 200:
            raise self.refusal(answer, what)
        return answer

    def headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.authorization:
            headers[AUTHORIZATION] = self.authorization
        return headers

    def login(self, answer: Answer) -> str:
        """The ``Authorization`` the registry's challenge asks for: the credentials for Basic,
        a token of the realm for Bearer (asked with the credentials when there are some)."""
        with unreadable(self.ref):
            challenge = manifests.parse_challenge(answer.headers.get("WWW-Authenticate", ""))
        if challenge.scheme == "bearer":
            return f"Bearer {self.token(challenge)}"
        if self.credentials is None:
            raise self.refusal(answer, "")
        return _basic(self.credentials)

    def token(self, challenge: Challenge) -> str:
        """A pull token for the repository from the challenge's token service."""
        what = f"The token service of registry {self.ref.registry}"
        realm = split_url(challenge.realm, what)
        query = {"scope": f"repository:{self.ref.repository}:pull"}
        if challenge.service:
            query["service"] = challenge.service
        url = urlunsplit(realm._replace(
            query="&".join(filter(None, (realm.query, urlencode(query)))), fragment=""))
        headers = {"Accept": "application/json"}
        if self.credentials is not None:
            headers[AUTHORIZATION] = _basic(self.credentials)
        answer = self.fetch(url, what, headers, MAX_TOKEN_ANSWER)
        if answer.status == 401:
            raise self.refusal(answer, "a pull token")
        if answer.status != 200:
            raise RegistryError(f"{what} ({realm.hostname}) answered {answer_text(answer)}.",
                                retryable=answer.status in RETRYABLE)
        with unreadable(self.ref):
            return manifests.bearer_token(answer.body)

    def fetch(self, url: str, what: str, headers: dict[str, str], limit: int) -> Answer:
        """``GET url`` following at most ``MAX_REDIRECTS`` redirects, each hop admitted
        first; the ``Authorization`` goes to the first hop's host only."""
        origin = split_url(url, what).netloc
        for _ in range(MAX_REDIRECTS + 1):
            parts = self.admit(url, what)
            sent = headers if parts.netloc == origin else {
                name: value for name, value in headers.items() if name != AUTHORIZATION}
            answer = self.send(url, what, sent, limit)
            if answer.status not in REDIRECTS:
                return answer
            url = urljoin(url, answer.headers.get("Location", ""))
            what = (f"A redirect of registry {self.ref.registry} to "
                    f"{readable(str(split_url(url, what).hostname), 100)}")
        raise RegistryError(f"Registry {self.ref.registry} redirected more than "
                            f"{MAX_REDIRECTS} times.", retryable=False)

    def admit(self, url: str, what: str) -> SplitResult:
        """``url``'s parts when the hook server may ask it: an HTTPS URL, of a public host
        unless it is on the host of a listed registry."""
        parts = split_url(url, what)
        if parts.scheme != "https" or "@" in parts.netloc or not parts.hostname:
            raise RegistryError(f"{what} leads to a URL that is not https:// and a host; the "
                                "hook server asks registries over HTTPS only.", retryable=False)
        if self.trusted and parts.hostname == self.host:
            self.session.mount(f"https://{parts.netloc.lower()}/", self.plain)
            return parts
        try:
            endpoint = endpoints.parse(f"https://{parts.netloc}", what)
        except SpecError as err:
            raise RegistryError(str(err), retryable=False) from None
        if endpoints.refusal(endpoint, what):
            raise RegistryError(f"{what} is at {inward(endpoint.host)}; the hook server asks a "
                                f"registry that is not public only when {ALLOW}.",
                                retryable=False)
        return parts

    def send(self, url: str, what: str, headers: dict[str, str], limit: int) -> Answer:
        """One ``GET``, its body read up to ``limit`` bytes within the deadline."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RegistryError(f"Registry {self.ref.registry} did not answer in time.",
                                retryable=True)
        try:
            with self.session.get(url, headers=headers, timeout=left, stream=True,
                                  allow_redirects=False) as response:
                status = response.status_code
                body = b"" if status in REDIRECTS else self.read(response, what, limit)
                return Answer(status, response.headers, body)
        except Inward as err:
            raise RegistryError(f"{what} is at the {err.kind} address {err.address}; the hook "
                                f"server asks a registry that is not public only when {ALLOW}.",
                                retryable=False) from None
        except requests.Timeout:
            raise RegistryError(f"{what} did not answer in time.", retryable=True) from None
        except requests.exceptions.SSLError:
            raise RegistryError(f"{what}'s TLS certificate could not be verified.",
                                retryable=False) from None
        except requests.RequestException as err:
            raise RegistryError(f"{what} could not be reached{cause(err)}.",
                                retryable=True) from None

    def read(self, response: requests.Response, what: str, limit: int) -> bytes:
        """The body of ``response``, refused past ``limit`` bytes or past the deadline."""
        declared = response.headers.get("Content-Length", "")
        body = bytearray()
        too_large = RegistryError(f"{what} answered more than {limit // 1024} KiB.",
                                  retryable=False)
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        while chunk := response.raw.read1(CHUNK):
            body += chunk
            if len(body) > limit:
                raise too_large
            if time.monotonic() > self.deadline:
                raise RegistryError(f"{what} answered too slowly.", retryable=True)
        return bytes(body)

    def refusal(self, answer: Answer, what: str) -> RegistryError:
        """What the registry's answer other than 200 to a request for ``what`` says, as the
        BatchJob's status says it."""
        detail = answer_text(answer)
        registry, repository = self.ref.registry, self.ref.repository
        if answer.status == 401 and self.credentials is not None:
            return RegistryError(f"Registry {registry} refused the credentials for {repository} "
                                 f"({detail}).", retryable=False)
        if answer.status == 401:
            return RegistryError(f"Registry {registry} asks for a login to pull {repository} "
                                 f"({detail}); name a Secret that holds one in "
                                 f"{PULL_SECRETS}.", retryable=False)
        if answer.status == 404:
            return RegistryError(f"Registry {registry} has no {what} ({detail}).",
                                 retryable=False)
        return RegistryError(f"Registry {registry} answered {detail} when asked for {what}.",
                             retryable=answer.status in RETRYABLE)


def _basic(credentials: tuple[str, str]) -> str:
    user, password = credentials
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
