"""A few S3 calls signed with AWS Signature Version 4, standard library only.

Container mode creates AutoMQ's buckets in its object store before AutoMQ starts, as
AutoMQ's own docker-compose does with ``mc mb``; these calls need no S3 SDK on the host.
Signing follows AWS's "Signature Version 4 signing process" (path-style URLs, header
authorization, the payload's SHA-256 in ``x-amz-content-sha256``), which MinIO and
every S3-compatible store accept.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from pytest_brokerperf.core.errors import ProvisionError

__all__ = ["S3Endpoint", "sign"]

SERVICE = "s3"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign(method: str, url: str, *, access_key: str, secret_key: str, region: str,
         body: bytes = b"", now: _dt.datetime | None = None) -> dict[str, str]:
    """The headers (``Authorization`` included) that sign this request."""
    parts = urllib.parse.urlsplit(url)
    stamp = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": parts.netloc, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(urllib.parse.parse_qsl(parts.query, keep_blank_values=True)))
    names = sorted(headers)
    canonical = "\n".join([
        method, urllib.parse.quote(parts.path or "/", safe="/-_.~"), query,
        "".join(f"{n}:{headers[n]}\n" for n in names), ";".join(names), payload])
    scope = f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(("AWS4" + secret_key).encode(), stamp[:8])
    for part in (region, SERVICE, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return headers


@dataclass(frozen=True)
class S3Endpoint:
    """An S3-compatible store reached at ``url`` (``http://127.0.0.1:PORT``)."""

    url: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def request(self, method: str, path: str, body: bytes = b"",
                timeout: float = 5.0) -> tuple[int, bytes]:
        """Status and body of one signed request (an HTTP error status is returned)."""
        url = self.url.rstrip("/") + path
        headers = sign(method, url, access_key=self.access_key,
                       secret_key=self.secret_key, region=self.region, body=body)
        headers.pop("host")
        req = urllib.request.Request(url, data=body or None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait_live(self, deadline: float, check: Callable[[], None] | None = None) -> None:
        """Until ``GET /minio/health/live`` answers 200 (MinIO's liveness probe);
        ``check`` raises when waiting longer is pointless (the store's container exited)."""
        seen = "no answer"
        while time.monotonic() < deadline:
            if check is not None:
                check()
            try:
                with urllib.request.urlopen(self.url + "/minio/health/live",
                                            timeout=2) as resp:
                    if resp.status == 200:
                        return
                    seen = f"HTTP {resp.status}"
            except (OSError, urllib.error.URLError) as exc:
                seen = str(exc)
            time.sleep(0.2)
        raise ProvisionError(f"the object store at {self.url} did not answer "
                             f"/minio/health/live in time ({seen})")

    def create_bucket(self, bucket: str) -> None:
        """``PUT /bucket``; an existing bucket of ours is fine."""
        status, body = self.request("PUT", f"/{bucket}")
        if status not in (200, 409) or (status == 409 and b"OwnedByYou" not in body):
            raise ProvisionError(
                f"creating bucket {bucket!r} at {self.url} answered HTTP {status}: "
                f"{body[:300].decode('utf-8', 'replace')}")

    def list_keys(self, bucket: str) -> list[str]:
        """The object keys in ``bucket`` (first page of ListObjectsV2)."""
        import xml.etree.ElementTree as ET

        status, body = self.request("GET", f"/{bucket}?list-type=2")
        if status != 200:
            raise ProvisionError(f"listing bucket {bucket!r} at {self.url} answered HTTP "
                                 f"{status}: {body[:300].decode('utf-8', 'replace')}")
        root = ET.fromstring(body)
        return [el.text or "" for el in root.iter() if el.tag.endswith("Key")]
