"""A certificate authority made for one run, and the PEM files a TLS listener needs.

Local brokers started with ``--brokerperf-tls`` (or ``tls=True`` on a process cluster)
serve TLS with a server certificate this module issues at start from a fresh CA
(``trustme``, built on ``cryptography``; the ``tls`` extra). Nothing is checked in or
reused: the files are written into the broker's working directory and removed with it.

The server key is written encrypted (a PKCS#8 PEM, and a PKCS#12 key store for Java, one
random password per run), so the broker's key-password setting is exercised as on a real
cluster. The password is a
:class:`~pytest_brokerperf.core.redaction.Secret`: only the broker's own configuration
file receives it (:meth:`Secret.reveal`); no record, log line or message of the project's
shows it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.core.redaction import Secret

__all__ = ["SERVER_HOSTS", "TlsMaterial", "certificate_fix", "certificate_problem", "make_ca",
           "make_tls_material", "write_unencrypted_key"]

#: The names a local broker's certificate carries: what its clients connect to.
SERVER_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class TlsMaterial:
    """The PEM files of one run's CA and the server certificate it issued.

    ``ca_cert`` is what clients trust (``ssl.ca.location``, pika's ``cafile``);
    ``server_chain`` (the leaf, then any intermediate: none here) and the encrypted
    ``server_key`` are what a broker reading PEM serves (RabbitMQ), the PKCS#12
    ``server_key_store`` holds both for a Java broker (Kafka); ``key_password`` unlocks
    the key and the store and goes into the broker's own config only.
    """

    directory: Path
    ca_cert: Path
    server_chain: Path
    server_key: Path
    server_key_store: Path
    key_password: Secret
    hosts: tuple[str, ...]

    def as_info(self) -> dict[str, Any]:
        """What a manifest records: paths and names, never the key password."""
        return {"ca_cert": str(self.ca_cert), "server_chain": str(self.server_chain),
                "server_key": str(self.server_key),
                "server_key_store": str(self.server_key_store), "hosts": list(self.hosts),
                "key_encrypted": True}


def _trustme() -> Any:
    try:
        import trustme
    except ImportError:
        raise BrokerUnavailable(
            "TLS listeners need a certificate made per run with trustme, which is not "
            "installed; fix: pip install 'pytest-brokerperf[tls]'") from None
    return trustme


def make_ca() -> Any:
    """A fresh certificate authority (a ``trustme.CA``) for one run."""
    return _trustme().CA(organization_name="pytest-brokerperf run CA")


def _encrypted_key(key_pem: bytes, password: bytes) -> bytes:
    """``key_pem`` as an encrypted PKCS#8 PEM (PBKDF2 and AES-256-CBC)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(password))


def _key_store(key_pem: bytes, chain_pem: bytes, password: bytes) -> bytes:
    """A PKCS#12 key store (the key and its certificate chain) under ``password``.

    For Java brokers: Java 17 cannot open an encrypted PKCS#8 PEM key whose encryption
    is PBES2 ("PBES2 SecretKeyFactory not available"), the only one ``cryptography``
    writes for PEM; its PKCS#12 key stores it reads, here in the classic
    SHA1/3DES encryption every Java reads.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = serialization.load_pem_private_key(key_pem, password=None)
    leaf, *chain = x509.load_pem_x509_certificates(chain_pem)
    encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                  .kdf_rounds(50_000)
                  .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
                  .hmac_hash(hashes.SHA1()).build(password))
    return pkcs12.serialize_key_and_certificates(
        b"server", key, leaf, chain or None, encryption)  # type: ignore[arg-type]


def make_tls_material(directory: Path, hosts: Sequence[str] = SERVER_HOSTS, *,
                      ca: Any = None) -> TlsMaterial:
    """Write a CA certificate and a server certificate for ``hosts`` into ``directory``:
    the key as an encrypted PEM and, with the chain, as a PKCS#12 key store.

    ``ca``: an existing ``trustme.CA`` to issue from (default: a fresh one). The
    directory is created; the key files are readable by this user only.
    """
    if not hosts:
        raise ValueError("a server certificate needs at least one host name or address")
    authority = ca if ca is not None else make_ca()
    directory.mkdir(parents=True, exist_ok=True)
    leaf = authority.issue_cert(*hosts, common_name=hosts[0])
    password = Secret(secrets.token_urlsafe(24))
    ca_cert = directory / "ca.pem"
    chain = directory / "server-chain.pem"
    key = directory / "server-key.pem"
    store = directory / "server.p12"
    authority.cert_pem.write_to_path(str(ca_cert))
    chain_pem = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
    chain.write_bytes(chain_pem)
    secret = password.reveal().encode("ascii")
    for path in (key, store):
        path.touch(mode=0o600)
    key.write_bytes(_encrypted_key(leaf.private_key_pem.bytes(), secret))
    store.write_bytes(_key_store(leaf.private_key_pem.bytes(), chain_pem, secret))
    return TlsMaterial(directory=directory, ca_cert=ca_cert, server_chain=chain,
                       server_key=key, server_key_store=store, key_password=password,
                       hosts=tuple(hosts))


def write_unencrypted_key(material: TlsMaterial, name: str = "server-key-unencrypted.pem"
                          ) -> Path:
    """The server key as an *unencrypted* PKCS#8 PEM beside the other files of
    ``material`` (its scratch directory, removed with it), readable by this user only.

    For a broker that has no key-password setting for a PEM key: Pulsar's
    ``tlsKeyFilePath`` is read by its ``SecurityUtility.loadPrivateKeyFromPemFile``, which
    decodes the ``BEGIN PRIVATE KEY`` block as a plain ``PKCS8EncodedKeySpec`` and takes no
    password. The encrypted ``server_key`` and the key store stay as they are.
    """
    import os

    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(
        material.server_key.read_bytes(),
        password=material.key_password.reveal().encode("ascii"))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path = material.directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
        os.write(fd, pem)
    finally:
        os.close(fd)
    return path


def certificate_problem(address: str, cafile: str | None, timeout_s: float = 5.0) -> str | None:
    """Why a client trusting ``cafile`` (None: the system's trust store) refuses the
    certificate served at ``address`` (``host:port``): its chain, or a name it lacks.

    A client library says "certificate verify failed" for both; this handshake, done
    again with Python's ``ssl``, tells them apart so an error can name the fix. None when
    the certificate passes both checks or the handshake fails for another reason.
    """
    import socket
    import ssl

    host, _, port = address.strip().rpartition(":")
    host = host.strip("[]")
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        return f"the CA file {cafile} cannot be read as PEM ({type(exc).__name__})"
    for check_name in (False, True):
        ctx.check_hostname = check_name
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s) as sock, \
                    ctx.wrap_socket(sock, server_hostname=host if check_name else None):
                pass
        except ssl.SSLCertVerificationError as exc:
            if not check_name:
                return (f"the server's certificate is not signed by a CA in "
                        f"{cafile or 'the system trust store'} ({exc.verify_message})")
            return (f"the server's certificate does not name {host}, the address connected "
                    f"to ({exc.verify_message})")
        except (OSError, ValueError, ssl.SSLError):
            return None
    return None


def certificate_fix(problem: str | None, *, address_option: str, ca_setting: str,
                    where: str, cafile: str | None) -> str:
    """The fix for a certificate a client refused (:func:`certificate_problem`'s
    ``problem``): an address it names, or the CA that signed it. ``address_option`` is
    the flag and value the client connected with (``--kafka-bootstrap=HOST:PORT``);
    ``ca_setting`` the client setting naming the CA file, set in ``where``."""
    if problem is not None and "does not name" in problem:
        return (f"connect through a host name or address the certificate carries "
                f"({address_option}), or have the cluster's certificate issued for the "
                "address clients use")
    return (f"set {ca_setting} in {where} to the PEM file of the CA that signed the "
            f"cluster's certificate (now: {cafile or 'unset: the system trust store'})")
