"""The model of an opencode project: an OpenAI-compatible provider merged into its `opencode.json`
(`evolve opencode model`), and whether that model answers (`evolve doctor --project`).

opencode's configuration of such a provider, as its documentation gives it:

    "provider": {"<id>": {"name": …, "options": {"baseURL": …, "apiKey": "{env:VAR}"},
                          "models": {"<model>": {"name": …}}}},
    "model": "<id>/<model>"

The key stays in an environment variable, which opencode reads where the config says `{env:VAR}`.
The check sends one small streamed chat request to `<baseURL>/chat/completions`, as opencode does.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from engine.opencode.shim_install import InstallError, config_path, global_config, read_config, write_config

DEFAULT_PROVIDER = "llm"
OPENAI_COMPATIBLE = "@ai-sdk/openai-compatible"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PROVIDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ENV_REFERENCE = re.compile(r"\{env:([^}]*)\}")
FILE_REFERENCE = re.compile(r"\{file:([^}]*)\}")
PROMPT = "Reply with the single word OK."
TIMEOUT_S = 60.0


class ModelError(ValueError):
    """Input `evolve opencode model` refuses; the message says what is wrong and what to give."""


def check_base_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelError(
            f"--base-url {url!r} is not an http:// or https:// URL; give the server's OpenAI-compatible "
            "base, for example http://127.0.0.1:8080/v1"
        )
    if parts.query or parts.fragment:
        raise ModelError(f"--base-url {url!r} has a query or a fragment; give only the base, e.g. …/v1")
    return url.strip().rstrip("/")


def check_model(name: str) -> str:
    if not name.strip() or any(c.isspace() for c in name):
        raise ModelError(f"--model {name!r} is not a model name (the name the server knows, without spaces)")
    return name


def check_env_name(name: str) -> str:
    if ENV_NAME.fullmatch(name):
        return name
    if name.startswith(("sk-", "sk_")) or len(name) >= 24:
        raise ModelError(
            "--api-key-env takes the name of the environment variable that holds the key (such as "
            "MYLLM_API_KEY), not the key itself: the key stays out of opencode.json"
        )
    raise ModelError(f"--api-key-env {name!r} is not an environment variable name (letters, digits, _)")


def check_provider(provider: str) -> str:
    if not PROVIDER_ID.fullmatch(provider):
        raise ModelError(f"--provider {provider!r} is not a provider id (letters, digits, '.', '_', '-')")
    return provider


def set_model(
    project: Path,
    base_url: str,
    model: str,
    api_key_env: str | None = None,
    provider: str = DEFAULT_PROVIDER,
    name: str | None = None,
) -> dict[str, Any]:
    """Merge the provider and its model into the project's opencode.json and make it the model;
    nothing else changes (the plugin entry, other providers, other settings). ModelError for bad
    input, InstallError for a config file that cannot be changed; nothing is written then."""
    base_url = check_base_url(base_url)
    check_model(model)
    check_provider(provider)
    if api_key_env is not None:
        check_env_name(api_key_env)
    path = config_path(project)
    data = read_config(path)
    providers = data.setdefault("provider", {})
    if not isinstance(providers, dict):
        raise InstallError(f"{path}: 'provider' must be an object; nothing was changed")
    entry = providers.setdefault(provider, {})
    if not isinstance(entry, dict):
        raise InstallError(f"{path}: provider {provider!r} must be an object; nothing was changed")
    package = entry.get("npm")
    if package not in (None, OPENAI_COMPATIBLE):
        raise ModelError(
            f"provider {provider!r} in {path} uses {package}, not an OpenAI-compatible package; "
            "choose another --provider"
        )
    before = json.dumps(data, sort_keys=True)
    entry.setdefault("name", name or f"{urlsplit(base_url).hostname} (OpenAI-compatible)")
    if name is not None:
        entry["name"] = name
    options = entry.setdefault("options", {})
    models = entry.setdefault("models", {})
    if not isinstance(options, dict) or not isinstance(models, dict):
        raise InstallError(f"{path}: provider {provider!r}: 'options' and 'models' must be objects")
    options["baseURL"] = base_url
    if api_key_env is not None:
        options["apiKey"] = f"{{env:{api_key_env}}}"
    if not isinstance(models.get(model), dict):
        models[model] = {"name": model}
    data["model"] = f"{provider}/{model}"
    changed = json.dumps(data, sort_keys=True) != before
    if changed:
        write_config(path, data)
    return {"config": str(path), "changed": changed, "model": data["model"], "provider": {provider: entry}}


# ---- does the model answer? ---------------------------------------------------------------------------


@dataclass
class Answer:
    """What one small request to the project's model found."""

    ref: str  # provider/model, as opencode.json names it
    url: str
    ok: bool
    latency_s: float = 0.0
    server_model: str = ""  # the model the server says answered
    text: str = ""
    problem: str = ""


