"""Secret redaction on the JSON text of hook payloads: every rule, on realistic payloads.

Each sample is a hook payload as Claude Code would send it with a secret where real sessions put
one (a Bash command, a file the Read tool returned, a prompt, a tool's output). The secrets are
made up but have the real formats.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, NamedTuple

import pytest

from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.redact import RULE_NAMES, redact_text
from tests.conftest import all_fixtures

Json = dict[str, Any]

SESSION = "3f0c9a7e-5d21-4b8e-9c4a-1e2f3a4b5c6d"
BASE: Json = {
    "session_id": SESSION,
    "transcript_path": f"/home/dev/.claude/projects/-home-dev-app/{SESSION}.jsonl",
    "cwd": "/home/dev/app",
    "permission_mode": "default",
}


def pre_tool(tool: str, tool_input: Json) -> Json:
    return {
        **BASE,
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01Secret0001",
    }


def post_tool(tool: str, tool_input: Json, tool_response: object) -> Json:
    return {
        **BASE,
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": tool_response,
        "tool_use_id": "toolu_01Secret0002",
        "duration_ms": 31,
    }


def bash(command: str) -> Json:
    return pre_tool("Bash", {"command": command, "description": "Run it"})


def bash_output(command: str, stdout: str) -> Json:
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    return post_tool("Bash", {"command": command, "description": "Run it"}, response)


def read_file(path: str, content: str) -> Json:
    lines = content.count("\n") + 1
    response = {
        "type": "text",
        "file": {
            "filePath": path,
            "content": content,
            "numLines": lines,
            "startLine": 1,
            "totalLines": lines,
        },
    }
    return post_tool("Read", {"file_path": path}, response)


def write_file(path: str, content: str) -> Json:
    return pre_tool("Write", {"file_path": path, "content": content})


class Sample(NamedTuple):
    rule: str
    payload: Json
    secrets: tuple[str, ...]


ANTHROPIC = "sk-ant-api03-" + "Xk9vR2mQ7tLp4wZc8nB1yH6dF3sJ0aGe" * 3 + "-Qw8AA"
OPENAI = "sk-proj-" + "T7hVq2Lr9Xw4Zk8Nc1Bm6Pd3Fs0Gy5Jh" * 4
AWS = "AKIA4QWERTYUIOPASDFG"
GHP = "ghp_" + "R7mK2xP9qL4vT8wZ3nB6yC1dF5hJ0sGa2e4U"
GITHUB_PAT = "github_pat_11ABCDEFG0" + "aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA" * 2 + "x2Y4z6"
SLACK_BOT = "xoxb-2741234567-4812345678901-q8WcUvbhYKNq0Lr3Xm2ZtSa9"
SLACK_HOOK_PATH = "T024BE7LD/B08ABCDEF12/qW3rTy8UiOp2AsDfGhJkLzXc"
GOOGLE_KEY = "AIzaSyD4v8Xq2Lm7Rt9Wk3Np6Bc1Hf5Jy0Gs8Ze"
GOOGLE_OAUTH = "ya29.a0AfB_byC7kQ2mX9vL4tR8wZ3nP6yH1dF5sJ0gA2eU4iO7"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJ1c2VyLTQyIiwicm9sZSI6ImFkbWluIiwiaWF0IjoxNzE2MjM5MDIyfQ"
    ".Kx9vQ2mL7tRp4wZc8nB1yH6dF3sJ0aGeU5iO"
)
BEARER = "9f8e7d6c5b4a3928171605f4e3d2c1b0"
BASIC = "YWRtaW46czNjcjN0LVBhc3M="
KEY_LINES = (
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACBq4Vn3hUu0kYQ2mXc1+LqgR0n3u8vXfP2x8k9Qv7hJdAAAAJgAAAAAAAAA",
    "AAtzc2gtZWQyNTUxOQAAACBq4Vn3hUu0kYQ2mXc1+LqgR0n3u8vXfP2x8k9Qv7hJdAAAAE",
)
RSA_LINES = ("MIIEowIBAAKCAQEAx8Kp2mQ7tLp4wZc8nB1yH6dF3sJ0aGeU5iO9vR2mQ7tLp4wZc8nB", "1yH6dF3sJ0aGeU5iOq")
URL_CRED = "Tr0ub4dor-3"
JSON_CRED = "Tr0ub4dor&3-horse"
FILE_CRED = "hunter2-staging-42"
DOTENV_CRED = "pg-Xk29-vLq8"
QUOTED_CRED = "dev-token-7f3a9c2e1b"
SINGLE_CRED = "open sesame 42"

STRIPE = "sk_live_51NzQpLKb8xT2vR9mW4cY7dE3fG6hJ1kL0pA5sD8gF2hK"
STRIPE_RESTRICTED = "rk_live_51NzQpLKb8xT2vR9mW0tUv3XyZ6aB9cD2eF5gH8jK"
HF = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm0123456789"
GLPAT = "glpat-x9Yz8Wv7Ut6Sr5Qp4On3"
NPM = "npm_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2b4C"
PYPI = "pypi-AgEIcHlwaS5vcmcCJDk5ZWY3ZDIyLTNmNWQtNGI2Yi1hYzQxLTcxMmQ2ZTg5YzE0MAACKlsz"
AZURE = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6QUJDREVGR0g0NTY3OD=="
FLAG_CRED = "Ku8#mP2vQx7"
MYSQL_CRED = "r00tPa55-dev"
SSHPASS_CRED = "deploy-Pw-2024"
CURL_CRED = "jenkins-Adm1n-pw"
HEADER_KEY = "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e"
GH_CLASSIC_HEX = "5d41402abc4b2a76b9719d911017c592ae2f3b1c"
YAML_CRED = "Pg-prod-7781xq"
YAML_API_KEY = "live-8d6f4a2c9e1b"
INI_CRED = "Ch4ng3d-0n-Mon"
RAILS_BASE_VALUE = "9c2e4f6a8b0d1f3e5a7c9e1b3d5f7a9c2e4f6a8b0d1f3e5a7c9e1b3d5f7a9c"
COOKIE_SESSION = "s%3AQm9vZ2llLXNlc3Npb24tMTIz.Xk9vR2mQ7tLp4wZc"
NETRC_CRED = "heroku-api-8c1f2a"
JSON_AUTH = "Zx9-auth-4417"
JSON_PHRASE = "correct horse battery staple"
JSON_SMTP = "smtp-Pw-5521"

SAMPLES: dict[str, Sample] = {
    "private-key-openssh": Sample(
        "private_key",
        write_file(
            "/home/dev/.ssh/id_ed25519",
            "-----BEGIN OPENSSH PRIVATE KEY-----\n"
            + "\n".join(KEY_LINES)
            + "\n-----END OPENSSH PRIVATE KEY-----\n",
        ),
        KEY_LINES,
    ),
    "private-key-rsa-cut": Sample(
        "private_key",
        read_file("/home/dev/app/deploy/key.pem", "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(RSA_LINES)),
        RSA_LINES,
    ),
    "anthropic-export": Sample(
        "anthropic_key",
        bash(f"export ANTHROPIC_API_KEY={ANTHROPIC} && claude -p 'summarize the diff'"),
        (ANTHROPIC, ANTHROPIC[14:40]),
    ),
    "openai-dotenv": Sample(
        "openai_key",
        read_file("/home/dev/app/.env", f"# local only\nOPENAI_API_KEY={OPENAI}\nDEBUG=true\n"),
        (OPENAI,),
    ),
    "aws-configure": Sample(
        "aws_access_key",
        bash(f"aws configure set aws_access_key_id {AWS} --profile ci"),
        (AWS,),
    ),
    "github-ghp-clone": Sample(
        "github_token",
        bash(f"echo {GHP} | gh auth login --with-token && gh repo clone acme/app"),
        (GHP,),
    ),
    "github-pat-prompt": Sample(
        "github_token",
        {
            **BASE,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"Push the release branch.\nUse the token {GITHUB_PAT} for it, then delete it.",
        },
        (GITHUB_PAT,),
    ),
    "slack-bot-token": Sample(
        "slack_token",
        read_file("/home/dev/app/config/slack.yaml", f"slack:\n  channel: '#deploys'\n  bot: {SLACK_BOT}\n"),
        (SLACK_BOT,),
    ),
    "slack-webhook": Sample(
        "slack_webhook",
        bash(
            "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deploy done\"}' "
            f"https://hooks.slack.com/services/{SLACK_HOOK_PATH}"
        ),
        (SLACK_HOOK_PATH, SLACK_HOOK_PATH.rsplit("/", 1)[1]),
    ),
    "google-api-key": Sample(
        "google_api_key",
        pre_tool(
            "WebFetch",
            {
                "url": f"https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={GOOGLE_KEY}",
                "prompt": "What are the coordinates?",
            },
        ),
        (GOOGLE_KEY,),
    ),
    "google-oauth": Sample(
        "google_oauth",
        bash(
            f'curl -s -H "Authorization: Bearer {GOOGLE_OAUTH}" '
            "https://www.googleapis.com/drive/v3/files?pageSize=10"
        ),
        (GOOGLE_OAUTH,),
    ),
    "jwt-login-output": Sample(
        "jwt",
        bash_output(
            "curl -s -X POST localhost:8000/auth/login -d @creds.json",
            json.dumps({"access_token": JWT, "token_type": "bearer", "expires_in": 3600}),
        ),
        (JWT, JWT.split(".")[1], JWT.split(".")[2]),
    ),
    "bearer-header": Sample(
        "bearer",
        bash(f'curl -s -H "Authorization: Bearer {BEARER}" https://api.internal.example/v1/jobs'),
        (BEARER,),
    ),
    "basic-auth-header": Sample(
        "basic_auth",
        bash(f'curl -s -H "Authorization: Basic {BASIC}" http://localhost:8080/api/health'),
        (BASIC,),
    ),
    "postgres-url": Sample(
        "url_password",
        bash(f'pg_dump "postgres://app_user:{URL_CRED}@db.internal:5432/app" --schema-only > schema.sql'),
        (URL_CRED,),
    ),
    "json-key-in-payload": Sample(
        "json_key",
        pre_tool("mcp__postgres__connect", {"host": "db.internal", "user": "app", "password": JSON_CRED}),
        (JSON_CRED,),
    ),
    "json-key-in-file-text": Sample(
        "json_key",
        read_file(
            "/home/dev/app/config/staging.json",
            json.dumps({"db": {"host": "localhost", "password": FILE_CRED}}, indent=2),
        ),
        (FILE_CRED,),
    ),
    "assignment-dotenv": Sample(
        "assignment",
        write_file("/home/dev/app/.env", f"DB_HOST=localhost\nDB_USER=app\nDB_PASSWORD={DOTENV_CRED}\n"),
        (DOTENV_CRED,),
    ),
    "assignment-double-quoted": Sample(
        "assignment",
        bash(f'GITHUB_TOKEN="{QUOTED_CRED}" gh release create v1.2.0 --notes "fixes"'),
        (QUOTED_CRED,),
    ),
    "assignment-single-quoted": Sample(
        "assignment",
        bash(f"MY_SECRET='{SINGLE_CRED}' ./deploy.sh staging"),
        (SINGLE_CRED,),
    ),
    "stripe-live-key": Sample(
        "stripe_key",
        read_file("/home/dev/app/.env", f"STRIPE_SECRET_KEY={STRIPE}\nSTRIPE_PUBLISHABLE=pk_live_x\n"),
        (STRIPE,),
    ),
    "stripe-restricted-key": Sample(
        "stripe_key",
        bash(f"curl https://api.stripe.com/v1/charges -u {STRIPE_RESTRICTED}: -d limit=3"),
        (STRIPE_RESTRICTED,),
    ),
    "huggingface-login": Sample(
        "huggingface_token", bash(f"huggingface-cli login --token {HF} --add-to-git-credential"), (HF,)
    ),
    "gitlab-clone": Sample(
        "gitlab_token", bash(f"git clone https://oauth2:{GLPAT}@gitlab.com/acme/app.git"), (GLPAT,)
    ),
    "npmrc": Sample(
        "npm_token", read_file("/home/dev/.npmrc", f"//registry.npmjs.org/:_authToken={NPM}\n"), (NPM,)
    ),
    "pypirc": Sample(
        "pypi_token",
        read_file("/home/dev/.pypirc", f"[pypi]\n  username = __token__\n  password = {PYPI}\n"),
        (PYPI,),
    ),
    "azure-connection-string": Sample(
        "azure_key",
        bash(
            'az storage blob list -c logs --connection-string "DefaultEndpointsProtocol=https;'
            f'AccountName=acmelogs;AccountKey={AZURE};EndpointSuffix=core.windows.net"'
        ),
        (AZURE, AZURE[:30]),
    ),
    "password-flag-separate": Sample(
        "password_flag",
        bash(f"mysql -h db.internal -u app --password {FLAG_CRED} app_prod < schema.sql"),
        (FLAG_CRED,),
    ),
    "password-flag-token": Sample(
        "password_flag",
        bash(f"vault login --method=userpass username=dev --db-password='{FLAG_CRED}' && pg_restore"),
        (FLAG_CRED,),
    ),
    "mysql-attached-p": Sample(
        "cli_password", bash(f"mysql -uroot -p{MYSQL_CRED} -e 'SHOW DATABASES'"), (MYSQL_CRED,)
    ),
    "sshpass": Sample(
        "cli_password",
        bash(f"sshpass -p '{SSHPASS_CRED}' ssh -o StrictHostKeyChecking=no deploy@10.0.4.12 uptime"),
        (SSHPASS_CRED,),
    ),
    "curl-user": Sample(
        "curl_user", bash(f"curl -s -u admin:{CURL_CRED} https://jenkins.internal/api/json"), (CURL_CRED,)
    ),
    "header-x-api-key": Sample(
        "secret_line",
        bash(f"curl -s -H 'X-Api-Key: {HEADER_KEY}' https://api.example.com/v2/items"),
        (HEADER_KEY,),
    ),
    "header-authorization-token": Sample(
        "secret_line",
        bash(f'curl -H "Authorization: token {GH_CLASSIC_HEX}" https://api.github.com/user'),
        (GH_CLASSIC_HEX,),
    ),
    "yaml-password": Sample(
        "secret_line",
        read_file(
            "/home/dev/app/config/database.yml",
            f"production:\n  adapter: postgresql\n  username: app\n  password: {YAML_CRED}\n",
        ),
        (YAML_CRED,),
    ),
    "yaml-api-key-list": Sample(
        "secret_line",
        write_file(
            "/home/dev/app/config/services.yaml", f"providers:\n  - name: geo\n    api_key: {YAML_API_KEY}\n"
        ),
        (YAML_API_KEY,),
    ),
    "ini-password": Sample(
        "assignment",
        read_file("/home/dev/.my.cnf", f"[client]\nuser = root\npassword = {INI_CRED}\n"),
        (INI_CRED,),
    ),
    "secret-key-base": Sample(
        "secret_name",
        write_file(
            "/home/dev/app/.env.production", f"RAILS_ENV=production\nSECRET_KEY_BASE={RAILS_BASE_VALUE}\n"
        ),
        (RAILS_BASE_VALUE,),
    ),
    "cookie-header": Sample(
        "cookie",
        bash(f"curl -s -H 'Cookie: theme=dark; connect.sid={COOKIE_SESSION}' https://app.internal/me"),
        (COOKIE_SESSION,),
    ),
    "netrc": Sample(
        "netrc",
        read_file(
            "/home/dev/.netrc", f"machine api.heroku.com\n  login dev@example.com\n  password {NETRC_CRED}\n"
        ),
        (NETRC_CRED,),
    ),
    "json-keys-auth-pass-cookie": Sample(
        "json_key",
        pre_tool(
            "mcp__smtp__send",
            {"host": "smtp.internal", "auth": JSON_AUTH, "pass": JSON_SMTP, "passphrase": JSON_PHRASE},
        ),
        (JSON_AUTH, JSON_SMTP, JSON_PHRASE),
    ),
    "json-set-cookie": Sample(
        "json_key",
        post_tool(
            "WebFetch",
            {"url": "https://app.internal/login", "prompt": "log in"},
            {
                "headers": {
                    "set-cookie": f"connect.sid={COOKIE_SESSION}; Path=/; HttpOnly",
                    "cookie": NETRC_CRED,
                }
            },
        ),
        (COOKIE_SESSION, NETRC_CRED),
    ),
}

BENIGN: dict[str, Json] = {
    "primary-key": pre_tool(
        "Edit",
        {
            "file_path": "/home/dev/app/models.py",
            "old_string": "id = Column(Integer)",
            "new_string": "id = Column(Integer, primary_key=True)",
        },
    ),
    "env-reference": bash('API_KEY=$API_KEY docker compose up -d && curl -H "x-api-key: $API_KEY" localhost'),
    "max-tokens": write_file(
        "/home/dev/app/ask.py",
        'resp = client.messages.create(model="claude-sonnet-4-5", max_tokens=1000, messages=msgs)\n',
    ),
    "prose": {
        **BASE,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "The password reset flow e-mails a token; the sign-in form should never log the secret key",
    },
    "task-notification": {
        **BASE,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "<task-notification>\n<task-id>a3b2a1188c0ad1223</task-id>\n<status>completed</status>\n"
        '<summary>Agent "Research teammate" finished</summary>\n</task-notification>',
    },
    "placeholders": write_file(
        "/home/dev/app/.env.example",
        "SECRET_KEY=...\nAPI_TOKEN=<your-token>\nDB_PASSWORD=\nSESSION_TIMEOUT=3600\nDEBUG_TOKEN=false\n",
    ),
    "empty-and-null-json-keys": pre_tool("mcp__db__connect", {"password": "", "token": None, "api_key": 12}),
    "ordinary-words": {
        **BASE,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Renew the passport scan, then pass the test suite; the compass: north. Token counts are "
        "fine. Authorization is handled upstream; see src/auth/token.py and tests/test_password.py",
    },
    "ordinary-flags": bash(
        "mkdir -p build && ssh -p 2222 dev@box && docker run -p 8080:80 -u 1000:1000 app && "
        "git push -u origin main && pg_dump --password-file /run/secrets/db && "
        "gh auth login --with-token < t.txt"
    ),
    "searching-for-secret-words": bash(
        'grep -rn "password:" config/ && rg -l "api_key: " src && echo "token:" "done" && grep -c key: f'
    ),
    "ordinary-ids-and-paths": bash_output(
        "git log -1 --format='%H %s' && cat /proc/sys/kernel/random/uuid",
        "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 Fix the token refresh\n"
        "3f0c9a7e-5d21-4b8e-9c4a-1e2f3a4b5c6d\n/home/dev/.ssh/known_hosts /etc/ssl/private/README\n",
    ),
    "ordinary-config": write_file(
        "/home/dev/app/deploy.yaml",
        "env:\n  - key: NODE_ENV\n    value: production\n  token_type: bearer\n  max_tokens: 1000\n"
        "  password_min_length: 12\n  oauth: enabled\nPASSWORD_FILE=/run/secrets/db\nTOKEN_URL=https://a.b/t\n"
        "SECRET_NAME=app-secret\nkey: value\n",
    ),
    "usage-counters": {
        **BASE,
        "hook_event_name": "Stop",
        "last_assistant_message": "Done: input_tokens=1200, output_tokens=345.",
        "usage": {"input_tokens": 1200, "output_tokens": 345, "cache_read_input_tokens": 0},
    },
}


# The shapes issue 34 found reaching the bus (15 of 35), and more of the same families, each as a
# command with the secret where people put it: (command, secret).
SHAPES: dict[str, tuple[str, str]] = {
    "mysql -pX": ("mysql -h db -uroot -pTr1cky-Pw app", "Tr1cky-Pw"),
    "mysql --password X": ("mysql -u root --password Tr1cky-Pw app", "Tr1cky-Pw"),
    "mysqldump --password=X": ("mysqldump --user=root --password=Tr1cky-Pw app > dump.sql", "Tr1cky-Pw"),
    "sshpass -p X": ("sshpass -p Tr1cky-Pw ssh deploy@host", "Tr1cky-Pw"),
    "curl -u user:pw": ("curl -u admin:Tr1cky-Pw https://ci.internal/api", "Tr1cky-Pw"),
    "curl --user=user:pw": ("curl --user=admin:Tr1cky-Pw https://ci.internal/api", "Tr1cky-Pw"),
    "X-Api-Key header": ("curl -H 'X-Api-Key: 1a2b3c4d5e6f7a8b' https://api.x", "1a2b3c4d5e6f7a8b"),
    "Authorization: token": ('curl -H "Authorization: token 9f8e7d6c5b4a" https://api.x', "9f8e7d6c5b4a"),
    "curl -v request line": ("printf '> Authorization: Token 9f8e7d6c5b4a\\n'", "9f8e7d6c5b4a"),
    "YAML password:": ("printf 'db:\\n  password: Tr1cky-Pw\\n' > db.yml", "Tr1cky-Pw"),
    "YAML api_key:": ("printf 'geo:\\n  api_key: 1a2b3c4d5e6f\\n' > geo.yml", "1a2b3c4d5e6f"),
    "INI password =": ("printf '[client]\\npassword = Tr1cky-Pw\\n' > .my.cnf", "Tr1cky-Pw"),
    "Stripe sk_live_": ("export STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    "Stripe rk_live_": (
        "stripe --api-key rk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_live_4eC39HqLyjWDarjtT1zdp7dc",
    ),
    "Hugging Face hf_": (
        "HF=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 python t.py",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    "Azure AccountKey=": (
        "az x --cs 'AccountName=a;AccountKey=QUJDREVGR0hJSktMTU5PUFFSU1RVVldY==;E=x'",
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
    ),
    "SECRET_KEY_BASE=": ("SECRET_KEY_BASE=4f6a8b0d1f3e5a7c bin/rails s", "4f6a8b0d1f3e5a7c"),
    "DB_PASSWORD=": ("DB_PASSWORD=Tr1cky-Pw npm start", "Tr1cky-Pw"),
    "MY_API_TOKEN=": ("MY_API_TOKEN=Tr1cky-Pw ./sync.sh", "Tr1cky-Pw"),
    "GitHub github_pat_": (
        "gh auth login --with-token <<< github_pat_11ABCDEFG0aB3dE5gH7jK9mN1pQ3rS5",
        "github_pat_11ABCDEFG0aB3dE5gH7jK9mN1pQ3rS5",
    ),
    "GitLab glpat-": (
        "git remote add o https://gitlab.com/a.git # glpat-x9Yz8Wv7Ut6Sr5Qp4On3",
        "glpat-x9Yz8Wv7Ut6Sr5Qp4On3",
    ),
    "Slack xoxp-": (
        "slack-cli auth xoxp-2741234567-4812345678901-q8WcUvbhYKNq",
        "xoxp-2741234567-4812345678901-q8WcUvbhYKNq",
    ),
    "npm npm_": (
        "npm config set //r/:_authToken npm_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2b4C",
        "npm_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2b4C",
    ),
    "Google AIza": (
        "gcloud x --key AIzaSyD4v8Xq2Lm7Rt9Wk3Np6Bc1Hf5Jy0Gs8Ze",
        "AIzaSyD4v8Xq2Lm7Rt9Wk3Np6Bc1Hf5Jy0Gs8Ze",
    ),
    "OpenAI sk-proj-": (
        "llm keys set openai sk-proj-T7hVq2Lr9Xw4Zk8Nc1Bm6Pd3Fs0Gy5Jh",
        "sk-proj-T7hVq2Lr9Xw4Zk8Nc1Bm6Pd3Fs0Gy5Jh",
    ),
    "Anthropic sk-ant-": (
        "claude config set key sk-ant-api03-Xk9vR2mQ7tLp4wZc8nB1yH6d",
        "sk-ant-api03-Xk9vR2mQ7tLp4wZc8nB1yH6d",
    ),
    "mongodb+srv URL": ("mongosh 'mongodb+srv://app:Tr1cky-Pw@c0.x.mongodb.net/db'", "Tr1cky-Pw"),
    "redis URL, no user": ("redis-cli -u redis://:Tr1cky-Pw@cache:6379/0 ping", "Tr1cky-Pw"),
    ".netrc password": ("printf 'machine h login me password Tr1cky-Pw\\n' >> ~/.netrc", "Tr1cky-Pw"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_of_the_issue_is_redacted(shape: str) -> None:
    command, secret = SHAPES[shape]
    for text in texts(bash(command)):
        assert secret in text
        redacted, count = redact_text(text)
        json.loads(redacted)
        assert secret not in redacted, json.loads(redacted)["tool_input"]["command"]
        assert count >= 1
        assert redact_text(redacted) == (redacted, 0)


def texts(payload: Json) -> list[str]:
    """The payload as Claude Code's compact UTF-8 and as json.dumps' default (spaces, ASCII escapes)."""
    return [json.dumps(payload, separators=(",", ":"), ensure_ascii=False), json.dumps(payload)]


def test_every_rule_has_a_sample() -> None:
    assert {s.rule for s in SAMPLES.values()} == set(RULE_NAMES)


@pytest.mark.parametrize("name", SAMPLES)
def test_rule_redacts_its_sample(name: str) -> None:
    rule, payload, secrets = SAMPLES[name]
    for text in texts(payload):
        for secret in secrets:
            assert secret in text, "the sample must contain its secret"
        redacted, count = redact_text(text)
        parsed = json.loads(redacted)  # still valid JSON
        for secret in secrets:
            assert secret not in redacted
        assert f"[REDACTED:{rule}]" in redacted
        assert count > 0
        # Nothing but the secret changed: same keys, same headline.
        assert set(parsed) == set(payload)
        for key in ("hook_event_name", "session_id", "tool_name", "tool_use_id", "cwd"):
            assert parsed.get(key) == payload.get(key)


def test_assignment_keeps_the_name_and_marks_the_value() -> None:
    redacted, count = redact_text(json.dumps(SAMPLES["assignment-dotenv"].payload))
    content = json.loads(redacted)["tool_input"]["content"]
    assert content == "DB_HOST=localhost\nDB_USER=app\nDB_PASSWORD=[REDACTED:assignment]\n"
    assert count == 1


def test_bearer_and_url_keep_their_context() -> None:
    redacted, _ = redact_text(json.dumps(SAMPLES["bearer-header"].payload))
    command = json.loads(redacted)["tool_input"]["command"]
    assert (
        command == 'curl -s -H "Authorization: Bearer [REDACTED:bearer]" https://api.internal.example/v1/jobs'
    )
    redacted, _ = redact_text(json.dumps(SAMPLES["postgres-url"].payload))
    command = json.loads(redacted)["tool_input"]["command"]
    assert "postgres://app_user:[REDACTED:url_password]@db.internal:5432/app" in command


def test_several_secrets_in_one_payload_are_all_counted() -> None:
    payload = read_file(
        "/home/dev/app/.env",
        f"ANTHROPIC_API_KEY={ANTHROPIC}\nOPENAI_API_KEY={OPENAI}\nAWS_ACCESS_KEY_ID={AWS}\nDB_PASSWORD={DOTENV_CRED}\n",
    )
    redacted, count = redact_text(json.dumps(payload))
    json.loads(redacted)
    for secret in (ANTHROPIC, OPENAI, AWS, DOTENV_CRED):
        assert secret not in redacted
    assert count == 4


@pytest.mark.parametrize("name", BENIGN)
def test_benign_values_are_not_redacted(name: str) -> None:
    for text in texts(BENIGN[name]):
        assert redact_text(text) == (text, 0)


@pytest.mark.parametrize("name", SAMPLES)
def test_redaction_is_idempotent(name: str) -> None:
    for text in texts(SAMPLES[name].payload):
        once, count = redact_text(text)
        assert count > 0
        assert redact_text(once) == (once, 0)


def test_redaction_of_every_fixture_is_idempotent_and_valid() -> None:
    for name, payload, _ in all_fixtures():
        once, _ = redact_text(json.dumps(payload))
        assert isinstance(json.loads(once), dict), name
        assert redact_text(once) == (once, 0), name


@pytest.mark.parametrize("name", SAMPLES)
def test_no_secret_reaches_the_encoded_envelope(name: str) -> None:
    _, payload, secrets = SAMPLES[name]
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    expected_count = redact_text(raw.decode())[1]
    out = envelopes_from_stdin(raw, {})
    assert len(out) == 1
    _, env = out[0]
    assert env["event"] == payload["hook_event_name"], "the event stays an event, not an invalid payload"
    assert env["redacted"] == expected_count > 0
    body = encode_envelope(env).decode()
    for secret in secrets:
        assert secret not in body
        assert secret not in env["text"]


def test_secret_in_a_summary_line_is_marked_in_text() -> None:
    _, env = envelopes_from_stdin(json.dumps(SAMPLES["anthropic-export"].payload).encode(), {})[0]
    assert env["text"].startswith("$ export ANTHROPIC_API_KEY=[REDACTED:anthropic_key]")


def test_no_secret_reaches_a_send_message_companion() -> None:
    payload = post_tool(
        "SendMessage",
        {"to": "deployer", "summary": f"token {GHP}", "message": f"Use GITHUB_TOKEN={GHP} for the release"},
        {"success": True, "message": "Message queued."},
    )
    out = envelopes_from_stdin(json.dumps(payload).encode(), {})
    assert [s for s, _ in out] == ["genie.tool.main-3f0c9a7e.result", "genie.msg.deployer"]
    for _, env in out:
        body = encode_envelope(env).decode()
        assert GHP not in body
        assert "[REDACTED:github_token]" in body
    assert out[0][1]["redacted"] == 2


NO_RE_SCRIPT = """
import sys
from agentwatch.contract import encode_envelope, envelopes_from_stdin
before = "re" in sys.modules
for _, env in envelopes_from_stdin(sys.stdin.buffer.read(), {}):
    encode_envelope(env)
