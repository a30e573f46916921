"""Deterministic OpenAI-compatible LLM and embeddings stub for a real Hindsight server under test.

Hindsight (``HINDSIGHT_API_LLM_PROVIDER=openai``, ``HINDSIGHT_API_EMBEDDINGS_PROVIDER=openai``) is pointed
at this server instead of a model. Every answer is a pure function of the request, so a test run against a
real Hindsight is reproducible:

* fact extraction: one fact per sentence of the chunk's ``Content:`` section;
* consolidation: one observation per distinct new fact (an exact duplicate of an existing observation
  becomes an update of it); the observation dedup check merges only identical texts;
* reflect (tool calling): the forced search steps are answered with the named tool, a free turn with
  the next unused search tool and then ``answer_ready``/``done``; ``done`` lists every retrieved memory
  as a bullet ``- <text> [<alias>]`` (Hindsight turns the aliases into real ids);
* structured output: an object valid for the request's JSON schema, built from those bullets (one
  array element per bullet, id-like fields filled with the ids cited on the bullet);
* peer-card polish (a reflect question with a ``Peer card entries:`` line followed by ``- <entry>``
  lines, as Dreamer asks it): ``done`` answers with the listed entries instead of the retrieved
  memories, polished by :func:`polish_card_entries` (the words "the", "a" and "an" dropped; an entry
  whose words all appear in an earlier one merged into it), one bullet each; the structured output
  for a schema of ``entries`` with ``text`` and ``mark`` then holds one entry per bullet, its mark the
  first enum value the bullet names. When that answer contains :data:`MALFORMED_POLISH_WORD`, the
  structured output is malformed on purpose: every entry gets the mark ``GOSSIP``, outside the enum;
* embeddings: hashed word unigrams and bigrams, L2-normalised (384 dimensions unless asked otherwise).

Tests steer it through ``/control/*``:

* ``POST /control/fault`` ``{"kind": "chat"|"embeddings"|"all"|<request kind>, "status": 429|500|503|null,
  "retry_after": "2"|null, "count": N|-1, "delay_s": float, "match": str|null, "owner": str|null}``: the
  next ``count`` matching requests (-1: until cleared) wait ``delay_s``, then get ``status`` (null: the
  normal answer); ``match`` limits the fault to requests whose body contains that text;
* ``POST /control/script`` ``{"match": str, "content": str, "finish_reason": "stop"|"length",
  "kind": "structured"|"reflect"|"other"|"extract"|"consolidate"|"all", "count": N|-1,
  "owner": str|null}``: the next ``count`` chat requests of that kind (-1: until cleared) whose body
  contains ``match`` (required) are answered with ``content`` verbatim as the assistant message (no
  tool call), with ``finish_reason`` (default "stop") and the usual approximate ``usage``; a fault
  with a status answers first (the script keeps its budget), a delay-only fault delays the script;
* ``POST /control/clear`` ``{"owner": str|null}``: disarm that owner's faults and scripts (all when
  null);
* ``GET /control/requests``: ``{"requests": [{seq, ts, kind, path, status, fault, delay_s, match,
  scripted, detail}]}``, logged on arrival (``status`` null while in flight; ``scripted`` the match of
  the script that answered, else null; ``detail`` ``scripted:<finish_reason>`` then); kinds: extract,
  consolidate, reflect, structured, other, embeddings;
* ``POST /control/reset-log``: forget answered requests.

With ``--log FILE`` every answered request is also appended to FILE as a JSON line, with its body.
Standard library only, so any Python 3.11 can run it: ``python -m tests.llmstub.server --port N``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import itertools
import json
import math
import re
import struct
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_DIMENSIONS = 384
MAX_EVIDENCE_ITEMS = 25
#: The whole answer when retrieval found nothing; structured output then holds no statements.
NO_MEMORIES_ANSWER = "No relevant memories were found."
STUB_MODEL = "stub-model"

#: Request kinds recorded in the log and accepted as fault targets (besides the families below).
REQUEST_KINDS = ("extract", "consolidate", "reflect", "structured", "other", "embeddings")
#: Fault targets that cover a whole endpoint.
FAULT_FAMILIES = ("chat", "embeddings", "all")
#: Script targets: one chat request kind (`classify_chat`), or every chat request.
SCRIPT_KINDS = ("structured", "reflect", "other", "extract", "consolidate", "all")
SCRIPT_FINISH_REASONS = ("stop", "length")
SCRIPT_FIELDS = ("match", "content", "finish_reason", "kind", "count", "owner")

_UUID_RE = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
_ALIAS_MARK_RE = re.compile(r"\s*\[([^\[\]\s]+)\]")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_TEMPORAL_SUFFIX_RE = re.compile(r"\s*\((?:occurred_start|occurred_end|mentioned_at)=[^()]*\)\s*$")
_NEW_FACT_RE = re.compile(r"^\[([0-9a-fA-F-]{36})\]\s+(.*)$")

#: Capitalised words that start sentences without naming anything.
_NOT_ENTITY_WORDS = (
    "a an and also after all any as at before but by each every for from he her here his how i if in "
    "it its last my next no not of on or our she so some that the their then there these they this those "
    "to today tomorrow we what when where which who why with yes yesterday you your"
)
_NOT_ENTITIES = frozenset(_NOT_ENTITY_WORDS.split(" "))
#: Words too common to carry meaning in an embedding.
_STOPWORD_TEXT = (
    "a an and are as at be been but by did do does for from had has have he her his i in is it its "
    "me my of on or our she so than that the their them then there these they this those to too us was "
    "we were what when where which who will with you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))
#: String fields that name a category rather than carry content.
_LABEL_FIELDS = frozenset({"kind", "type", "category", "label", "class"})


# --------------------------------------------------------------------------------------------- text


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, in order, without empty ones."""
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text) if s and s.strip()]


