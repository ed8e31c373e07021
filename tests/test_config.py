"""Config loading: defaults, profiles, precedence, and errors that name key, value, allowed."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from pipeline.config import DEFAULT_CONFIG_PATH, load_config
from pipeline.errors import ConfigError


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "wikidrift.toml"
    path.write_text(text)
    return path


def test_default_file_is_the_offline_demo_on_the_shipped_sample() -> None:
    cfg = load_config()
    assert DEFAULT_CONFIG_PATH.exists()
    assert cfg.profile == "offline" and cfg.llm.backend == "auto"
    assert cfg.llm.local_model == "packaged:Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert cfg.snapshot.source == "revisions-dir"
    sample = cfg.resolve_path(cfg.snapshot.input)
    assert [d.isoformat() for d in cfg.snapshot.dates] == ["2024-01-01", "2024-06-01", "2025-01-01"]
    for page in (sample / "revisions").iterdir():
        assert {p.stem for p in page.iterdir()} == {d.isoformat() for d in cfg.snapshot.dates}


def test_paper_file_loads_with_paper_profile() -> None:
    cfg = load_config(DEFAULT_CONFIG_PATH.with_name("paper.toml"))
    assert cfg.profile == "paper"
    assert cfg.models.embedder == "simcse:princeton-nlp/sup-simcse-roberta-large"
    assert cfg.models.nli == "roberta-large-mnli"
    assert (cfg.align.unchanged_threshold, cfg.align.changed_min_similarity) == (0.99, 0.6)
    assert cfg.align.new_max_similarity == 0.7
    assert cfg.snapshot.source == "api"
    assert cfg.resolve_path(cfg.snapshot.articles).exists()


def test_offline_profile_uses_packaged_models() -> None:
    cfg = load_config(profile="offline")
    assert cfg.models.embedder == "packaged:all-MiniLM-L6-v2"
    assert cfg.models.nli == ""


@pytest.mark.parametrize(
    ("profile", "key", "base_url", "kind"),
    [
        ("paper", "sk-test", "", "openai"),
        ("paper", "", "", "local"),
        ("offline", "sk-test", "", "local"),  # offline never calls OpenAI's API
        ("offline", "", "http://127.0.0.1:8080/v1", "openai"),  # a user's own server
    ],
)
def test_auto_backend(
    profile: str, key: str, base_url: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.runtime import resolve_llm_kind

    monkeypatch.setenv("OPENAI_API_KEY", key)
    cfg = load_config(profile=profile, overrides={"llm": {"base_url": base_url}})
    assert resolve_llm_kind(cfg) == kind


def test_file_beats_profile_and_cli_beats_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        'profile = "offline"\n[models]\nembedder = "st:my/model"\n[snapshot]\nsource = "dump"\n',
    )
    cfg = load_config(path, overrides={"snapshot": {"source": "revisions-dir"}})
    assert cfg.models.embedder == "st:my/model"  # explicit key wins over the profile default
    assert cfg.snapshot.source == "revisions-dir"  # CLI wins over the file
    assert load_config(path, profile="paper").models.nli == "roberta-large-mnli"


def test_dates_parse_and_must_ascend(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, '[snapshot]\ndates = ["2024-01-01", "2024-06-01"]\n'))
    assert cfg.snapshot.dates == [date(2024, 1, 1), date(2024, 6, 1)]
    with pytest.raises(ConfigError, match="snapshot.dates"):
        load_config(_write(tmp_path, '[snapshot]\ndates = ["2024-06-01", "2024-01-01"]\n'))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[align]\nunchanged_threshold = 1.5\n", r"align\.unchanged_threshold = 1\.5: .*less than"),
        (
            '[snapshot]\nsource = "ftp"\n',
            r"snapshot\.source = 'ftp': allowed: api, dump, revisions-dir$",
        ),
        ("[align]\nthreshold = 0.9\n", r"align\.threshold = 0\.9: unknown key; allowed here: "),
        ('profile = "fast"\n', r"profile = 'fast': allowed: offline, paper"),
        ("[api]\nmax_workers = 0\n", r"api\.max_workers = 0"),
        (
            '[align]\njudge_classes = ["names"]\n',
            r"align\.judge_classes = \['names'\]: no judge question is written for \['names'\]",
        ),
    ],
)
def test_bad_values_name_key_value_and_allowed(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(_write(tmp_path, text))


def test_unknown_key_lists_allowed_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, "[align]\nthreshold = 0.9\n"))
    assert "max_span" in str(err.value) and "unchanged_threshold" in str(err.value)


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write(tmp_path, "profile = \n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_secret_comes_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert load_config().openai_api_key == "sk-test"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert load_config().openai_api_key is None


def test_stable_hash_changes_with_settings() -> None:
    a = load_config(profile="offline")
    b = load_config(profile="offline", overrides={"align": {"max_span": 3}})
    assert a.stable_hash() == load_config(profile="offline").stable_hash()
    assert a.stable_hash() != b.stable_hash()


def test_stable_hash_ignores_where_and_how_politely() -> None:
    a = load_config(profile="offline")
    b = load_config(
        profile="offline",
        overrides={"workdir": "/elsewhere", "api": {"max_workers": 4}, "llm": {"timeout_s": 5}},
    )
    assert a.stable_hash() == b.stable_hash()
    # how releases are scored is no part of what they contain
    c = load_config(profile="offline", overrides={"evaluate": {"k": 5, "query_prefix": "q: "}})
    assert a.stable_hash() == c.stable_hash()


def test_profiles_pick_the_dense_retriever() -> None:
    paper = load_config(profile="paper").evaluate
    assert "e5" in paper.retriever_embedder
    assert (paper.query_prefix, paper.passage_prefix) == ("query: ", "passage: ")
    offline = load_config(profile="offline").evaluate
    assert (offline.retriever_embedder, offline.query_prefix) == ("", "")  # models.embedder
