"""Schemathesis hooks for sbx's contract run (tests/contract.rs).

The OpenAPI document says every rule JSON Schema can say. A few rules it can only state in
words, because they depend on the server's state (a name that already exists, a tenant that
does not) or tie two fields together (a tenant role needs a `tenant`). A schema-valid request
that breaks one of them gets its documented 400, which the fuzzer would otherwise count as a
"schema-valid request rejected". `filter_failure` drops exactly those failures, matched by the
rule's message; any other failure stays a failure.

Creates run real sandboxes: a valid generated image reference is replaced by the image the
test imported (SBX_CONTRACT_IMAGE), so that the links schemathesis follows (get, exec, files,
logs, pause, fork, delete) meet a running sandbox, not only a Failed one.

The two tar routes get a tar strategy: small valid archives of a few files.
"""
import io
import os
import re
import tarfile

import schemathesis
from hypothesis import strategies as st

# Each pattern is a 400 message of a rule the document states in a description.
DOCUMENTED_400 = [
    # State: creates of an existing name, references to what does not exist (spec: 400).
    r"already exists",
    r"already belongs to tenant",
    r"unknown tenant '",
    r"unknown node '",
    r"is not one of tenant '",
    r"bad env file '",
    # Cross-field rules.
    r"is cluster-wide",
    r"is scoped to a tenant",
    r"needs a `tenant`",
    r"needs one matcher",
    r"matchers \(",
    r"duplicate matcher",
    r"would leave no admin",
    r"cols and rows go together",
    r"is the whole sandbox",
    r"`from` must not be after `to`",
    r"host bits",
    r"`memory` must be at least",
    r"must be more than 0",
    r"is given twice",
    r"is covered by",
    r"reserved",
    r"not an OCI image layout|is not a usable|no index\.json|oci-layout",
]
_DOCUMENTED = re.compile("|".join(DOCUMENTED_400))


# A registry the test machine cannot reach (it has no internet): the documented 503.
UPSTREAM_503 = re.compile(
    r"cannot reach registry|registry .* answered|requires authentication|^pulling .* failed"
)


def _message(response):
    try:
        return response.json()["error"]["message"]
    except Exception:  # noqa: BLE001 - not the envelope
        return None


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keeps every failure except a 400 that answers one of the documented rules above, or
    the 503 of an unreachable registry."""
    code = getattr(failure, "code", None)
    if response.status_code == 101 and case.operation.path.endswith("/exec/stream"):
        # The documented WebSocket upgrade of a running sandbox: an HTTP fuzzer cannot go on.
        return False
    if code in ("ST101", "ST202") and response.status_code == 503:
        message = _message(response)
        return not (message and UPSTREAM_503.search(message))
    if code != "ST202" or response.status_code != 400:
        return True
    message = _message(response)
    return not (message and _DOCUMENTED.search(message))


_REFERENCE = re.compile(
    r"^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(:[0-9]{1,5})?/)?"
    r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)


@schemathesis.hook("map_body").apply_to(path="/api/v1/sandboxes", method="POST")
def real_image(context, body):
    """A valid image reference becomes the imported test image."""
    image = os.environ.get("SBX_CONTRACT_IMAGE")
    if image and isinstance(body, dict) and isinstance(body.get("image"), str):
        if _REFERENCE.match(body["image"]) and len(body["image"]) <= 255:
            body = dict(body, image=image)
    return body


def _tar(files):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


_NAMES = st.from_regex(r"\A[a-z][a-z0-9_.-]{0,15}\Z")
_FILES = st.lists(st.tuples(_NAMES, st.binary(max_size=256)), min_size=1, max_size=3, unique_by=lambda f: f[0])

schemathesis.openapi.media_type(
    "application/x-tar", _FILES.map(_tar), aliases=["application/octet-stream"]
)
