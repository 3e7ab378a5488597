"""Settings from the environment, and the combinations they refuse."""

from __future__ import annotations

import pytest

from hooks.settings import ENVIRONMENT, Settings


def test_defaults_and_environment() -> None:
    settings = Settings.from_env({"HPCBRIDGE_COMMAND_TIMEOUT": "20", "HPCBRIDGE_MAX_CHANNELS": "4",
                                  "HPCBRIDGE_LOG_IMAGE": "registry.example.org/hpcbridge:1"})
    assert (settings.command_timeout, settings.max_channels, settings.guard_stale) == (20, 4, 120)
    assert settings.log_image == "registry.example.org/hpcbridge:1"


def test_every_setting_has_a_variable_and_help() -> None:
    assert set(ENVIRONMENT) == set(Settings.__dataclass_fields__)
    assert all(name.startswith("HPCBRIDGE_") and help for name, help in ENVIRONMENT.values())


@pytest.mark.parametrize(
    ("env", "names"),
    [
        pytest.param({"HPCBRIDGE_COMMAND_TIMEOUT": "117"},
                     ("HPCBRIDGE_GUARD_STALE", "HPCBRIDGE_COMMAND_TIMEOUT"),
                     id="command-outlives-the-guard"),
        pytest.param({"HPCBRIDGE_COMMAND_TIMEOUT": "300", "HPCBRIDGE_GUARD_STALE": "200"},
                     ("HPCBRIDGE_GUARD_STALE", "HPCBRIDGE_COMMAND_TIMEOUT"),
                     id="both-set-wrong"),
        pytest.param({"HPCBRIDGE_SYNC_BUDGET": "3"}, ("HPCBRIDGE_SYNC_BUDGET",),
                     id="no-time-for-a-command"),
        pytest.param({"HPCBRIDGE_MAX_CHANNELS": "0"}, ("HPCBRIDGE_MAX_CHANNELS",), id="zero"),
        pytest.param({"HPCBRIDGE_CLUSTER_THREADS": "65"},
                     ("HPCBRIDGE_CLUSTER_THREADS", "HPCBRIDGE_THREADS"),
                     id="a-cluster-with-more-threads-than-all"),
        pytest.param({"HPCBRIDGE_NAMESPACE_THREADS": "65"},
                     ("HPCBRIDGE_NAMESPACE_THREADS", "HPCBRIDGE_THREADS"),
                     id="a-namespace-with-more-threads-than-all"),
        pytest.param({"HPCBRIDGE_STATUS_TTL": "-1"}, ("HPCBRIDGE_STATUS_TTL",), id="negative"),
        pytest.param({"HPCBRIDGE_GUARD_STALE": "soon"}, ("HPCBRIDGE_GUARD_STALE",),
                     id="not-a-number"),
    ],
)
def test_refused_combinations_name_the_settings(env: dict[str, str], names: tuple[str]) -> None:
    with pytest.raises(ValueError) as caught:
        Settings.from_env(env)
    assert all(name in str(caught.value) for name in names), caught.value


def test_the_longest_command_the_guard_allows() -> None:
    assert Settings.from_env({"HPCBRIDGE_COMMAND_TIMEOUT": "115"}).command_timeout == 115
