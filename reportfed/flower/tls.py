"""TLS for a federation: the certificate authority reportfed makes (a CA and the server's
certificate for the names and addresses nodes reach it by), and the checks of a certificate
before a process is started with it."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reportfed.core.errors import ReportfedError, warn
from reportfed.core.files import atomic_write


@dataclass(frozen=True)
class Certificates:
    """A CA certificate and the server certificate/key it signed (PEM files)."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def in_dir(cls, directory: str | Path) -> Certificates:
        """The files :func:`generate_certificates` writes into ``directory``."""
        d = Path(directory)
        certs = cls(d / "ca.crt", d / "server.pem", d / "server.key")
        missing = [str(p) for p in (certs.ca, certs.cert, certs.key) if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"missing certificate file(s): {', '.join(missing)}")
        for path in (certs.ca, certs.cert):
            check_certificate(path)
        return certs


def check_certificate(path: Path) -> None:
    """Refuse, in one line, a certificate file TLS cannot use: one holding no PEM certificate
    (Flower would end in a traceback, and a SuperNode would hang on its way out)."""
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(path.read_bytes())
    except ValueError:
        raise ReportfedError(
            f"{path} holds no PEM certificate: use the files `reportfed federation certs` wrote"
        ) from None


def warn_if_expiring(path: Path, *, days: int = 30) -> None:
    """Warn (:class:`~reportfed.core.errors.ReportfedWarning`) about a certificate that has
    expired or expires within ``days`` days: TLS connections to it fail once it has."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificates(path.read_bytes())[0]
    left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    when = cert.not_valid_after_utc.strftime("%Y-%m-%d %H:%M UTC")
    if left.total_seconds() <= 0:
        warn(f"{path} expired on {when}: nodes cannot connect; make a new one")
    elif left < dt.timedelta(days=days):
        warn(f"{path} expires on {when} (in {left.days} days): renew it before then")


def generate_certificates(
    out_dir: str | Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), days: int = 365
) -> Certificates:
    """A self-signed CA and a server certificate for ``hosts`` (for trials and tests; hospitals
    use their own PKI)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("reportfed CA"))
        .issuer_name(name("reportfed CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    certs = Certificates(out / "ca.crt", out / "server.pem", out / "server.key")
    atomic_write(certs.ca, ca.public_bytes(pem))
    atomic_write(certs.cert, cert.public_bytes(pem))
    atomic_write(
        certs.key,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    certs.key.chmod(0o600)
    return certs
