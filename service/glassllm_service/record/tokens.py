"""Per-student access tokens: signed, self-contained, checked by any worker alone.

A token is four dot-separated parts, every one of them RFC 6750 b64token characters so
that it travels in ``Authorization: Bearer`` (and in a cookie) as it is::

    glassllm1.<kid>.<payload>.<signature>

- ``kid`` names the course secret that signed it (``GLASSLLM_COURSE_SECRETS`` holds
  ``kid=secret`` pairs: the first signs new tokens, every one listed is accepted, so a
  secret is rotated by putting a new pair first and dropping the old one once its tokens
  have expired or been handed out again);
- ``payload`` is the base64url (unpadded) JSON ``{"v", "kid", "course", "role", "sub",
  "iat", "exp", "gen"}``: version, key id, course, ``student`` or ``instructor``, the
  student id, issued-at and expiry (Unix seconds) and the student's generation when it was
  issued (revoking bumps the generation in the database; a token of an older generation
  is refused by every request that touches the record);
- ``signature`` is the base64url HMAC-SHA256, under the kid's secret, of
  ``glassllm1.<kid>.<payload>``, compared with `hmac.compare_digest`.

Nothing is stored to accept a token: any worker of any replica with the same secrets
checks it (a revoked token needs the database, which the record has anyway).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from dataclasses import dataclass

import orjson

PREFIX = "glassllm1"
VERSION = 1
ROLES = ("student", "instructor")
KID = re.compile(r"[A-Za-z0-9_-]{1,32}")
COURSE = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
SUB = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}")     # the sandbox's student ids
MIN_SECRET = 32            # characters: 32 random base64 characters hold 192 bits
CLOCK_SKEW_S = 300         # an issued-at this far in the future is still accepted
MAX_TOKEN = 2048           # characters; a longer bearer is refused before any work


class TokenError(Exception):
    """Why a token is refused: ``reason`` is ``invalid``, ``expired`` or ``wrong_course``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Claims:
    """What a valid token says."""

    course: str
    role: str
    sub: str
    iat: int
    exp: int
    gen: int
    kid: str

    @property
    def instructor(self) -> bool:
        return self.role == "instructor"


def parse_secrets(text: str) -> dict[str, str]:
    """``kid=secret`` pairs (comma or whitespace separated) as an ordered dict; the first
    signs. Raises ValueError naming the rule broken.

    Example:
        >>> list(parse_secrets("k2=" + "b" * 32 + ", k1=" + "a" * 32))
        ['k2', 'k1']
    """
    pairs: dict[str, str] = {}
    for item in re.split(r"[,\s]+", text.strip()):
        if not item:
            continue
        kid, eq, secret = item.partition("=")
        if not eq or not KID.fullmatch(kid):
            raise ValueError("each entry is kid=secret, the kid 1 to 32 letters, digits, _ or -")
        if len(secret) < MIN_SECRET:
            raise ValueError(f"the secret of kid {kid!r} is shorter than {MIN_SECRET}"
                             " characters (make one: glassllm-sandbox secret)")
        if kid in pairs:
            raise ValueError(f"kid {kid!r} is listed twice")
        pairs[kid] = secret
    if not pairs:
        raise ValueError("no kid=secret pair")
    return pairs


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, signed: str) -> bytes:
    return hmac.new(secret.encode(), signed.encode("ascii"), hashlib.sha256).digest()


class Keyring:
    """The course's secrets and name: issues tokens, checks them."""

    def __init__(self, course: str, secrets: dict[str, str]) -> None:
        if not COURSE.fullmatch(course):
            raise ValueError(f"course {course!r}: 1 to 64 lowercase letters, digits and -")
        self.course, self.secrets = course, dict(secrets)
        self.signing_kid = next(iter(self.secrets))

    def issue(self, sub: str, role: str = "student", *, days: float, gen: int = 0,
              now: float | None = None) -> str:
        """A token for `sub` valid for `days`, signed with the first secret."""
        if role not in ROLES:
            raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
        if not SUB.fullmatch(sub):
            raise ValueError(f"student id {sub!r}: 1 to 128 letters, digits and . _ @ + -,"
                             " starting with a letter or digit")
        iat = int(time.time() if now is None else now)
        kid = self.signing_kid
        payload = _b64(orjson.dumps({"v": VERSION, "kid": kid, "course": self.course,
                                     "role": role, "sub": sub, "iat": iat,
                                     "exp": iat + round(days * 86400), "gen": gen}))
        signed = f"{PREFIX}.{kid}.{payload}"
        return f"{signed}.{_b64(_mac(self.secrets[kid], signed))}"

    def verify(self, token: str, now: float | None = None) -> Claims:
        """The claims of a valid token of this course, or `TokenError`."""
        parts = token.split(".") if len(token) <= MAX_TOKEN else []
        if len(parts) != 4 or parts[0] != PREFIX:
            raise TokenError("invalid", "this is not a glassllm course token")
        _, kid, payload, signature = parts
        secret = self.secrets.get(kid)
        # an unknown kid is checked against a throwaway key, so it takes the same time
        expected = _mac(secret or "\0" * MIN_SECRET, f"{PREFIX}.{kid}.{payload}")
        try:
            given = _unb64(signature)
        except (binascii.Error, ValueError):
            given = b""
        # one spelling per token: base64 would also take the signature padded or with
        # other trailing bits, so only the canonical, unpadded form is accepted
        if _b64(given) != signature:
            given = b""
        if not hmac.compare_digest(expected, given) or secret is None:
            raise TokenError("invalid", "the token's signature does not match this course's"
                             " secrets (another course's token, or an altered one)")
        try:
            data = orjson.loads(_unb64(payload))
            claims = Claims(str(data["course"]), str(data["role"]), str(data["sub"]),
                            int(data["iat"]), int(data["exp"]), int(data["gen"]),
                            str(data["kid"]))
            version = data["v"]
        except (binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            raise TokenError("invalid", "the token's payload is malformed") from None
        if version != VERSION or claims.kid != kid or claims.role not in ROLES \
                or not SUB.fullmatch(claims.sub):
            raise TokenError("invalid", "the token's payload is malformed")
        if claims.course != self.course:
            raise TokenError("wrong_course", f"this token is for course {claims.course!r},"
                             f" not {self.course!r}")
        moment = time.time() if now is None else now
        if moment >= claims.exp:
            raise TokenError("expired", "the token has expired; ask your instructor for a"
                             " new one")
        if claims.iat > moment + CLOCK_SKEW_S:
            raise TokenError("invalid", "the token was issued in the future")
        return claims
