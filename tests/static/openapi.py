"""docs/hooks-openapi.yaml's BatchJobSpec and BatchJobStatus, generated from crds/batchjob.yaml.

``make openapi`` (``python -m tests.static.openapi``) writes them into the document in place of
the old ones and leaves the rest of it as it is; tests/fuzz/test_hooks_openapi.py checks that
the document holds what this writes.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.static.admission import batchjob_crd, crd_schema
from tests.static.kube import REPO, Object, to_openapi

DOCUMENT = REPO / "docs/hooks-openapi.yaml"
SCHEMAS = {"BatchJobSpec": "spec", "BatchJobStatus": "status"}
"""The document's schemas generated from the CRD, by the CRD field each is."""
INDENT = " " * 4
"""The indentation of the document's components.schemas entries."""
BLOCKS = re.compile("".join(rf"^{INDENT}{name}:\n(?:(?:{INDENT}  .*)?\n)*" for name in SCHEMAS),
                    re.MULTILINE)
WIDTH = 92


class BlockDumper(yaml.SafeDumper):
    """Block YAML whose lists are indented under their key, as the document writes them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> Any:
        return super().increase_indent(flow, False)


def batchjob_schemas() -> Object:
    root = crd_schema(batchjob_crd())
    return {name: to_openapi(root["properties"][field]) for name, field in SCHEMAS.items()}


def rendered() -> str:
    text = yaml.dump(batchjob_schemas(), Dumper=BlockDumper, sort_keys=False,
                     width=WIDTH - len(INDENT), allow_unicode=True)
    return "".join(INDENT + line if line.strip() else line
                   for line in text.splitlines(keepends=True))


def with_schemas(document: str) -> str:
    """The document with its BatchJobSpec and BatchJobStatus generated from the CRD."""
    if not BLOCKS.search(document):
        raise ValueError(f"{DOCUMENT.name}: no {' and '.join(SCHEMAS)} one after the other "
                         "under components.schemas")
    return BLOCKS.sub(lambda _: rendered(), document, count=1)


def main() -> None:
    DOCUMENT.write_text(with_schemas(DOCUMENT.read_text()))


if __name__ == "__main__":
    main()
