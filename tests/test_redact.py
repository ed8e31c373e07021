"""What is published is redacted: e-mail, URL credentials, Dask address, local paths."""

from __future__ import annotations

from pipeline.config import config_hash, load_config
from pipeline.redact import redact_config, redact_path, redact_text, redact_url, redact_value
from pipeline.release import manifest_config


def test_urls_lose_credentials_query_and_fragment() -> None:
    assert redact_url("http://u:p@h.example:8080/v1?key=k#f") == "http://h.example:8080/v1"
    assert redact_url("https://[::1]:8443/x") == "https://[::1]:8443/x"
    assert redact_url("not a url") == "not a url"


def test_paths_keep_only_their_file_name() -> None:
    assert redact_path("/home/a/models/q.gguf") == "<local>/q.gguf"
    assert redact_path("~/m.gguf") == "<local>/m.gguf"
    assert redact_path("C:\\Users\\a\\m.gguf") == "<local>/m.gguf"
    assert redact_path("data/articles.txt") == "data/articles.txt"
    assert redact_value("packaged:all-MiniLM-L6-v2") == "packaged:all-MiniLM-L6-v2"


def test_free_text() -> None:
    text = "ua (https://x.example/p; me@example.org) at /srv/data/file.txt, ratio 13/14"
    assert redact_text(text) == (
        "ua (https://x.example/p; <redacted>) at <local>/file.txt, ratio 13/14"
    )


def test_config_hash_is_the_same_before_and_after_redaction() -> None:
    cfg = load_config(
        profile="offline",
        overrides={
            "llm": {"base_url": "http://u:secret@h:1/v1", "local_model": "/home/a/q.gguf"},
            "flow": {"dask_address": "tcp://10.0.0.2:8786"},
        },
    )
    published = manifest_config(cfg)
    assert published["flow"]["dask_address"] == "<redacted>"
    assert "secret" not in str(published) and "/home/a" not in str(published)
    assert config_hash(published) == cfg.stable_hash()
    assert redact_config(published) == published  # idempotent
    plain = load_config(profile="offline")
    # Credentials and folders never count (the model's file name does).
    other = load_config(
        profile="offline",
        overrides={"llm": {"base_url": "http://h:1/v1", "local_model": "/opt/m/q.gguf"}},
    )
    assert cfg.stable_hash() == other.stable_hash() != plain.stable_hash()


def test_console_messages_lose_only_credentials() -> None:
    from pipeline.redact import strip_credentials

    line = "HTTP 500 for parse (http://bob:hunter2@127.0.0.1:8080/w/api.php?action=parse): boom"
    assert strip_credentials(line) == (
        "HTTP 500 for parse (http://127.0.0.1:8080/w/api.php?action=parse): boom"
    )
    assert strip_credentials("see https://example.org/a?b=1") == "see https://example.org/a?b=1"