def normalise(text: str) -> str:
    """Lower-case words only: what two texts must share to count as the same statement."""
    return " ".join(w.lower() for w in _WORD_RE.findall(text))


def entities_of(sentence: str) -> list[str]:
    """Capitalised words of a sentence that plausibly name something, first occurrence order."""
    found: list[str] = []
    for word in _WORD_RE.findall(sentence):
        if word[:1].isupper() and word.lower() not in _NOT_ENTITIES and word not in found:
            found.append(word)
    return found


def _stem(word: str) -> str:
    # A crude plural/third-person fold, so "prefers" and "prefer" share a feature.
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def embed(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """Hashed bag of word unigrams and bigrams, L2-normalised: shared words give a high cosine."""
    words = [_stem(w.lower()) for w in _WORD_RE.findall(text)]
    content = [w for w in words if w not in _STOPWORDS] or words
    features = [(w, 1.0) for w in content] + [(f"{a} {b}", 0.5) for a, b in itertools.pairwise(content)]
    vector = [0.0] * dimensions
    for feature, weight in features:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dimensions
        vector[index] += weight if digest[4] & 1 else -weight
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        # No words at all: a fixed unit vector keeps cosine distances defined.
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


# ---------------------------------------------------------------------------------- classification


def _content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _first(messages: list[dict[str, Any]], role: str) -> str:
    return next((_content_text(m) for m in messages if m.get("role") == role), "")


def _last(messages: list[dict[str, Any]], role: str) -> str:
    return next((_content_text(m) for m in reversed(messages) if m.get("role") == role), "")


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("messages")
    return [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []


_DEDUP_OPENING = "You reconcile long-term memory observations"
_SCHEMA_HINT = "You must respond with valid JSON matching this schema:"


def classify_chat(body: dict[str, Any]) -> str:
    """Which of Hindsight's LLM tasks a chat completion request is."""
    messages = _messages(body)
    system = _first(messages, "system").lstrip()
    first_user = _first(messages, "user").lstrip()
    if body.get("tools"):
        return "reflect"
    if system.startswith("Extract") and "facts" in system.split("\n", 1)[0]:
        return "extract"
    # Without a system message the schema hint is prepended to the user turn, so search, not prefix-match.
    if system.startswith("You are a memory consolidation system") or _DEDUP_OPENING in first_user:
        return "consolidate"
    if system.startswith("You are a precise data extraction assistant"):
        return "structured"
    if system.startswith("CRITICAL: You MUST ONLY use information from retrieved tool results"):
        return "reflect"
    return "other"


# ---------------------------------------------------------------------------------- fact extraction


def chunk_content(user_prompt: str) -> str:
    """The text after the last ``Content:`` line of a fact-extraction prompt."""
    marker = "\nContent:\n"
    at = user_prompt.rfind(marker)
    return user_prompt[at + len(marker) :] if at >= 0 else user_prompt


def extract_facts(user_prompt: str) -> dict[str, Any]:
    """One fact per distinct sentence; sentences in the first person plural/singular are the agent's own."""
    facts: list[dict[str, Any]] = []
    seen: set[str] = set()
    for sentence in split_sentences(chunk_content(user_prompt)):
        key = normalise(sentence)
        if not key or key in seen:
            continue
        seen.add(key)
        first_word = key.split(" ", 1)[0]
        facts.append(
            {
                "what": sentence,
                "when": "N/A",
                "where": "N/A",
                "who": "N/A",
                "why": "N/A",
                "fact_kind": "conversation",
                "occurred_start": None,
                "occurred_end": None,
                "fact_type": "assistant" if first_word in ("i", "we") else "world",
                "entities": entities_of(sentence),
                "causal_relations": None,
            }
        )
    return {"facts": facts}


# ------------------------------------------------------------------------------------ consolidation


def _section(text: str, heading: str, next_heading: str | None) -> str:
    start = text.find(heading)
    if start < 0:
        return ""
    start += len(heading)
    end = text.find(next_heading, start) if next_heading else -1
    return text[start:] if end < 0 else text[start:end]


def _first_json_value(text: str, opener: str) -> Any:
    at = text.find(opener)
    while at >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, at)
            return value
        except json.JSONDecodeError:
            at = text.find(opener, at + 1)
    return None


def consolidate(user_prompt: str) -> dict[str, Any]:
    """Creates for new facts; a fact restating an existing observation word for word updates it."""
    new_facts: list[tuple[str, str]] = []
    for line in _section(user_prompt, "### New facts", "### Existing observations").splitlines():
        match = _NEW_FACT_RE.match(line.strip())
        if match:
            new_facts.append((match.group(1), _TEMPORAL_SUFFIX_RE.sub("", match.group(2)).strip()))
    existing_raw = _first_json_value(_section(user_prompt, "### Existing observations", None), "[")
    existing = {
        normalise(str(o.get("text", ""))): o
        for o in (existing_raw if isinstance(existing_raw, list) else [])
        if isinstance(o, dict) and o.get("id")
    }
    creates: dict[str, dict[str, Any]] = {}
    updates: dict[str, dict[str, Any]] = {}
    for fact_id, text in new_facts:
        key = normalise(text)
        if not key:
            continue
        if key in existing:
            obs = existing[key]
            entry = updates.setdefault(
                str(obs["id"]),
                {
                    "observation_id": str(obs["id"]),
                    "current_text": str(obs.get("text", "")),
                    "text": str(obs.get("text", "")),
                    "source_fact_ids": [],
                    "reason": "The new fact restates this observation.",
                },
            )
        else:
            entry = creates.setdefault(
                key, {"text": text, "source_fact_ids": [], "reason": "No existing observation states this."}
            )
        entry["source_fact_ids"].append(fact_id)
    return {"creates": list(creates.values()), "updates": list(updates.values()), "deletes": []}


def dedup_verdict(user_prompt: str) -> dict[str, Any]:
    """Merge two observations only when they say the same words."""
    new = re.search(r"^\[NEW\] (.*)$", user_prompt, re.MULTILINE)
    old = re.search(r"^\[EXISTING\] (.*)$", user_prompt, re.MULTILINE)
    if new and old and normalise(new.group(1)) == normalise(old.group(1)):
        return {"action": "merge", "text": old.group(1).strip(), "reason": "Identical statements."}
    return {"action": "keep", "text": "", "reason": "Different statements."}


# ------------------------------------------------------------------------------------------ reflect


@dataclass
class Evidence:
    """One retrieved statement and every alias (f1, o2, p1 ...) it was shown under."""

    text: str
    refs: list[str] = field(default_factory=list)


_EVIDENCE_LISTS = ("memories", "observations", "mental_models")


def _json_values(text: str) -> Iterator[Any]:
    """Every JSON object embedded in ``text`` (a tool result is one; a synthesis prompt holds several)."""
    decoder = json.JSONDecoder()
    at = text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        yield value
        at = text.find("{", end)


def _walk_evidence(value: Any, into: list[tuple[str, str]]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            if key in _EVIDENCE_LISTS and isinstance(child, list):
                for item in child:
                    if isinstance(item, dict) and item.get("id"):
                        text = item.get("text") or item.get("content") or item.get("name") or ""
                        if isinstance(text, str) and text.strip():
                            into.append((str(item["id"]), text.strip()))
            _walk_evidence(child, into)
    elif isinstance(value, list):
        for child in value:
            _walk_evidence(child, into)


def collect_evidence(messages: list[dict[str, Any]]) -> list[Evidence]:
    """Retrieved statements from tool results (or a synthesis prompt), merged by wording."""
    found: list[tuple[str, str]] = []
    for message in messages:
        if message.get("role") in ("tool", "user"):
            for value in _json_values(_content_text(message)):
                _walk_evidence(value, found)
    merged: dict[str, Evidence] = {}
    for ref, text in found:
        clean = _TEMPORAL_SUFFIX_RE.sub("", text).strip()
        item = merged.setdefault(normalise(clean), Evidence(text=clean))
        if ref not in item.refs:
            item.refs.append(ref)
    return list(merged.values())[:MAX_EVIDENCE_ITEMS]


def reflect_question(messages: list[dict[str, Any]]) -> str:
    """The question of a reflect conversation: its first user turn, before any appended section."""
    first = _first(messages, "user").strip()
    return first.split("\n\n## ", 1)[0].strip() or first


#: The line after which a peer-card polish question lists the card's entries, one ``- <entry>`` each.
POLISH_ENTRIES_HEADING = "Peer card entries:"
#: A polish answer containing this word gets a malformed structured output (see the module docstring).
MALFORMED_POLISH_WORD = "stub-malformed-polish"
#: The mark a malformed polish answer gives every entry: not one the schema allows.
MALFORMED_POLISH_MARK = "GOSSIP"
_ARTICLE_RE = re.compile(r"\b(?:the|a|an)\s+", re.IGNORECASE)


def polish_question_entries(question: str) -> list[str] | None:
    """The entries a peer-card polish question lists, or None when ``question`` is not one."""
    lines = [line.strip() for line in question.splitlines()]
    if POLISH_ENTRIES_HEADING not in lines:
        return None
    listed = lines[lines.index(POLISH_ENTRIES_HEADING) + 1 :]
    return [line[2:].strip() for line in listed if line.startswith("- ") and line[2:].strip()]


def polish_card_entries(entries: list[str]) -> list[str]:
    """The stub's polish: articles dropped; an entry whose words all appear in an earlier kept one
    is merged into it (left out). Order is kept."""
    kept: list[str] = []
    kept_words: list[set[str]] = []
    for entry in entries:
        short = " ".join(_ARTICLE_RE.sub("", entry).split())
        words = set(normalise(short).split())
        if not words or any(words <= earlier for earlier in kept_words):
            continue
        kept.append(short)
        kept_words.append(words)
    return kept


def _is_polish_schema(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` asks for ``entries``, each an object with ``text`` and ``mark``."""
    entries = (schema.get("properties") or {}).get("entries")
    items = entries.get("items") if isinstance(entries, dict) else None
    props = items.get("properties") if isinstance(items, dict) else None
    return isinstance(props, dict) and {"text", "mark"} <= set(props)


def render_answer(evidence: list[Evidence]) -> str:
    """The answer text: one bullet per statement, citing its aliases in brackets."""
    if not evidence:
        return NO_MEMORIES_ANSWER
    return "\n".join(f"- {e.text} " + " ".join(f"[{r}]" for r in e.refs) for e in evidence)


def _called_tools(messages: list[dict[str, Any]]) -> set[str]:
    called: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                name = (call.get("function") or {}).get("name")
                if isinstance(name, str):
                    called.add(name)
    return called


def _tool_functions(body: dict[str, Any]) -> list[dict[str, Any]]:
    functions = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            functions.append(tool["function"])
    return functions


def choose_tool(body: dict[str, Any]) -> dict[str, Any]:
    """The tool a reflect turn calls: the forced one, else the next search layer, else the answer."""
    functions = _tool_functions(body)
    named = body.get("tool_choice")
    if isinstance(named, dict):
        wanted = (named.get("function") or {}).get("name")
        match = next((f for f in functions if f.get("name") == wanted), None)
        if match is not None:
            return match
    if len(functions) == 1:
        return functions[0]
    by_name = {str(f.get("name")): f for f in functions}
    called = _called_tools(_messages(body))
    for name in ("search_mental_models", "search_observations", "recall"):
        if name in by_name and name not in called:
            return by_name[name]
    for name in ("answer_ready", "done"):
        if name in by_name:
            return by_name[name]
    return functions[0]


def tool_arguments(function: dict[str, Any], question: str, evidence: list[Evidence]) -> dict[str, Any]:
    """Arguments for one reflect tool call, valid for the tool's parameter schema."""
    name = function.get("name")
    raw_params = function.get("parameters")
    params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
    props: dict[str, Any] = params.get("properties") or {}
    refs = [r for e in evidence for r in e.refs]
    args: dict[str, Any] = {}
    if "reason" in props:
        args["reason"] = "Look up what the memory bank records about the question."
    if "query" in props:
        args["query"] = question
    polish = polish_question_entries(question)
    if name in ("done", "answer_ready"):
        args["answer_found"] = bool(evidence) or bool(polish)
    if name == "done":
        if polish:
            answer = "\n".join(f"- {entry}" for entry in polish_card_entries(polish))
        else:
            answer = render_answer(evidence)
        if "answer" in props:
            args["answer"] = answer
        elif "document" in props:
            args["document"] = {"sections": [{"heading": "Memories", "level": 2, "blocks": [answer]}]}
        for key, prefix in (("memory_ids", "f"), ("observation_ids", "o"), ("mental_model_ids", "p")):
            if key in props:
                args[key] = [r for r in refs if r.startswith(prefix)]
    if name == "read_mental_models" and "ids" in props:
        args["ids"] = [r for r in refs if r.startswith("p")][:3]
    if name == "expand":
        args.setdefault("memory_ids", [r for r in refs if r.startswith("f")][:1])
        args.setdefault("depth", "chunk")
    items = [Item(text=e.text, ids=e.refs) for e in evidence]
    filler = SchemaFiller(params, items, render_answer(evidence))
    for key in params.get("required") or []:
        if key not in args and isinstance(props.get(key), dict):
            args[key] = filler.value(props[key], key, None, 1)
    return args


def reflect_message(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a reflect request: a tool call, or a plain synthesis without tools."""
    messages = _messages(body)
    evidence = collect_evidence(messages)
    if not _tool_functions(body):
        return {"role": "assistant", "content": render_answer(evidence)}
    function = choose_tool(body)
    args = tool_arguments(function, reflect_question(messages), evidence)
    call = {
        "id": f"call_stub_{len(messages)}",
        "type": "function",
        "function": {"name": str(function.get("name")), "arguments": json.dumps(args, ensure_ascii=False)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


# ------------------------------------------------------------------------------- structured output


@dataclass
class Item:
    """One statement an answer makes, with the ids it cites."""

    text: str
    ids: list[str]


def answer_items(answer: str) -> list[Item]:
    """The bullets of an answer (or its sentences when it has none), bracketed citations split off."""
    if answer.strip() == NO_MEMORIES_ANSWER:
        return []
    lines = [ln.strip()[2:] for ln in answer.splitlines() if ln.strip()[:2] in ("- ", "* ")]
    pieces = lines or split_sentences(answer)
    items = []
    for piece in pieces:
        ids = _UUID_RE.findall(piece) or [m for m in _ALIAS_MARK_RE.findall(piece)]
        text = _UUID_RE.sub("", _ALIAS_MARK_RE.sub("", piece)).strip()
        if text:
            items.append(Item(text=text, ids=ids))
    return items


def _looks_like_id(name: str) -> bool:
    lowered = name.lower()
    return lowered == "id" or lowered.endswith("_id") or lowered.endswith("ids")


class SchemaFiller:
    """Builds a value valid for a JSON schema from the statements of an answer."""

    def __init__(self, root: dict[str, Any], items: list[Item], summary: str) -> None:
        self.root = root
        self.items = items
        self.summary = summary

    def _resolve(self, schema: Any) -> dict[str, Any]:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 20:
            seen += 1
            target: Any = self.root
            for part in schema["$ref"].lstrip("#/").split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = target
        return schema if isinstance(schema, dict) else {}

    def value(self, schema: Any, name: str, item: Item | None, depth: int) -> Any:
        """A value for ``schema``; ``item`` is the statement an array element stands for."""
        node = self._resolve(schema)
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            return self._enum(node["enum"], node.get("default"), item)
        for combinator in ("anyOf", "oneOf"):
            options = [self._resolve(o) for o in node.get(combinator) or []]
            usable = [o for o in options if o.get("type") != "null"]
            if usable:
                return self.value(usable[0], name, item, depth)
        if isinstance(node.get("allOf"), list):
            merged: dict[str, Any] = {}
            for part in node["allOf"]:
                merged.update(self._resolve(part))
            return self.value(merged, name, item, depth)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in node else "array" if "items" in node else "string"
        if kind == "object":
            if depth > 8:
                return {}
            props = node.get("properties") or {}
            return {key: self.value(sub, key, item, depth + 1) for key, sub in props.items()}
        if kind == "array":
            return self._array(node, name, item, depth)
        if kind == "string":
            return self._string(node, name, item)
        if kind in ("integer", "number"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0))
            number = max(1, low) if not isinstance(node.get("exclusiveMinimum"), int | float) else low + 1
            if isinstance(node.get("maximum"), int | float):
                number = min(number, node["maximum"])
            return int(number) if kind == "integer" else float(number)
        if kind == "boolean":
            return True
        return None

    def _enum(self, options: list[Any], default: Any, item: Item | None) -> Any:
        """The option the statement names, else the schema's default, else the first option."""
        context = normalise(item.text) if item else ""
        for option in options:
            if isinstance(option, str) and normalise(option) and f" {normalise(option)} " in f" {context} ":
                return option
        return default if default in options else options[0]

    def _array(self, node: dict[str, Any], name: str, item: Item | None, depth: int) -> list[Any]:
        element = self._resolve(node.get("items") or {})
        element_is_text = element.get("type", "string") == "string" and "enum" not in element
        values: list[Any]
        if element_is_text and _looks_like_id(name):
            values = list(item.ids) if item else [i for it in self.items for i in it.ids]
        elif item is not None:
            values = [self.value(element, name, item, depth + 1)]
        else:
            values = [self.value(element, name, it, depth + 1) for it in self.items]
        minimum, maximum = node.get("minItems", 0), node.get("maxItems")
        while len(values) < minimum:
            values.append(self.value(element, name, item, depth + 1))
        if node.get("uniqueItems"):
            unique: list[Any] = []
            for v in values:
                if v not in unique:
                    unique.append(v)
            values = unique
        return values[:maximum] if isinstance(maximum, int) else values

    def _string(self, node: dict[str, Any], name: str, item: Item | None) -> str:
        if _looks_like_id(name):
            text = item.ids[0] if item and item.ids else ""
        elif name.lower() in _LABEL_FIELDS:
            text = "fact"
        elif node.get("format") == "date-time":
            text = "2024-01-01T00:00:00Z"
        elif node.get("format") == "date":
            text = "2024-01-01"
        else:
            text = item.text if item else self.summary
        if isinstance(node.get("maxLength"), int):
            text = text[: node["maxLength"]]
        if isinstance(node.get("minLength"), int) and len(text) < node["minLength"]:
            text = text + "." * (node["minLength"] - len(text))
        return text


def _between(text: str, start: str, end: str) -> str | None:
    at = text.find(start)
    if at < 0:
        return None
    at += len(start)
    stop = text.find(end, at)
    return text[at:] if stop < 0 else text[at:stop]


def structured_object(body: dict[str, Any]) -> Any:
    """Reflect's structured-output extraction: the schema filled from the answer's statements."""
    messages = _messages(body)
    prompt = _last(messages, "user")
    answer = _between(prompt, 'ANSWER TO EXTRACT FROM:\n"""\n', '\n"""') or ""
    schema_text = _between(prompt, "JSON Schema:\n```json\n", "\n```")
    schema: Any = None
    if schema_text:
        try:
            schema = json.loads(schema_text)
        except json.JSONDecodeError:
            schema = None
    if not isinstance(schema, dict):
        schema = _advertised_schema(body)
    items = answer_items(answer)
    if MALFORMED_POLISH_WORD in answer and _is_polish_schema(schema):
        return {"entries": [{"text": i.text, "mark": MALFORMED_POLISH_MARK} for i in items]}
    summary = " ".join(i.text for i in items) or answer.strip()
    return SchemaFiller(schema, items, summary).value(schema, "", None, 0)


def _without_schema_hint(text: str) -> str:
    """``text`` without the JSON-mode hint and advertised schema Hindsight may have put in front of it."""
    at = text.find(_SCHEMA_HINT)
    if at < 0:
        return text
    start = text.find("{", at)
    try:
        _, end = json.JSONDecoder().raw_decode(text, start)
    except (json.JSONDecodeError, ValueError):
        return text
    return text[end:].strip()


def _advertised_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema a request asks for: its strict ``json_schema`` format, or the hint in a message."""
    response_format = body.get("response_format") or {}
    strict = (response_format.get("json_schema") or {}).get("schema")
    if isinstance(strict, dict):
        return strict
    for message in _messages(body):
        tail = _between(_content_text(message), _SCHEMA_HINT, "\u0000")
        schema = _first_json_value(tail, "{") if tail else None
        if isinstance(schema, dict):
            return schema
    return {}


# --------------------------------------------------------------------------------------------- other


def other_reply(body: dict[str, Any]) -> str:
    """A short deterministic answer; JSON matching the advertised schema when JSON is asked for."""
    messages = _messages(body)
    wants_json = (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
    if wants_json:
        schema = _advertised_schema(body)
        user = _without_schema_hint(_last(messages, "user"))
        items = [Item(text=s, ids=[]) for s in split_sentences(user)[:5]]
        value = SchemaFiller(schema, items, user.strip()[:200]).value(schema, "", None, 0)
        # JSON mode promises an object even when no schema was advertised.
        return json.dumps(value if isinstance(value, dict) else {})
    to_rewrite = _between(_last(messages, "user"), "Text to rewrite:\n", "\u0000")
    if to_rewrite is not None:
        # A length rewrite: keep the text (it is already short in practice).
        return to_rewrite.strip()
    return "ok"


# ----------------------------------------------------------------------------------- chat responses


def chat_completion(body: dict[str, Any], kind: str) -> dict[str, Any]:
    """The full ``chat.completion`` response for a request of the given kind."""
    messages = _messages(body)
    if kind == "extract":
        facts = extract_facts(_last(messages, "user"))
        message: dict[str, Any] = {"role": "assistant", "content": json.dumps(facts)}
    elif kind == "consolidate":
        user = _last(messages, "user")
        verdict = dedup_verdict(user) if _DEDUP_OPENING in user else consolidate(user)
        message = {"role": "assistant", "content": json.dumps(verdict)}
    elif kind == "structured":
        message = {"role": "assistant", "content": json.dumps(structured_object(body))}
    elif kind == "reflect":
        message = reflect_message(body)
    else:
        message = {"role": "assistant", "content": other_reply(body)}
    return _chat_response(body, message, "tool_calls" if message.get("tool_calls") else "stop")


def scripted_completion(body: dict[str, Any], script: Script) -> dict[str, Any]:
    """The ``chat.completion`` response of a scripted answer: its content verbatim, its finish reason,
    and the usage the stub reports for any answer."""
    return _chat_response(body, {"role": "assistant", "content": script.content}, script.finish_reason)


def _chat_response(body: dict[str, Any], message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    """A ``chat.completion`` with one choice; usage approximates tokens as 4 characters each."""
    prompt_tokens = _approx_tokens(json.dumps(_messages(body)))
    completion_tokens = _approx_tokens(json.dumps(message))
    return {
        "id": f"chatcmpl-stub-{hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]}",
        "object": "chat.completion",
        "created": 0,
        "model": str(body.get("model") or STUB_MODEL),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def embeddings_response(body: dict[str, Any]) -> dict[str, Any]:
    """The ``/v1/embeddings`` response for one input or a batch, float or base64 encoded."""
    raw = body.get("input")
    inputs = raw if isinstance(raw, list) else [raw]
    texts = [t if isinstance(t, str) else "" for t in inputs]
    requested = body.get("dimensions")
    dimensions = requested if isinstance(requested, int) and requested > 0 else DEFAULT_DIMENSIONS
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = embed(text, dimensions)
        packed = struct.pack(f"<{len(vector)}f", *vector)
        encoded: Any = base64.b64encode(packed).decode("ascii") if as_base64 else vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(_approx_tokens(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": str(body.get("model") or "stub-embed"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


# ------------------------------------------------------------------------------------ test controls


class ControlError(ValueError):
    """A control request the stub cannot act on; the message says what to send instead."""


@dataclass
class Fault:
    """Requests of ``target`` are delayed, then answered with ``status`` (or normally when None).

    ``match`` limits the fault to requests whose body contains that text (a marker the test put into
    its content), so tests sharing one server do not hit each other's faults; ``owner`` lets a test
    clear only the faults it armed.
    """

    target: str
    status: int | None
    retry_after: str | None
    remaining: int
    delay_s: float
    match: str | None = None
    owner: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Fault:
        target = body.get("kind", "all")
        if target not in FAULT_FAMILIES + REQUEST_KINDS:
            allowed = ", ".join(FAULT_FAMILIES + REQUEST_KINDS)
            raise ControlError(f"kind must be one of {allowed}, not {target!r}")
        status = body.get("status")
        if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
            raise ControlError("status must be an HTTP error code (400-599) or null for a delay only")
        retry_after = body.get("retry_after")
        if retry_after is not None and not isinstance(retry_after, str | int):
            raise ControlError('retry_after must be a string such as "2", or null')
        count = body.get("count", -1)
        delay = body.get("delay_s", 0.0)
        if not isinstance(count, int) or count == 0 or count < -1:
            raise ControlError("count must be a positive number of requests, or -1 for until cleared")
        if not isinstance(delay, int | float) or delay < 0:
            raise ControlError("delay_s must be a non-negative number of seconds")
        if status is None and not delay:
            raise ControlError("give a status, a delay_s, or both")
        match, owner = body.get("match"), body.get("owner")
        if match is not None and (not isinstance(match, str) or not match):
            raise ControlError("match must be a non-empty string found in the requests to fail, or null")
        if owner is not None and not isinstance(owner, str):
            raise ControlError("owner must be a string, or null")
        retry = None if retry_after is None else str(retry_after)
        return cls(target, status, retry, count, float(delay), match, owner)

    def matches(self, family: str, kind: str, body_text: str) -> bool:
        return self.target in ("all", family, kind) and (self.match is None or self.match in body_text)


@dataclass
class Script:
    """Chat requests of ``target`` whose body contains ``match`` are answered with ``content``, verbatim,
    as the assistant message, with ``finish_reason``: a test makes the "model" misbehave (cite ids
    without their facts, invent a detail, answer truncated JSON cut at ``length``, cite unknown ids,
    fuse two values) without the stub guessing what the test means.

    ``match`` is required, so a script only ever answers the requests of the test that armed it (a
    marker its content or bank id carries); ``owner`` lets that test clear only its own scripts.
    """

    target: str
    match: str
    content: str
    finish_reason: str
    remaining: int
    owner: str | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Script:
        unknown = sorted(set(body) - set(SCRIPT_FIELDS))
        if unknown:
            raise ControlError(
                f"unknown field(s) {', '.join(unknown)}: a script takes {', '.join(SCRIPT_FIELDS)}"
            )
        target = body.get("kind", "all")
        if target not in SCRIPT_KINDS:
            raise ControlError(f"kind must be one of {', '.join(SCRIPT_KINDS)}, not {target!r}")
        match = body.get("match")
        if not isinstance(match, str) or not match:
            raise ControlError(
                "match must be a non-empty string found in the requests to answer (a marker of the "
                "test's own content): a script never answers every request"
            )
        content = body.get("content")
        if not isinstance(content, str):
            raise ControlError("content must be a string: the raw assistant content, returned verbatim")
        finish_reason = body.get("finish_reason", "stop")
        if finish_reason not in SCRIPT_FINISH_REASONS:
            allowed = ", ".join(SCRIPT_FINISH_REASONS)
            raise ControlError(f"finish_reason must be one of {allowed}, not {finish_reason!r}")
        count = body.get("count", -1)
        if not isinstance(count, int) or isinstance(count, bool) or count == 0 or count < -1:
            raise ControlError("count must be a positive number of requests, or -1 for until cleared")
        owner = body.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise ControlError("owner must be a string, or null")
        return cls(target, match, content, finish_reason, count, owner)

    def matches(self, kind: str, body_text: str) -> bool:
        return self.target in ("all", kind) and self.match in body_text


class Controls:
    """Thread-safe fault table and request log shared by all handler threads."""

    def __init__(self, log_path: str | None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._scripts: list[Script] = []
        self._log: list[dict[str, Any]] = []
        self._seq = 0
        self._log_path = log_path

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def add_script(self, script: Script) -> None:
        with self._lock:
            self._scripts.append(script)

    def clear(self, owner: str | None) -> None:
        """Disarm the faults and scripts armed by ``owner``, or every one when it is None."""
        with self._lock:
            self._faults = [f for f in self._faults if owner is not None and f.owner != owner]
            self._scripts = [s for s in self._scripts if owner is not None and s.owner != owner]

    def take_fault(self, family: str, kind: str, body_text: str) -> Fault | None:
        """The first armed fault for this request, counting it against the fault's budget."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(family, kind, body_text):
                    if fault.remaining > 0:
                        fault.remaining -= 1
                        if fault.remaining == 0:
                            self._faults.remove(fault)
                    return dataclasses.replace(fault)
        return None

    def take_script(self, kind: str, body_text: str) -> Script | None:
        """The first armed script for this chat request, counting it against the script's budget."""
        with self._lock:
            for script in self._scripts:
                if script.matches(kind, body_text):
                    if script.remaining > 0:
                        script.remaining -= 1
                        if script.remaining == 0:
                            self._scripts.remove(script)
                    return dataclasses.replace(script)
        return None

    def arrived(
        self, kind: str, path: str, fault: Fault | None, script: Script | None = None
    ) -> dict[str, Any]:
        """Log a request as it arrives (``status`` None until answered), so a test can see it in flight."""
        with self._lock:
            self._seq += 1
            entry = {
                "seq": self._seq,
                "ts": time.time(),
                "kind": kind,
                "path": path,
                "status": None,
                "fault": fault is not None,
                "delay_s": fault.delay_s if fault else 0.0,
                "match": fault.match if fault else None,
                "scripted": script.match if script else None,
                "detail": "",
            }
            self._log.append(entry)
            return entry

    def answered(self, entry: dict[str, Any], status: int, detail: str, body: Any) -> None:
        """Complete a logged request and append it, with the request body, to the log file."""
        with self._lock:
            entry.update(status=status, detail=detail)
            if self._log_path:
                with open(self._log_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps({**entry, "request": body}, ensure_ascii=False) + "\n")

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self._log]

    def reset_log(self) -> None:
        """Forget answered requests; those still in flight stay, so a test waiting on one still sees it."""
        with self._lock:
            self._log = [e for e in self._log if e["status"] is None]


# ------------------------------------------------------------------------------------------- server


def _detail(kind: str, body: dict[str, Any], response: dict[str, Any]) -> str:
    if kind == "embeddings":
        return f"{len(response.get('data', []))} input(s)"
    message = response.get("choices", [{}])[0].get("message", {})
    calls = message.get("tool_calls") or []
    if calls:
        return "tool:" + ",".join(c["function"]["name"] for c in calls)
    return ""


class StubHandler(BaseHTTPRequestHandler):
    """Routes OpenAI-compatible and control requests; one instance per request."""

    protocol_version = "HTTP/1.1"
    server_version = "DreamerLLMStub/1"
    controls: Controls  # set on the subclass built by make_server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request stderr line; the request log has everything."""

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _read_text(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode("utf-8") if length else ""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/control/requests":
            self._send_json(200, {"requests": self.controls.requests()})
        elif path in ("/health", ""):
            self._send_json(200, {"status": "ok"})
        elif path in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": STUB_MODEL, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route GET {path}"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            text = self._read_text()
            body = json.loads(text) if text.strip() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._send_json(400, {"error": {"message": f"request body is not JSON: {exc}"}})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "request body must be a JSON object"}})
            return
        if path.startswith("/control/"):
            self._control(path, body)
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self._model_call("chat", classify_chat(body), body, text)
        elif path in ("/v1/embeddings", "/embeddings"):
            self._model_call("embeddings", "embeddings", body, text)
        else:
            self._send_json(404, {"error": {"message": f"no route POST {path}"}})

    def _control(self, path: str, body: dict[str, Any]) -> None:
        if path == "/control/fault":
            try:
                self.controls.add_fault(Fault.from_json(body))
            except ControlError as exc:
                self._send_json(400, {"error": str(exc)})
                return
            self._send_json(200, {"ok": True})
        elif path == "/control/script":
            try:
                self.controls.add_script(Script.from_json(body))
            except ControlError as exc:
                self._send_json(400, {"error": str(exc)})
                return
            self._send_json(200, {"ok": True})
        elif path == "/control/clear":
            owner = body.get("owner")
            self.controls.clear(owner if isinstance(owner, str) else None)
            self._send_json(200, {"ok": True})
        elif path == "/control/reset-log":
            self.controls.reset_log()
            self._send_json(200, {"ok": True})
        else:
            self._send_json(404, {"error": f"no control {path}"})

    def _model_call(self, family: str, kind: str, body: dict[str, Any], text: str) -> None:
        fault = self.controls.take_fault(family, kind, text)
        # A fault's error answers instead of any script (whose budget it leaves alone); a delay-only
        # fault, such as the tagging one of MarkedRequests, delays the scripted answer.
        fails = fault is not None and fault.status is not None
        script = self.controls.take_script(kind, text) if family == "chat" and not fails else None
        entry = self.controls.arrived(kind, self.path, fault, script)
        if fault and fault.delay_s:
            time.sleep(fault.delay_s)
        if fault and fault.status is not None:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            self.controls.answered(entry, fault.status, "forced error", body)
            error = {"message": "stub forced error", "type": "stub_fault", "code": str(fault.status)}
            self._send_json(fault.status, {"error": error}, headers)
            return
        if script is not None:
            response = scripted_completion(body, script)
            self.controls.answered(entry, 200, f"scripted:{script.finish_reason}", body)
            self._send_json(200, response)
            return
        response = embeddings_response(body) if family == "embeddings" else chat_completion(body, kind)
        self.controls.answered(entry, 200, _detail(kind, body, response), body)
        self._send_json(200, response)


def make_server(port: int, log_path: str | None) -> ThreadingHTTPServer:
    """A stub bound to 127.0.0.1:``port`` (0 picks a free port)."""
    handler = type("BoundStubHandler", (StubHandler,), {"controls": Controls(log_path)})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    parser.add_argument("--log", default=None, help="append every request as a JSON line to this file")
    args = parser.parse_args(argv)
    server = make_server(args.port, args.log)
    print(f"llm stub listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
