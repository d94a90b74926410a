"""The README's quick start, through a client generated from docs/openapi.json by
openapi-python-client (tests/client.rs generates it into a temporary directory and runs this
with it on PYTHONPATH): create a sandbox, wait until it runs, exec in it, read its logs, list,
delete. Every call goes through the generated functions and models; a wrong type, a missing
field or an undocumented status fails here.

Arguments: BASE_URL TOKEN IMAGE
"""
import sys
import time

from sbx_client import AuthenticatedClient
from sbx_client.api.health import health
from sbx_client.api.identity import whoami
from sbx_client.api.sandboxes import (
    create_sandbox,
    delete_sandbox,
    exec_in_sandbox,
    get_sandbox,
    list_sandboxes,
    sandbox_logs,
)
from sbx_client.models import CreateSandboxRequest, ErrorEnvelope, ExecRequest, SandboxStatus


def data(response):
    """The payload of a documented success, or a failure that says what came back."""
    if response is None or isinstance(response, ErrorEnvelope):
        raise SystemExit(f"unexpected answer: {response!r}")
    return response.data


def main(base_url, token, image):
    client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)
    assert health.sync(client=client).status == "healthy"
    me = data(whoami.sync(client=client))
    print("whoami:", me.subject, me.grants)

    created = data(create_sandbox.sync(client=client, body=CreateSandboxRequest(name="quick", image=image)))
    assert (created.name, created.namespace) == ("quick", "default"), created

    deadline = time.time() + 60
    while True:
        sandbox = data(get_sandbox.sync("quick", client=client))
        if sandbox.status == SandboxStatus.RUNNING:
            break
        if sandbox.status == SandboxStatus.FAILED or time.time() > deadline:
            raise SystemExit(f"the sandbox did not run: {sandbox!r}")
        time.sleep(0.1)

    result = data(exec_in_sandbox.sync("quick", client=client, body=ExecRequest(command="echo hello from $(hostname)")))
    assert result.exit_code == 0 and result.stdout.startswith("hello from"), result
    print("exec:", result.stdout.strip(), f"({result.duration_ms} ms)")

    logs = data(sandbox_logs.sync("quick", client=client, tail=10))
    assert isinstance(logs.logs, str)

    names = [s.name for s in data(list_sandboxes.sync(client=client))]
    assert names == ["quick"], names

    data(delete_sandbox.sync("quick", client=client))
    missing = get_sandbox.sync("quick", client=client)
    assert isinstance(missing, ErrorEnvelope) and missing.error.code.value == "NotFound", missing
    print("quick start through the generated client: ok")


if __name__ == "__main__":
    main(*sys.argv[1:4])
