"""Every whole BatchJob the documents show (README.md and docs/) is one the API server accepts:
the CRD's schema, strict (so no undeclared field), and its CEL rules. A partial snippet is not
a whole BatchJob; only blocks with apiVersion, kind, metadata and spec are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.static.admission import batchjob_violations

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
WHOLE = {"apiVersion", "kind", "metadata", "spec"}


def batchjobs(document: Path) -> list[tuple[str, dict[str, Any]]]:
    """The whole BatchJobs of a document's ```yaml blocks, by block number."""
    found = []
    blocks = re.findall(r"```yaml\n(.*?)```", document.read_text(), re.DOTALL)
    for number, block in enumerate(blocks, 1):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and doc.get("kind") == "BatchJob" and set(doc) >= WHOLE:
            found.append((f"{document.relative_to(REPO)}#{number}", doc))
    return found


EXAMPLES = [pytest.param(doc, id=name) for path in DOCUMENTS for name, doc in batchjobs(path)]


def test_the_api_doc_and_the_readme_show_whole_batchjobs() -> None:
    names = {param.id for param in EXAMPLES}
    assert any(str(name).startswith("docs/batchjob-api.md#") for name in names)
    assert any(str(name).startswith("README.md#") for name in names)


@pytest.mark.parametrize("batchjob", EXAMPLES)
def test_documented_batchjob_is_accepted(batchjob: dict[str, Any]) -> None:
    assert batchjob["apiVersion"] == "hpcbridge.io/v1alpha1"
    assert batchjob_violations(batchjob) == []
