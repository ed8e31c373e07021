"""The local llama.cpp server (xllamacpp) with a real small GGUF (SmolLM2-135M from its wheel):
started on 127.0.0.1, spoken to through the OpenAI backend with schema-constrained answers,
stopped without leaving a process or a bound port behind, dying with its parent, and failing
loudly (not as rejected items) when it crashes mid-call. No test asserts on the model's words.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline.generate.prompts import answer_schema, load_prompt, number_sentences
from pipeline.models.llm.base import LLMRequest
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.llamacpp import LlamaCppBackend
from pipeline.models.llm.llamacpp_server import (
    SERVER_ENV,
    LlamaServer,
    LocalServerError,
    ServerSettings,
    health,
    shared_server,
    stop_shared_servers,
)
from pipeline.models.llm.packaged import packaged_gguf

ALIAS = "SmolLM2-135M-Instruct"
SENTENCES = (
    "Karpathy was born in Bratislava, Czechoslovakia, and moved with his family to Toronto "
    "when he was 15.",
    "He joined OpenAI as a founding member in 2015.",
)


def settings(log: Path, **over: object) -> ServerSettings:
    base = {
        "model_path": str(packaged_gguf("packaged:SmolLM2-135M-Instruct")),
        "alias": ALIAS,
        "parallel": 2,
        "ctx_per_slot": 2048,
        "threads": 1,
        "log_path": str(log),
    }
    return ServerSettings(**(base | over))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> LlamaServer:
    running = LlamaServer(settings(tmp_path_factory.mktemp("llama") / "server.log"))
    running.start()
    yield running
    running.stop()


# The answers the QA prompt offers for SENTENCES, per sentence.
CANDIDATES = (("Bratislava", "Toronto", "15"), ("OpenAI", "2015"))


def qa_request(indices: tuple[int, ...] = (4, 9)) -> LLMRequest:
    schema = answer_schema("qa_initial")
    schema["properties"]["answer"]["enum"] = [c for cs in CANDIDATES for c in cs]
    lines = (
        f"[{i}] " + " | ".join(f'"{c}"' for c in cs)
        for i, cs in zip(indices, CANDIDATES, strict=True)
    )
    return load_prompt("qa_initial").request(
        schema=schema,
        title="Andrej Karpathy",
        sentences=number_sentences(indices, SENTENCES),
        candidates="\n".join(lines),
    )


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def process_gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True  # exited; only its parent's reaping is left
        time.sleep(0.1)
    return False


def test_schema_constrained_answers_over_the_openai_wire(
    server: LlamaServer, capfd: pytest.CaptureFixture[str]
) -> None:
    url = urlsplit(server.base_url)
    assert url.hostname == "127.0.0.1" and url.path == "/v1" and health(server.base_url)
    backend = LlamaCppBackend(ALIAS, server.base_url, server=server, max_concurrency=2)
    assert backend.backend_id == "llamacpp" and backend.client.backend_id == "llamacpp"
    responses = backend.complete_many([qa_request(), qa_request((12, 13))])
    for response in responses:
        assert response.error is None, response.error
        assert response.meta["response_format"] == "json_schema"
        # The grammar holds whatever the model wants to say: keys, one of the offered answers.
        assert list(response.parsed) == ["answer", "question"]
        assert response.parsed["answer"] in {c for cs in CANDIDATES for c in cs}
        assert len(response.parsed["question"]) <= 240
        assert response.completion_tokens > 0 and response.model == ALIAS
    out, err = capfd.readouterr()
    assert "slot" not in out + err and "llama" not in out + err  # the server log is a file
    assert "listening" in Path(server.settings.log_path).read_text()


def test_stop_leaves_no_process_and_frees_the_port(tmp_path: Path) -> None:
    own = LlamaServer(settings(tmp_path / "server.log", parallel=1))
    own.start()
    pid, port = own.pid, urlsplit(own.base_url).port
    assert pid is not None and port is not None and not port_is_free(port)
    own.stop()
    own.stop()  # idempotent
    assert process_gone(pid) and port_is_free(port) and not own.alive


def test_a_file_that_is_not_a_model_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    log = tmp_path / "server.log"
    with pytest.raises(
        LocalServerError, match=r"could not load .*broken\.gguf.*\(log .*server\.log"
    ):
        LlamaServer(settings(log, model_path=str(bad))).start()
    with pytest.raises(LocalServerError, match="does not exist"):
        LlamaServer(settings(log, model_path=str(tmp_path / "missing.gguf"))).start()


def test_a_crash_mid_call_raises_and_the_rerun_asks_only_what_is_missing(
    tmp_path: Path,
) -> None:
    own = LlamaServer(settings(tmp_path / "server.log", parallel=1))
    own.start()
    cache = LLMCallCache(tmp_path / "calls.sqlite")
    cached = CachedLLM(LlamaCppBackend(ALIAS, own.base_url, server=own, max_concurrency=1), cache)
    requests = [qa_request((i, i + 1)) for i in range(0, 10, 2)]
    answered: list[int] = []

    def kill_after_two(index: int, response: object) -> None:
        answered.append(index)
        if len(answered) == 2:
            os.kill(own.pid or 0, signal.SIGKILL)

    with pytest.raises(LocalServerError, match=r"killed by signal 9.*re-run the same command"):
        cached.complete_many(requests, on_response=kill_after_two)
    own.stop()
    assert len(cached.misses(requests)) == len(requests) - 2  # the two answers were kept

    again = LlamaServer(settings(tmp_path / "server.log", parallel=1))
    again.start()
    try:
        resumed = CachedLLM(LlamaCppBackend(ALIAS, again.base_url, server=again), cache)
        responses = resumed.complete_many(requests)
    finally:
        again.stop()
    assert resumed.calls_made == len(requests) - 2 and resumed.hits == 2
    assert all(r.error is None for r in responses)


def test_the_server_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import json, sys, time\n"
        "from pipeline.models.llm.llamacpp_server import LlamaServer, ServerSettings\n"
        "s = LlamaServer(ServerSettings(**json.loads(sys.argv[1])))\n"
        "s.start()\n"
        "print(s.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(settings(tmp_path / "s.log").__dict__)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child = int(parent.stdout.readline())
        parent.kill()  # SIGKILL: no atexit, no finally
        parent.wait()
        assert process_gone(child), "the llama.cpp server outlived a killed wikidrift"
    finally:
        parent.kill()


def test_one_shared_server_per_model_announced_to_child_processes(tmp_path: Path) -> None:
    wanted = settings(tmp_path / "shared.log", parallel=1)
    first = shared_server(wanted)
    try:
        assert shared_server(wanted) is first
        assert json.loads(os.environ[SERVER_ENV]) == {"url": first.base_url, "alias": ALIAS}
        probe = (
            "from pipeline.models.llm.llamacpp_server import announced_server\n"
            f"print(announced_server({ALIAS!r}), announced_server('other-model'))\n"
        )
        seen = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()
        assert seen == [first.base_url, "None"]
    finally:
        pid = first.pid
        stop_shared_servers()
    assert SERVER_ENV not in os.environ and pid is not None and process_gone(pid)