print(before, "re" in sys.modules)
"""


def imports_re(payload: Json) -> tuple[bool, bool]:
    done = subprocess.run(
        [sys.executable, "-c", NO_RE_SCRIPT],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    before, after = done.stdout.decode().split()
    return before == "True", after == "True"


def test_payload_without_trigger_does_not_import_re() -> None:
    plain = bash("ls -la src && git status --short")
    assert imports_re(plain) == (False, False)
    # The check can see `re`: a payload with a trigger loads it.
    assert imports_re(SAMPLES["bearer-header"].payload) == (False, True)


# --- known gaps: JSON text around a secret ------------------------------------------------------


def test_private_key_before_an_escaped_quote_keeps_json_valid() -> None:
    # A PEM literal split across a Python string concatenation: the key's text is followed by
    # `\"` in the JSON text. The redaction must not eat the backslash of that escape.
    source = 'KEY = (\n    "-----BEGIN RSA PRIVATE KEY-----\\n"\n    "' + RSA_LINES[0] + '\\n"\n)\n'
    payload = write_file("/home/dev/app/tests/keys.py", source)
    redacted, count = redact_text(json.dumps(payload))
    assert count > 0
    json.loads(redacted)
    out = envelopes_from_stdin(json.dumps(payload).encode(), {})
    assert out[0][1]["event"] == "PreToolUse"


def test_single_quoted_assignment_does_not_swallow_json_structure() -> None:
    # An unterminated quote in a command, and bash's error quoting it: the value of the
    # assignment must stay inside its own JSON string.
    payload = {
        **BASE,
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": "export DB_PASSWORD='s3cr3t-pw", "description": "Set the password"},
        "tool_use_id": "toolu_01Quote",
        "error": "Exit code 2\n/bin/bash: -c: line 1: unexpected EOF while looking for matching `''",
        "is_interrupt": False,
    }
    redacted, _ = redact_text(json.dumps(payload))
    assert "s3cr3t-pw" not in redacted
    parsed = json.loads(redacted)
    assert set(parsed) == set(payload)
    _, env = envelopes_from_stdin(json.dumps(payload).encode(), {})[0]
    assert env["event"] == "PostToolUseFailure"


def test_json_key_value_with_an_escaped_quote_is_redacted_whole() -> None:
    generated = 'k9"Xq!2vLm'  # generated passwords do contain quotes
    payload = pre_tool(
        "mcp__postgres__connect", {"host": "db.internal", "user": "app", "password": generated}
    )
    redacted, count = redact_text(json.dumps(payload))
    assert count > 0
    parsed = json.loads(redacted)
    assert "Xq!2vLm" not in redacted, f"secret tail left: {parsed['tool_input']['password']!r}"


def test_secret_at_the_start_of_a_line_is_redacted() -> None:
    # A key pasted on its own line of a prompt (or a file, or a command's output): in the JSON
    # text it follows the `\n` escape, whose `n` is a word character.
    leaked = []
    for rule, secret in [
        ("anthropic_key", ANTHROPIC), ("openai_key", OPENAI), ("aws_access_key", AWS),
        ("github_token", GHP), ("github_token", GITHUB_PAT), ("slack_token", SLACK_BOT),
        ("google_api_key", GOOGLE_KEY), ("google_oauth", GOOGLE_OAUTH), ("jwt", JWT),
    ]:  # fmt: skip
        payload = {
            **BASE,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"Here is the key for staging:\n{secret}\n\tand\t{secret}\nPut it in the vault.",
        }
        redacted, _ = redact_text(json.dumps(payload))
        json.loads(redacted)
        if secret in redacted:
            leaked.append(rule)
    assert leaked == [], f"left in clear text after a line break or tab: {leaked}"


def test_token_inside_a_url_is_marked_once() -> None:
    # A token used as the user of a clone URL: one secret, one marker naming its rule.
    payload = bash(f"git clone https://{GHP}@github.com/acme/app.git /tmp/app")
    redacted, count = redact_text(json.dumps(payload))
    command = json.loads(redacted)["tool_input"]["command"]
    assert GHP not in redacted
    assert command == "git clone https://[REDACTED:github_token]@github.com/acme/app.git /tmp/app"
    assert count == 1


# Fragments that make the rules' hard cases: names that end in a secret word next to `=` and `:`,
# quotes and escaped quotes, URL schemes with `+ . -`, letters that case-fold onto ASCII (long s,
# Kelvin sign, dotted and dotless I) and others that do not, line breaks as JSON writes them.
FRAGMENTS = (
    "key", "KEY", "api_key", "apiKey", "my-api-key", "token", "Token", "secret", "_secret", "pwd",
    "passwd", "password", "PASSWORD", "monkey", "=", " = ", "\t=", "==", '"', '\\"', ": ", ":", "://",
    "https", "git+ssh", "a.b-c", "user", "@", "host", "/", " ", "\\n", "\\t", "'", "value123",
    "s3cr3t-v4lue", "\u017f", "\u212a", "\u0131", "\u0130", "\u00e9", "-", ".", "+", ",", "}", "{",
    "eyJhbGciOi", "bearer ", "Bearer ", "sk-ant-", "x" * 25, "$HOME", "null",
    '"api_key": "', '"Token":"', '\\"password\\": \\"', '\\"db-secret\\":\\"', "https://", "git+ssh://",
    "ci:", "hunter2@", "me:pa:ss@",
    "cookie:", "Set-Cookie: ", "token:", "api_key:", "X-Api-Key: ", "auth:", "pass:", "SECRET_", "_BASE",
    "password_", "PASSWORD_", "--password ", "--token=", "--db-", " -p", "mysql ", "sshpass ", "curl ",
    " -u ", "--user ", "login ", "password ", "- ", "  ", "\\t", "\\r", "'", ">", "a:b",
)  # fmt: skip


def _texts(count: int) -> list[str]:
    import random

    rng = random.Random(11)  # noqa: S311 - reproducible test input
    texts = [json.dumps(payload) for _, payload, _ in all_fixtures()]
    texts += ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 40))) for _ in range(count)]
    return texts


def test_rules_tried_only_where_a_match_can_start_find_what_a_full_scan_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rules that look for a name of any length are tried only where one can start; with that
    turned off they scan every position: both must give the same text and the same count."""
    from agentwatch import redact

    texts = _texts(20000)
    fast = [redact_text(t) for t in texts]
    monkeypatch.setattr(redact, "_STARTS", {})
    slow = [redact_text(t) for t in texts]
    differ = [(t, f, s) for t, f, s in zip(texts, fast, slow, strict=True) if f != s]
    assert differ == [], differ[:3]
    assert sum(n for _, n in slow) > 1000, "the generated texts exercise the rules"


def test_a_word_boundary_after_the_prefix_is_the_same_as_before_it() -> None:
    import random
    import re

    from agentwatch.redact import _B, _after

    rng = random.Random(5)  # noqa: S311 - reproducible test input
    pieces = ("eyJ", "xeyJ", "\\neyJ", "\\\\eyJ", "_eyJ", " eyJ", "-eyJ", "\u00e9eyJ", "AKIA", "zAKIA")
    for prefix in ("eyJ", "(?:AKIA|ASIA)"):
        before, after = re.compile(_B + prefix), re.compile(_after(prefix))
        for _ in range(3000):
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
            assert [m.span() for m in before.finditer(text)] == [m.span() for m in after.finditer(text)], text
