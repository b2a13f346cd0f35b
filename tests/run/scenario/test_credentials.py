"""The `auth:` section: validation, env references, the users file, redaction in dumps and text."""

from __future__ import annotations

from pathlib import Path

import pytest

from qbench.errors import ScenarioError
from qbench.run.scenario.credentials import (
    REVEAL,
    Auth,
    Secrets,
    cli_overrides,
    is_secret_header,
    read_users,
    refusal_hint,
    resolve,
)
from qbench.run.scenario.schema import load_scenario, parse_scenario, with_overrides

BASE = {"target": "http://127.0.0.1:1", "endpoint": {"api_name": "echo"}, "load": {"burst": 1}}


def scenario_with(auth: dict[str, object], **extra: object) -> dict[str, object]:
    return {**BASE, "auth": auth, **extra}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("Authorization", True),
        ("cookie", True),
        ("X-Api-Key", True),
        ("x-hf-token", True),
        ("X-Client-Secret", True),
        ("Accept", False),
        ("X-Tenant", False),
    ],
)
def test_secret_header_names(name: str, secret: bool) -> None:
    assert is_secret_header(name) is secret


def test_dump_masks_literal_secrets_and_keeps_env_references() -> None:
    raw = scenario_with(
        {
            "login": {"username": "alice", "password": "pw-literal"},
            "bearer": "${HF_TOKEN}",
            "headers": {"X-Api-Key": "k-literal", "X-Tenant": "acme", "X-Org": "o-literal"},
            "cookies": {"sid": "c-literal"},
            "secret_headers": ["X-Org"],
        },
        protocol="gradio",
    )
    scenario = parse_scenario(raw)
    dumped = scenario.model_dump(mode="json")["auth"]
    assert dumped["login"] == {"username": "alice", "password": "***", "users": None, "per": "session"}
    assert dumped["bearer"] == "${HF_TOKEN}"
    assert dumped["headers"] == {"X-Api-Key": "***", "X-Tenant": "acme", "X-Org": "***"}
    assert dumped["cookies"] == {"sid": "***"}
    revealed = scenario.model_dump(mode="json", context=REVEAL)["auth"]
    assert revealed["login"]["password"] == "pw-literal" and revealed["cookies"] == {"sid": "c-literal"}
    again = with_overrides(scenario, {"load.burst": 2})  # dumps and validates: secrets must survive
    assert again.auth.login is not None and again.auth.login.password == "pw-literal"


def test_endpoint_headers_are_masked_too() -> None:
    raw = {
        **BASE,
        "protocol": "http",
        "endpoint": {"path": "/p", "headers": {"Authorization": "Bearer xyz1"}},
    }
    assert parse_scenario(raw).model_dump(mode="json")["endpoint"]["headers"] == {"Authorization": "***"}
    listed = {**raw, "endpoint": {"path": "/p", "headers": {"X-Tenant": "t-9", "Accept": "a/b"}},
              "auth": {"secret_headers": ["X-Tenant"]}}
    dumped = parse_scenario(listed).model_dump(mode="json")
    assert dumped["endpoint"]["headers"] == {"X-Tenant": "***", "Accept": "a/b"}
    assert parse_scenario(dumped).endpoint.headers["X-Tenant"] == "***"  # a dump still validates


@pytest.mark.parametrize(
    ("login", "problem"),
    [
        ({"username": "a"}, "expected username and password"),
        ({"username": "a", "password": "b", "users": "u.csv"}, "not both"),
        ({"user": "a"}, "unknown key"),
    ],
)
def test_bad_login_names_the_key(login: dict[str, str], problem: str) -> None:
    with pytest.raises(ScenarioError, match="auth.login") as err:
        parse_scenario(scenario_with({"login": login}))
    assert problem in str(err.value)


def test_env_references_resolve_and_a_missing_one_names_key_and_variable() -> None:
    auth = Auth(bearer="${TOK}", headers={"X-Key": "k-${PART}"}, cookies={"s": "${SID}"})
    creds = resolve(auth, environ={"TOK": "tok-1", "PART": "p2", "SID": "sid-3"})
    assert creds.headers == {"X-Key": "k-p2", "Authorization": "Bearer tok-1"}
    assert creds.cookies == {"s": "sid-3"}
    with pytest.raises(ScenarioError, match=r"auth.bearer.*TOK is not set"):
        resolve(Auth(bearer="${TOK}"), environ={})


