"""The key that seals the credentials tenants put in tool definitions (``switchyard.agents.tools.secrets``).

``SWITCHYARD_SECRETS_KEY`` when set; else a random key kept in ``<data_dir>/secrets.key`` (made by the first
process that needs it, readable by its owner only), which every process sharing that data directory reads.
Processes that do not share a data directory (compose, several machines) must share the setting, or a run on a
worker cannot open the headers an API process sealed (it fails naming the setting).
"""

from __future__ import annotations

import os
import secrets

from switchyard.agents.tools.secrets import configure_tool_secrets
from switchyard.platform.settings import Settings

__all__ = ["KEY_FILE", "configure_secrets_key"]

KEY_FILE = "secrets.key"


def _key_file_secret(settings: Settings) -> str:
    path = settings.data_dir / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
        try:  # a link appears whole: of two processes starting together, the first's key is everyone's
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


def configure_secrets_key(settings: Settings) -> None:
    """Seal and open this process's tool secrets with the installation's key (see the module docstring)."""
    secret = settings.secrets_key.get_secret_value() if settings.secrets_key else _key_file_secret(settings)
    configure_tool_secrets(secret)
