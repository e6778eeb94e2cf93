"""Settings come from SWITCHYARD_* variables, and the README's table is generated from their declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchyard.platform.cli import settings_table
from switchyard.platform.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_environment_prefix_and_embedded_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SWITCHYARD_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SWITCHYARD_PORT", "8111")
    settings = Settings()
    assert settings.port == 8111
    assert settings.database_url == f"sqlite+aiosqlite:///{tmp_path / 'switchyard.db'}"
    assert settings.broker_url == f"sqla+sqlite:///{tmp_path / 'broker.db'}"
    assert settings.public_url == "http://127.0.0.1:8111"


def test_redis_broker_doubles_as_result_backend() -> None:
    settings = Settings(broker_url="redis://127.0.0.1:6379/3")
    assert settings.result_backend == "redis://127.0.0.1:6379/3"


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="port"):
        Settings(port=0)


def test_readme_settings_table_is_current() -> None:
    assert settings_table() in README.read_text(), "regenerate with `switchyard config --markdown`"


def test_every_setting_is_documented() -> None:
    assert all(field.description for field in Settings.model_fields.values())