def _resolve(value: Any, env: Mapping[str, str], base: Path) -> tuple[str, list[str]]:
    """A config value with opencode's `{env:VAR}` and `{file:PATH}` substituted; the variables that
    are not set."""
    if not isinstance(value, str):
        return "", []
    missing = [m for m in ENV_REFERENCE.findall(value) if not env.get(m)]
    text = ENV_REFERENCE.sub(lambda m: env.get(m.group(1), ""), value)

    def read(match: re.Match[str]) -> str:
        path = Path(os.path.expanduser(match.group(1)))
        try:
            return (path if path.is_absolute() else base / path).read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    return FILE_REFERENCE.sub(read, text), missing


def project_model(project: Path, home: Path | None = None) -> tuple[str | None, dict[str, Any], Path]:
    """The model opencode uses in `project` ("provider/model" or None), the provider configurations
    it sees (the project's over the global config's), and the project's config file."""
    path = config_path(project)
    data = read_config(path)
    glob = global_config(home)
    providers: dict[str, Any] = {}
    for source in (glob, data):
        section = source.get("provider")
        if isinstance(section, dict):
            providers.update(section)
    ref = data.get("model") or glob.get("model")
    return (ref if isinstance(ref, str) and ref else None), providers, path


def ask(
    project: Path, env: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S, home: Path | None = None
) -> tuple[Answer | None, list[str]]:
    """Send the project's model one small streamed chat request. (None, [why]) when there is nothing
    to ask (no model set, or one of opencode's own providers); else the answer and notes (a key
    variable that is not set)."""
    env = os.environ if env is None else env
    ref, providers, path = project_model(project, home)
    if ref is None:
        return None, [f"no model is set in {path} (opencode picks one of its own providers')"]
    provider_id, _, model = ref.partition("/")
    provider = providers.get(provider_id)
    options = provider.get("options") if isinstance(provider, dict) else None
    base = options.get("baseURL") if isinstance(options, dict) else None
    if not isinstance(base, str) or not base:
        return None, [
            f"{ref} is served by opencode's own provider {provider_id!r}; only a provider with a baseURL is asked"
        ]
    assert isinstance(provider, dict) and isinstance(options, dict)
    url = base.rstrip("/")
    models = provider.get("models")
    if not isinstance(models, dict) or model not in models:
        return Answer(
            ref, url, False, problem=f"provider {provider_id!r} lists no model {model!r}: opencode refuses it"
        ), []
    key, missing = _resolve(options.get("apiKey"), env, project)
    notes = [f"{name} is not set in this environment: opencode started here sends no key" for name in missing]
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    extra = options.get("headers")
    if isinstance(extra, dict):
        headers.update({str(k): _resolve(v, env, project)[0] for k, v in extra.items()})
    return _stream(ref, url, model, headers, timeout), notes


def _stream(ref: str, url: str, model: str, headers: dict[str, str], timeout: float) -> Answer:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "max_tokens": 16,
    }
    answer = Answer(ref, url, False)
    started = time.perf_counter()
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout, connect=10)) as http,
            http.stream("POST", f"{url}/chat/completions", json=body, headers=headers) as resp,
        ):
            if resp.status_code >= 400:
                answer.problem = _http_problem(resp.status_code, resp.read().decode("utf-8", "replace"))
                return answer
            if "json" in resp.headers.get("content-type", ""):  # a server that does not stream
                _take(answer, json.loads(resp.read()), "message")
            else:
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line.removeprefix("data:").strip()
                    if data == "[DONE]":
                        break
                    _take(answer, json.loads(data), "delta")
    except httpx.ConnectError as exc:
        answer.problem = f"nothing answers there ({_reason(exc)}): is the server running?"
        return answer
    except httpx.TimeoutException:
        answer.problem = f"no answer within {timeout:g} s"
        return answer
    except (httpx.HTTPError, ValueError) as exc:
        answer.problem = f"{type(exc).__name__}: {exc}"
        return answer
    answer.latency_s = time.perf_counter() - started
    answer.ok = bool(answer.server_model or answer.text)
    if not answer.ok:
        answer.problem = "the server answered, but not with a chat completion"
    return answer


def _take(answer: Answer, chunk: Any, part: str) -> None:
    if not isinstance(chunk, dict):
        raise ValueError("not a JSON object")
    if isinstance(chunk.get("error"), dict | str):
        raise ValueError(f"the server reported an error: {chunk['error']}")
    answer.server_model = answer.server_model or str(chunk.get("model") or "")
    for choice in chunk.get("choices") or []:
        content = (choice.get(part) or {}).get("content") if isinstance(choice, dict) else None
        if isinstance(content, str):
            answer.text += content


def _http_problem(status: int, body: str) -> str:
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    detail = str(message or body.strip() or "no body")[:200]
    hint = {
        401: " (is the key right?)",
        403: " (is the key right?)",
        404: " (is the base URL right? it usually ends in /v1; is the model name one the server knows?)",
    }.get(status, "")
    return f"HTTP {status}: {detail}{hint}"


def _reason(exc: Exception) -> str:
    text = str(exc)
    return "connection refused" if "refused" in text.lower() else text or type(exc).__name__
