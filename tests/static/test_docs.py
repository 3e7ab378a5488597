"""The README and docs/batchjob-api.md: their local links resolve, every field the API doc
shows is one the CRD declares, the README's first BatchJob names an example BatchCluster, and
the API doc lists the conditions as its status shows them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.static.admission import batchjob_crd, crd_schema
from tests.static.install import README
from tests.static.kube import REPO, Object, load_all

API_DOC = REPO / "docs/batchjob-api.md"


def api_doc_block(top_key: str) -> Object:
    """The API doc's YAML block that holds ``top_key`` (the example BatchJob or the status)."""
    blocks = re.findall(r"```yaml\n(.*?)```", API_DOC.read_text(), re.DOTALL)
    return next(block[top_key] for block in map(yaml.safe_load, blocks) if top_key in block)


def undeclared(value: Any, schema: Object, path: str) -> Iterator[str]:
    """Paths in ``value`` that ``schema`` does not declare; the doc's ``...`` elisions skipped."""
    if isinstance(value, list):
        for item in value:
            yield from undeclared(item, schema["items"], f"{path}[]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "...":
                continue
            sub = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if sub is None:
                yield f"{path}.{key}"
            else:
                yield from undeclared(item, sub, f"{path}.{key}")


@pytest.mark.parametrize("section", ["spec", "status"])
def test_crd_declares_every_api_doc_field(section: str) -> None:
    schema = crd_schema(batchjob_crd())["properties"][section]
    assert list(undeclared(api_doc_block(section), schema, section)) == []


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("document", [README, API_DOC], ids=["README", "api-doc"])
def test_local_links_resolve(document: Path) -> None:
    """Every link to a file of the repository names one that exists, and a heading of it that
    exists (the site features' links to their examples and API doc sections among them)."""
    text = document.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), target
        if anchor:
            assert anchor in heading_anchors(linked.read_text()), target


def test_status_fields_are_the_api_doc_ones_plus_retries_and_cluster() -> None:
    declared = crd_schema(batchjob_crd())["properties"]["status"]["properties"]
    assert set(declared) == set(api_doc_block("status")) | {"retries", "cluster"}


def test_the_readmes_first_batchjob_names_an_example_batchcluster() -> None:
    """The site it runs on is one examples/sites/ defines, for the namespace it is in."""
    block = re.search(r"```yaml\n(.*?)```", README.read_text(), re.DOTALL)
    assert block is not None
    batchjob = yaml.safe_load(block.group(1))
    sites = {doc["metadata"]["name"]: doc for path in sorted((REPO / "examples/sites").glob("*"))
             for doc in load_all(path) if doc["kind"] == "BatchCluster"}
    site = sites[batchjob["spec"]["cluster"]["name"]]
    assert "backend" not in batchjob["spec"]  # the BatchCluster's
    assert site["spec"]["namespaceSelector"]["matchLabels"]


def test_the_conditions_are_listed_as_the_status_shows_them() -> None:
    """The sentence on conditions names every type, in the order of the status example."""
    types = [condition["type"] for condition in api_doc_block("status")["conditions"]]
    sentence = re.search(r"\*\*Conditions\*\* are always (.*?);", API_DOC.read_text(),
                         re.DOTALL)
    assert sentence is not None
    assert re.findall(r"`(\w+)`", sentence.group(1)) == types
