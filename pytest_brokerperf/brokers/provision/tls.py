"""A certificate authority made for one run, and the PEM files a TLS listener needs.

Local brokers started with ``--brokerperf-tls`` (or ``tls=True`` on a process cluster)
serve TLS with a server certificate this module issues at start from a fresh CA
(``trustme``, built on ``cryptography``; the ``tls`` extra). Nothing is checked in or
reused: the files are written into the broker's working directory and removed with it.

The server key is written encrypted (PKCS#8, a random password per run), so the broker's
key-password setting is exercised as on a real cluster. The password is a
:class:`~pytest_brokerperf.core.redaction.Secret`: only the broker's own configuration
file receives it (:meth:`Secret.reveal`); no record, log line or message of the project's
shows it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.core.redaction import Secret

__all__ = ["SERVER_HOSTS", "KeyCipher", "TlsMaterial", "certificate_problem", "make_ca",
           "make_tls_material"]

#: The names a local broker's certificate carries: what its clients connect to.
SERVER_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class TlsMaterial:
    """The PEM files of one run's CA and the server certificate it issued.

    ``ca_cert`` is what clients trust (``ssl.ca.location``, pika's ``cafile``);
    ``server_chain`` (the leaf, then any intermediate: none here) and the encrypted
    ``server_key`` are what the broker serves; ``key_password`` unlocks the key and goes
    into the broker's own config only.
    """

    directory: Path
    ca_cert: Path
    server_chain: Path
    server_key: Path
    key_password: Secret
    hosts: tuple[str, ...]

    def as_info(self) -> dict[str, Any]:
        """What a manifest records: paths and names, never the key password."""
        return {"ca_cert": str(self.ca_cert), "server_chain": str(self.server_chain),
                "server_key": str(self.server_key), "hosts": list(self.hosts),
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


#: How the server key file is encrypted, named by what must read it: ``pbes1-3des``
#: (PKCS#8 ``pbeWithSHAAnd3-KeyTripleDES-CBC``) for Java's PEM key store, whose
#: ``EncryptedPrivateKeyInfo`` has no PBES2 key factory on Java 17 (Kafka refuses it:
#: "PBES2 SecretKeyFactory not available"); ``pbes2-aes256`` (PKCS#8, PBKDF2 and
#: AES-256-CBC, the modern default) for Erlang's ``public_key`` (RabbitMQ).
KeyCipher = Literal["pbes1-3des", "pbes2-aes256"]


#: PKCS#12 ``pbeWithSHAAnd3-KeyTripleDES-CBC`` (1.2.840.113549.1.12.1.3), DER-encoded.
_PBE_SHA1_3DES_OID = bytes.fromhex("060a2a864886f70d010c0103")
_PBE_ITERATIONS = 2048


def _der(tag: int, body: bytes) -> bytes:
    """One DER element: tag, definite length, body."""
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body


def _pkcs12_kdf(password: str, salt: bytes, purpose: int, iterations: int, n: int) -> bytes:
    """RFC 7292 appendix B.2 with SHA-1: ``purpose`` 1 derives the key, 2 the IV.

    ``cryptography`` writes PKCS#8 keys with PBES2 only, which Java 17 cannot read;
    this is the PKCS#12 derivation Java's ``PBEWithSHA1AndDESede`` undoes.
    """
    import hashlib
    import math

    u, v = 20, 64  # SHA-1 output and block size

    def stretch(data: bytes) -> bytes:
        return (data * math.ceil(v * math.ceil(len(data) / v) / len(data)))[
            :v * math.ceil(len(data) / v)] if data else b""

    d = bytes([purpose]) * v
    block = stretch(salt) + stretch(password.encode("utf-16-be") + b"\0\0")
    out = b""
    while len(out) < n:
        a = hashlib.sha1(d + block).digest()
        for _ in range(iterations - 1):
            a = hashlib.sha1(a).digest()
        out += a
        b = int.from_bytes((a * math.ceil(v / u))[:v], "big") + 1
        block = b"".join(
            ((int.from_bytes(block[i:i + v], "big") + b) % (1 << (8 * v))).to_bytes(v, "big")
            for i in range(0, len(block), v))
    return out[:n]


def _pbes1_3des(key_der: bytes, password: str) -> bytes:
    """PKCS#8 ``EncryptedPrivateKeyInfo`` (DER) of ``key_der`` under PKCS#12 PBE 3DES."""
    import os

    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    salt = os.urandom(16)
    key = _pkcs12_kdf(password, salt, 1, _PBE_ITERATIONS, 24)
    iv = _pkcs12_kdf(password, salt, 2, _PBE_ITERATIONS, 8)
    padder = padding.PKCS7(64).padder()
    plain = padder.update(key_der) + padder.finalize()
    enc = Cipher(TripleDES(key), modes.CBC(iv)).encryptor()
    sealed = enc.update(plain) + enc.finalize()
    params = _der(0x30, _der(0x04, salt) + _der(0x02, _PBE_ITERATIONS.to_bytes(2, "big")))
    return _der(0x30, _der(0x30, _PBE_SHA1_3DES_OID + params) + _der(0x04, sealed))


def _encrypted_key(key_pem: bytes, password: str, cipher: KeyCipher) -> bytes:
    """``key_pem`` as an encrypted PKCS#8 PEM (``ENCRYPTED PRIVATE KEY``)."""
    import base64
    import textwrap

    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    if cipher == "pbes2-aes256":
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode("ascii")))
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    body = textwrap.fill(base64.b64encode(_pbes1_3des(der, password)).decode("ascii"), 64)
    return (f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{body}\n"
            "-----END ENCRYPTED PRIVATE KEY-----\n").encode("ascii")


def make_tls_material(directory: Path, hosts: Sequence[str] = SERVER_HOSTS, *,
                      cipher: KeyCipher = "pbes2-aes256", ca: Any = None) -> TlsMaterial:
    """Write a CA certificate and a server certificate for ``hosts`` into ``directory``.

    ``cipher``: how the key is encrypted (:data:`KeyCipher`: what the broker reads).
    ``ca``: an existing ``trustme.CA`` to issue from (default: a fresh one). The
    directory is created; the key file is readable by this user only.
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
    authority.cert_pem.write_to_path(str(ca_cert))
    chain.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.touch(mode=0o600)
    key.write_bytes(_encrypted_key(leaf.private_key_pem.bytes(), password.reveal(), cipher))
    return TlsMaterial(directory=directory, ca_cert=ca_cert, server_chain=chain,
                       server_key=key, key_password=password, hosts=tuple(hosts))


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
