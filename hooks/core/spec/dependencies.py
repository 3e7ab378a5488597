"""``spec.dependsOn`` and ``spec.dependencyGracePeriodSeconds``: the BatchJobs of the namespace
an attempt waits for, each with its condition, and how long one may not exist yet. Pure: no I/O.
"""

from __future__ import annotations

from hooks.core.spec.layout import DNS_SUBDOMAIN
from hooks.core.values.fields import INT32, SpecError, mapping, whole_number
from hooks.core.values.job import DEPENDENCY_GRACE_SECONDS, Condition, Dependency
from hooks.core.values.text import shown

MAX_DEPENDENCIES = 32


def depends_on(raw: object) -> tuple[Dependency, ...]:
    """``spec.dependsOn``: at most ``MAX_DEPENDENCIES`` BatchJobs, each named once."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_DEPENDENCIES:
        raise SpecError(f"spec.dependsOn must be a list of at most {MAX_DEPENDENCIES} BatchJobs.")
    found: list[Dependency] = []
    for i, item in enumerate(raw):
        entry = mapping(item, f"spec.dependsOn[{i}]")
        unknown = sorted(set(entry) - {"name", "condition"})
        if unknown:
            raise SpecError(f"spec.dependsOn[{i}] has {shown(unknown[0])}; an entry has name and "
                        "condition.")
        name = entry.get("name")
        if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
            raise SpecError(f"spec.dependsOn[{i}].name must name a BatchJob of this namespace, not "
                        f"{shown(name)}.")
        condition = entry.get("condition", str(Condition.SUCCEEDED))
        if condition not in set(Condition):
            raise SpecError(f"spec.dependsOn[{i}].condition must be Succeeded, Failed or Finished, "
                        f"not {shown(condition)}.")
        if any(dep.name == name for dep in found):
            raise SpecError(f"spec.dependsOn names {name} twice.")
        found.append(Dependency(name, Condition(condition)))
    return tuple(found)


def grace_seconds(raw: object) -> int:
    """``spec.dependencyGracePeriodSeconds``."""
    if raw is None:
        return DEPENDENCY_GRACE_SECONDS
    return whole_number(raw, "spec.dependencyGracePeriodSeconds", minimum=0, maximum=INT32)

