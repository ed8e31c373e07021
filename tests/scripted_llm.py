"""A scripted LLM for tests: answers GrowOVER/wikidrift generation prompts from the request.

It reads the numbered sentences of the prompt, cites one of them and copies an entity (a
year, a capitalized name) into the answer, so a correct pipeline keeps its items.
``FaultyResponder`` swaps chosen requests for bad answers, one per rejection reason.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Callable

from pipeline.models.llm.base import LLMRequest

_SENTENCE = re.compile(r"^\[(\d+)\] (.+)$", re.MULTILINE)
_TITLE = re.compile(r"^(?:Article title|Topic): (.+)$", re.MULTILINE)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(
    rf"\b(?:\d{{1,2}} (?:{_MONTHS}) \d{{4}}"
    rf"|(?:{_MONTHS}) \d{{1,2}},? \d{{4}}"
    rf"|(?:{_MONTHS}) \d{{4}})\b"
)
_NAME = re.compile(r"(?<!^)(?<![.!?] )\b([A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)*)")


# ---- reading a request ---------------------------------------------------------------------


def user_text(request: LLMRequest) -> str:
    """The user message of a request."""
    return next(m["content"] for m in request.messages if m["role"] == "user")


def numbered(request: LLMRequest) -> list[tuple[int, str]]:
    """The ``[index] sentence`` lines of a request."""
    return [(int(i), t) for i, t in _SENTENCE.findall(user_text(request))]


def title_of(request: LLMRequest) -> str:
    """The article title a request names."""
    m = _TITLE.search(user_text(request))
    return m.group(1).strip() if m else ""


def line_after(request: LLMRequest, prefix: str) -> str:
    """The rest of the line starting with ``prefix``."""
    m = re.search(rf"^{re.escape(prefix)}\s*(.+)$", user_text(request), re.MULTILINE)
    return m.group(1).strip() if m else ""


def entity(sentence: str, title: str) -> str | None:
    """A short span of ``sentence`` that is not part of the title: a year or a name."""
    years = _YEAR.findall(sentence)
    if years:
        return years[-1]
    title_words = set(title.lower().split())
    for name in _NAME.findall(sentence):
        if not set(name.lower().split()) & title_words and len(name.split()) <= 4:
            return name
    words = [w for w in _words(sentence) if w.lower() not in title_words]
    return max(words, key=len) if words else None


def _words(text: str) -> list[str]:
    return [w for w in (w.strip(".,;:()\"'") for w in text.split()) if len(w) > 2]


def _differing(a: str, b: str, title: str) -> str:
    """A word of ``a`` that ``b`` lacks (not from the title), preferring numbers and names."""
    title_words = set(title.lower().split())
    b_words = set(_words(b))
    candidates = [w for w in _words(a) if w not in b_words and w.lower() not in title_words]
    ranked = sorted(candidates, key=lambda w: (not w[0].isdigit(), not w[0].isupper()))
    return ranked[0] if ranked else _words(a)[0]


def _tag(text: str) -> str:
    return format(zlib.crc32(text.encode()) & 0xFFFF, "04x")


# ---- good answers --------------------------------------------------------------------------


def good_answer(request: LLMRequest) -> str:
    """A correct answer for any of the generation / contradiction prompts."""
    title = title_of(request)
    sents = numbered(request)
    if request.purpose in ("qa_initial", "qa_new"):
        chosen = [(i, t, entity(t, title)) for i, t in sents]
        i, _, ans = next(((i, t, a) for i, t, a in chosen if a), chosen[0])
        return json.dumps(
            {
                "question": f"Which detail {i} ({_tag(title)}) concerns {title}?",
                "answer": ans or "unknown",
                "evidence": [i],
            }
        )
    if request.purpose == "qa_changed":
        old, new = line_after(request, "EARLIER:"), line_after(request, "CURRENT:")
        prev, ans = _differing(old, new, title), _differing(new, old, title)
        return json.dumps(
            {
                "question": f"What changed ({_tag(new)}) for {title}?",
                "previous_answer": prev,
                "answer": ans,
            }
        )
    if request.purpose == "dialogue":
        idx = [i for i, _ in sents]
        turns = [
            {
                "user": f"Tell me more about {title}, point {k}.",
                "expert": dict(sents)[idx[k % len(idx)]],
                "sentence": idx[k % len(idx)],
            }
            for k in range(3)
        ]
        return json.dumps({"turns": turns})
    if request.purpose == "quadruples":
        quads = []
        for i, t in sents:
            dates = _DATE.findall(t)
            years = _YEAR.findall(t)
            if dates:
                quads.append(
                    {
                        "subject": title,
                        "relation": "dated event",
                        "object": dates[0],
                        "timestamp": dates[0],
                        "sentence": i,
                    }
                )
            elif years:
                quads.append(
                    {
                        "subject": title,
                        "relation": "event in year",
                        "object": years[0],
                        "timestamp": years[0],
                        "sentence": str(i),
                    }
                )
            elif (name := entity(t, title)) is not None:
                quads.append(
                    {"subject": title, "relation": "related to", "object": name, "sentence": i}
                )
        return "Here are the facts:\n```json\n" + json.dumps({"quadruples": quads}) + "\n```"
    if request.purpose == "contradiction":
        old = line_after(request, "Older version:")
        new = line_after(request, "Newer version:")
        differs = _YEAR.findall(old) != _YEAR.findall(new)
        return json.dumps({"contradicts": differs, "reason": "years differ" if differs else "same"})
    raise AssertionError(f"unexpected purpose {request.purpose}")


# ---- bad answers ---------------------------------------------------------------------------


def _qa_fault(kind: str, request: LLMRequest) -> str:
    good = json.loads(good_answer(request))
    sents = numbered(request)
    offered = [i for i, _ in sents]
    if kind == "prose":
        return "I believe the answer is the company founded in 1990."
    if kind == "llm_error":
        raise RuntimeError("scripted outage")
    if kind == "missing_field":
        return json.dumps({"question": good["question"], "evidence": good["evidence"]})
    if kind == "wrong_type":
        return json.dumps(good | {"answer": {"name": good["answer"]}})
    if kind == "leaning":
        return json.dumps(good | {"question": "According to the passage, what is described?"})
    if kind == "long":
        longest = max((t for _, t in sents), key=len)
        return json.dumps(good | {"answer": f"{longest} {longest}"})
    if kind == "ungrounded":
        return json.dumps(good | {"answer": "Zanzibar Quokka Consortium"})
    if kind == "out_of_range":
        return json.dumps(good | {"evidence": [9999]})
    if kind == "outside_input":
        other = offered[0] - 1 if offered[0] > 0 else offered[-1] + 1
        return json.dumps(good | {"evidence": [other]})
    if kind == "yes_no":
        return json.dumps(good | {"answer": "Yes"})
    if kind == "in_question":
        return json.dumps(
            good | {"question": f"Is {good['answer']} the answer about {title_of(request)}?"}
        )
    if kind == "empty":
        return json.dumps(good | {"question": "  "})
    raise AssertionError(kind)


def _changed_fault(kind: str, request: LLMRequest) -> str:
    good = json.loads(good_answer(request))
    if kind == "identical":
        new_words = [w.strip(".,;:()\"'") for w in line_after(request, "CURRENT:").split()]
        old_words = [w.strip(".,;:()\"'") for w in line_after(request, "EARLIER:").split()]
        shared = next(w for w in new_words if w in old_words and len(w) > 3)
        return json.dumps(good | {"previous_answer": shared, "answer": shared})
    if kind == "previous_ungrounded":
        return json.dumps(good | {"previous_answer": "Zanzibar Quokka"})
    raise AssertionError(kind)


def _dialogue_fault(kind: str, request: LLMRequest) -> str:
    good = json.loads(good_answer(request))
    if kind == "two_turns":
        return json.dumps({"turns": good["turns"][:2]})
    if kind == "empty_expert":
        good["turns"][1]["expert"] = ""
        return json.dumps(good)
    if kind == "leaning":
        good["turns"][2]["expert"] = "As mentioned above, " + good["turns"][2]["expert"]
        return json.dumps(good)
    if kind == "not_a_list":
        return json.dumps({"turns": "user asks, expert answers"})
    raise AssertionError(kind)


def _quadruple_fault(kind: str, request: LLMRequest) -> str:
    i, text = numbered(request)[0]
    base = {"subject": title_of(request), "relation": "related to", "sentence": i}
    obj = entity(text, title_of(request)) or text.split()[0]
    if kind == "bad_timestamp":
        quads = [base | {"object": obj, "timestamp": "sometime soon"}]
    elif kind == "timestamp_not_in_evidence":
        quads = [base | {"object": obj, "timestamp": "1850"}]
    elif kind == "ungrounded":
        quads = [base | {"subject": "Zanzibar", "object": "Quokka", "timestamp": None}]
    elif kind == "duplicate":
        quads = [base | {"object": obj, "timestamp": None}] * 2
    elif kind == "missing_relation":
        quads = [{"subject": base["subject"], "object": obj, "timestamp": None, "sentence": i}]
    else:
        raise AssertionError(kind)
    return json.dumps({"quadruples": quads})


QA_FAULTS = [
    "prose",
    "llm_error",
    "missing_field",
    "wrong_type",
    "leaning",
    "long",
    "ungrounded",
    "out_of_range",
    "outside_input",
    "yes_no",
    "in_question",
    "empty",
]
CHANGED_FAULTS = ["identical", "previous_ungrounded"]
DIALOGUE_FAULTS = ["two_turns", "empty_expert", "leaning", "not_a_list"]
QUADRUPLE_FAULTS = [
    "bad_timestamp",
    "timestamp_not_in_evidence",
    "ungrounded",
    "duplicate",
    "missing_relation",
]
# The reason each fault must be rejected for.
FAULT_REASONS = {
    "prose": "no_json",
    "llm_error": "llm_error",
    "missing_field": "missing_field",
    "wrong_type": "wrong_type",
    "leaning": "question_leans_on_text",
    "long": "answer_too_long",
    "ungrounded": "answer_not_grounded",
    "out_of_range": "evidence_out_of_range",
    "outside_input": "evidence_outside_input",
    "yes_no": "yes_no_answer",
    "in_question": "answer_in_question",
    "empty": "empty_field",
    "identical": "answers_identical",
    "previous_ungrounded": "previous_answer_not_grounded",
    "two_turns": "bad_turn_count",
    "empty_expert": "empty_field",
    "dialogue_leaning": "turn_leans_on_text",
    "not_a_list": "wrong_type",
    "bad_timestamp": "bad_timestamp",
    "timestamp_not_in_evidence": "timestamp_not_in_evidence",
    "quadruple_ungrounded": "quadruple_not_grounded",
    "duplicate": "duplicate",
    "missing_relation": "missing_field",
}


class FaultyResponder:
    """Good answers, except that the n-th request of a purpose gets the n-th fault of its list
    (every ``stride``-th request, so good items remain in between)."""

    def __init__(self, stride: int = 2) -> None:
        self.stride = stride
        self.seen: Counter[str] = Counter()
        self.injected: list[tuple[str, str]] = []  # (purpose, fault)

    def _fault_for(self, purpose: str, faults: list[str]) -> str | None:
        n = self.seen[purpose]
        self.seen[purpose] += 1
        if n % self.stride or n // self.stride >= len(faults):
            return None
        return faults[n // self.stride]

    def __call__(self, request: LLMRequest) -> str:
        table: dict[str, tuple[list[str], Callable[[str, LLMRequest], str]]] = {
            "qa_initial": (QA_FAULTS, _qa_fault),
            "qa_changed": (CHANGED_FAULTS, _changed_fault),
            "dialogue": (DIALOGUE_FAULTS, _dialogue_fault),
            "quadruples": (QUADRUPLE_FAULTS, _quadruple_fault),
        }
        if request.purpose in table:
            faults, make = table[request.purpose]
            fault = self._fault_for(request.purpose, faults)
            if fault is not None:
                self.injected.append((request.purpose, fault))
                return make(fault, request)
        return good_answer(request)


def expected_reason(purpose: str, fault: str) -> str:
    """The rejection reason a fault must produce."""
    if purpose == "dialogue" and fault == "leaning":
        return "turn_leans_on_text"
    if purpose == "quadruples" and fault == "ungrounded":
        return "quadruple_not_grounded"
    return FAULT_REASONS[fault]


def openai_responder(body: dict) -> str:
    """The scripted answers behind a local OpenAI-compatible server: the prompt's purpose is
    the name of the JSON schema wikidrift sends as ``response_format``."""
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    request = LLMRequest(
        messages=tuple(body["messages"]), prompt_hash="", purpose=schema.get("name", "")
    )
    return good_answer(request)
