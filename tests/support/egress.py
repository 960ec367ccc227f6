"""Helpers for egress tests: an HTTP client on a Unix socket, a test CA, a real TLS
client's first flight."""

from __future__ import annotations

import contextlib
import datetime
import http.client
import ipaddress
import socket
import ssl
import subprocess
from pathlib import Path


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket, the way the in-writer forwarder reaches the proxy."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        super().__init__("127.0.0.1", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def make_ca(directory: Path, name: str, names: tuple[str, ...] = ()) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 (and the DNS `names`) it signed:
    (ca.pem, cert.pem, key.pem).

    With the `cryptography` package when it is installed, else with the openssl CLI.
    """
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return _make_ca_openssl(directory, name, names)
    return _make_ca_cryptography(directory, name, names)


def _make_ca_openssl(directory: Path, name: str, names: tuple[str, ...]) -> tuple[Path, Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem, cert_pem, key_pem = (directory / f"{name}-{part}.pem" for part in ("ca", "cert", "key"))
    ca_key, csr, ext = (directory / f"{name}-{part}" for part in ("ca.key", "csr", "ext"))
    alt = ",".join(["IP:127.0.0.1", *(f"DNS:{n}" for n in names)])
    ext.write_text(f"subjectAltName={alt}\nbasicConstraints=critical,CA:FALSE\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for argv in (
        ["openssl", "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca_pem),
         "-days", "1", "-subj", f"/CN={name} test CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["openssl", "req", *ec, "-keyout", str(key_pem), "-out", str(csr),
         "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_pem), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(cert_pem), "-days", "1", "-extfile", str(ext)],
    ):  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return ca_pem, cert_pem, key_pem


def _make_ca_cryptography(
    directory: Path, name: str, names: tuple[str, ...]
) -> tuple[Path, Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                          content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                 *(x509.DNSName(n) for n in names)]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem, cert_pem, key_pem = (directory / f"{name}-{part}.pem" for part in ("ca", "cert", "key"))
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_pem, cert_pem, key_pem


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def client_hello(name: str | None, context: ssl.SSLContext | None = None) -> bytes:
    """The first flight (its ClientHello) of Python's TLS client for `name`, as it would
    send it on a socket: made in memory, nothing is connected."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = (context or ssl.create_default_context()).wrap_bio(
        incoming, outgoing, server_hostname=name
    )
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()
