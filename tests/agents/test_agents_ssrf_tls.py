"""Pinning keeps TLS honest: the connection goes to the vetted address, SNI and certificate use the name."""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools.fetch import safe_fetch
from switchyard.agents.tools.ssrf import SSRFGuard, StaticResolver


def _certificates(tmp: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a leaf certificate for ``secure.test``; returns (ca, cert, key) paths."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "switchyard test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "secure.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("secure.test")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_path, cert_path, key_path


class _Hello(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = f"secure {self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # failed handshakes are part of the test


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path, list[str | None]]]:
    ca, cert, key = _certificates(tmp_path_factory.mktemp("tls"))
    sni_seen: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: sni_seen.append(name)  # type: ignore[assignment,misc,func-returns-value]
    server = _TLSServer(("127.0.0.1", 0), _Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1]), ca, sni_seen
    server.shutdown()
    server.server_close()


def _guard() -> SSRFGuard:
    return SSRFGuard(
        resolver=StaticResolver({"secure.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}), allow_loopback=True
    )


async def test_https_through_pinned_address_verifies_the_name(tls_server: tuple[int, Path, list[str | None]]) -> None:
    port, ca, sni_seen = tls_server
    inner = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(ca)), trust_env=False)
    result = await safe_fetch(_guard(), "GET", f"https://secure.test:{port}/", inner_transport=inner)
    assert result.body == f"secure secure.test:{port}".encode()
    assert sni_seen[-1] == "secure.test"


async def test_certificate_for_another_name_is_rejected(tls_server: tuple[int, Path, list[str | None]]) -> None:
    port, ca, _ = tls_server
    inner = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(ca)), trust_env=False)
    with pytest.raises(ToolExecutionError, match="Hostname mismatch"):
        await safe_fetch(_guard(), "GET", f"https://other.test:{port}/", inner_transport=inner)