def test_users_file(tmp_path: Path) -> None:
    users = tmp_path / "users.csv"
    users.write_text("# accounts\nalice,pa ss\n\nbob, pw2\n")
    assert [(a.username, a.password) for a in read_users(users)] == [("alice", "pa ss"), ("bob", "pw2")]
    users.write_text("alice\n")
    with pytest.raises(ScenarioError, match="line 1: expected `user,password`"):
        read_users(users)
    with pytest.raises(ScenarioError, match="cannot read"):
        read_users(tmp_path / "missing.csv")


def test_users_file_resolves_against_the_scenario_folder(tmp_path: Path) -> None:
    (tmp_path / "users.csv").write_text("a,b\nc,d\ne,f\n")
    path = tmp_path / "s.yaml"
    path.write_text(
        "target: http://127.0.0.1:1\nendpoint: {api_name: echo}\nload: {users: 2, requests: 4}\n"
        "auth: {login: {users: users.csv}}\n"
    )
    creds = resolve(load_scenario(path).auth)
    assert [a.username for a in creds.accounts] == ["a", "c", "e"]
    from qbench.run.protocols.login import Authenticator

    one = Authenticator(creds, "http://127.0.0.1:1")
    assert [one._account(k) for k in range(4)] == [0, 1, 2, 0]
    second_of_two = Authenticator(creds, "http://127.0.0.1:1")
    second_of_two.spread(1, 2)  # generator process 1 of 2: slots take accounts 1, 0, 2, 1, ...
    assert [second_of_two._account(k) for k in range(4)] == [1, 0, 2, 1]


def test_secrets_mask_their_values_in_text() -> None:
    secrets = Secrets().with_values("s3cr3t-value-xyz", "s3cr3t", "ab")
    assert secrets.redact("refused: token s3cr3t-value-xyz!") == "refused: token ***!"  # longest first
    assert secrets.redact("ab s3cr3t") == "ab ***"  # too short to scrub: kept
    assert "s3cr3t" not in repr(secrets)
    assert (secrets | Secrets().with_values("other")).redact("other s3cr3t") == "*** ***"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://space.hf.space/?__sign=eyJhbGciOi.x-y_z", "https://space.hf.space/?__sign=***"),
        ("http://h/v1?api_key=k%2F123&design=blue", "http://h/v1?api_key=*** design=blue"),
        ("https://bob:hunter22@h:8443/", "https://bob:***@h:8443/"),
        ("https://h/x?X-Amz-Signature=abc123&author=mary", "https://h/x?X-Amz-Signature=*** author=mary"),
    ],
)
def test_credentials_in_a_url_are_masked(url: str, masked: str) -> None:
    secrets = Secrets().with_url(url)
    # the raw form and the decoded one (k%2F123 and k/123) are both masked; names and other values stay
    assert secrets.redact(url).replace("&", " ") == masked
    if "%2F" in url:
        assert secrets.redact("key k/123 refused") == "key *** refused"


def test_cli_overrides() -> None:
    got = cli_overrides(
        "alice:pw:with:colons", ["X-Api-Key: abc", "Accept:text/plain"], "TOK", environ={"TOK": "t"}
    )
    assert got == {
        "auth.login": {"username": "alice", "password": "pw:with:colons"},
        "auth.headers.X-Api-Key": "abc",
        "auth.headers.Accept": "text/plain",
        "auth.bearer": "${TOK}",
    }
    for bad, key in (
        (("alice", [], None), "--auth"),
        ((None, ["nocolon"], None), "--header"),
        ((None, [], "UNSET_VAR_Q"), "--bearer-env"),
    ):
        with pytest.raises(ScenarioError, match=key):
            cli_overrides(*bad, environ={})


def test_refusal_hints_name_the_key_to_set() -> None:
    assert "set auth.login" in refusal_hint(401, Auth())
    assert "set auth.bearer" in refusal_hint(403, Auth())
    assert "check auth.bearer" in refusal_hint(403, Auth(bearer="x"))
    assert "check auth.login" in refusal_hint(
        401, Auth.model_validate({"login": {"username": "a", "password": "b"}})
    )


def test_a_cli_password_may_name_a_variable() -> None:
    overrides = cli_overrides("alice:${QB_PW}", [], None, environ={})
    auth = parse_scenario(scenario_with({}), overrides=overrides).auth
    assert auth.model_dump(mode="json")["login"]["password"] == "${QB_PW}"  # a reference, shown as written
    assert resolve(auth, environ={"QB_PW": "from-env"}).accounts[0].password == "from-env"
