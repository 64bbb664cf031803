"""`oracle:CONFIG`: a synthetic generator with a hidden, seeded ground truth -- NOT a language model.

It answers the real system's prompts in the real reply protocol, so a whole stream runs through
the real prompt builder, reply parser, trace-completeness gate, harness (real compile and trials
on the CPU target), ATU, UGC, retrieval and store, while the truth about every memory item is
known (models/oracle_world.py). It shows whether the system as built learns what the method says
it should (docs/oracle.md, issue 28).

Per call, read from the prompt it is actually given:

- a round: the operator heading, the retrieved items (`[E<id>] <title>`) and resident rules
  (`[R<id>] <rule>`). Each one looks useful with P(adopt_useful) if it truly helps the round's
  goal for the operator's category (a correct kernel; in an optimisation round a faster one, a
  separate hidden truth), P(adopt_useless) if not, and it adopts at most `attention` of those (the
  context is not free); some decision lines are written in free-text forms real models use
  ("- E5: Adopted: yes", a table row, lower case), which the parser rejects and the gate re-asks.
  In a correctness round its kernel is correct with a probability that grows with the truly
  useful items adopted: then a slow variant of the suite's hand-written kernel (`<stem>.cpu.c`,
  read from the task files, never shown to the system) that repeats the work `slow` times, else a
  wrong one (one of the task's null kernels, targets/cpu/canaries.py, which compile and fail a
  trial). In an optimisation round it writes, with a probability that grows the same way, the
  hand-written kernel itself, else a correct variant twice as slow as the one it was shown. It
  only chooses the source: whether the new kernel is faster is measured by the real harness, and
  the optimisation score z = 1 - T_best/T_first comes from those measurements. The memory text
  shown that does not help the round's goal costs a share of either chance (oracle_world.retained).
- a re-ask: the same decisions again (every draw is a hash of what it is about), in the canonical form.
- a distillation: lessons titled `<phrase> in <category> kernels (<tag>)`, whose usefulness the
  world knows from the title; their code is a labelled placeholder, never the expert kernel.
- a rule abstraction: the item's title as the rule's first line, so a resident rule names its
  item, then filler of the length the template asks for (what the hot budget pays for).

Every reply says what it is: `model` is the spec, `extra["synthetic"]` is "oracle" with the truth
behind the reply (adopted useful/useless, P(correct), which kernel), kept in the exchange log.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Any

from sagekernel.errors import ModelError
from sagekernel.models.backend import BackendModel, Request, estimate_tokens
from sagekernel.models.base import Message, Reply
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.models.oracle_world import (
    OracleConfig,
    RoundPrompt,
    Shown,
    draw,
    faster_probability,
    read_distill,
    read_round,
    read_rule_title,
    success_probability,
    useful,
)

_PHRASES = ("Check the boundary handling", "Keep intermediate values in registers",
            "Order the loop nest by the output layout", "Guard special values before the main loop",
            "Reuse a per-row statistic instead of recomputing it", "Split setup and the main pass",
            "Write each output element exactly once", "Normalise the accumulator once per row")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_CHANGE = re.compile(r"^## Change \d+: (.*)$", re.MULTILINE)  # distill.j2's heading of each change
_SENTENCES = ("Apply it before writing the main loop, and check it again once the kernel compiles.",
              "It matters most when the reduction or the indexing crosses a row boundary.",
              "Keep the contract's parameter order and types; derive every extent from the arguments.",
              "When it does not apply, the kernel's structure makes that plain from the first lines.",
              "Prefer the simple form first: a correct kernel is the start of every optimisation.")
_IDIOM = ("for (int64_t i = 0; i < n; ++i) {", "    float v = x[i];",
          "    acc = acc + v;  /* oracle rule idiom */", "    y[i] = v;", "}",
          "int64_t row = idx / cols, col = idx % cols;", "if (n <= 0) return;", "float acc = 0.0f;",
          "const float* restrict xr = x + row * cols;", "y[row] = acc / (float)cols;")
_FREEFORM = ("- {ref}: Adopted: {yes} - {why}", "| {ref} | {word} | {why} |", "- {ref}: {lower} - {why}")


@lru_cache(maxsize=1)
def _builtin_tasks() -> dict[str, Any]:
    from sagekernel.tasks.suites import load_suite

    return {task.name: task for task in load_suite("builtin")}


def _task(name: str) -> Any:
    task = _builtin_tasks().get(name)
    if task is None or "cpu" not in task.reference_kernels:
        raise ModelError(f"oracle: no hand-written CPU kernel for operator {name!r}: the synthetic "
                         "generator knows the built-in suite's operators only")
    return task


def _wrong_kernel(task: Any, seed: int, round_: int) -> tuple[str, str]:
    from sagekernel.targets.cpu.canaries import canary_sources

    sources = canary_sources(task)
    names = sorted(sources)
    name = names[int(draw(seed, "wrong", task.name, round_) * len(names))]
    return name, sources[name]


class OracleModel(BackendModel):
    """The synthetic generator (module docstring); `config` is its hidden world."""

    free = True

    def __init__(self, config: OracleConfig, *, name: str = "oracle", model_config: ModelConfig | None = None,
                 log: ExchangeLog | None = None, budget: Budget | None = None, **kwargs: Any) -> None:
        super().__init__(name, config=model_config, log=log, budget=budget, **kwargs)
        self.world = config

    def probe(self) -> None:
        """Always ready (the settings were validated when parsed)."""

    def _complete_once(self, request: Request) -> Reply:
        messages = request.messages
        system = next((m.content for m in messages if m.role == "system"), "")
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if "Your reply is incomplete" in last:
            text, extra = self._reask(system, messages, last)
        elif "## Reply in exactly this format" in last:
            text, extra = self._round(system, last)
        elif "you are curating a memory" in last:
            text, extra = self._distill(last)
        elif "Rewrite it as ONE short resident rule" in last:
            title = read_rule_title(last)
            if title is None:
                raise ModelError("oracle: a rule-abstraction prompt without a 'Title:' line")
            text, extra = self._rule(title), {"rule_for": title}
        else:
            raise ModelError(f"oracle: not a prompt of the shipped templates (starts {last[:80]!r})")
        prompt_tokens = sum(estimate_tokens(m.content) + 4 for m in messages)
        return Reply(text=text, model=self.name, prompt_tokens=prompt_tokens,
                     completion_tokens=estimate_tokens(text), finish_reason="stop",
                     extra={"synthetic": "oracle", **extra})

    # -- rounds ------------------------------------------------------------------------------
    def decisions(self, prompt: RoundPrompt) -> list[tuple[Shown, bool, bool]]:
        """(shown, adopted, truly useful) for each id the round shows. Each looks useful with
        P(adopt_useful) if it truly helps this round's goal (a correct kernel, or in an optimisation
        round a faster one), P(adopt_useless) if not; of those that look useful, at most
        `attention` are applied (drawn at random): a kernel cannot follow every rule in a long
        context, which is why the method budgets its resident rules (B). Without a speed model
        (slow = 1) an optimisation round adopts nothing."""
        seed, op, rnd = self.world.seed, prompt.operator, prompt.round
        goal = "faster" if prompt.optimising else "correct"
        deciding = not prompt.optimising or self.world.slow > 1
        looks: dict[str, bool] = {}
        truth: dict[str, bool] = {}
        for shown in prompt.shown:
            truth[shown.ref] = useful(self.world, shown.title, prompt.category, goal)
            p = self.world.adopt_useful if truth[shown.ref] else self.world.adopt_useless
            looks[shown.ref] = deciding and draw(seed, "adopt", op, rnd, shown.title) < p
        chosen = sorted((s for s in prompt.shown if looks[s.ref]),
                        key=lambda s: draw(seed, "attend", op, rnd, s.title))[:self.world.attention]
        applied = {s.ref for s in chosen}
        return [(shown, shown.ref in applied, truth[shown.ref]) for shown in prompt.shown]

    def _round(self, system: str, user: str) -> tuple[str, dict[str, Any]]:
        prompt = read_round(system, user)
        if prompt is None:
            raise ModelError("oracle: a round prompt without its operator heading or round line")
        task = _task(prompt.operator)
        decided = self.decisions(prompt)
        n_useful = sum(1 for _, adopted, good in decided if adopted and good)
        n_useless = sum(1 for _, adopted, good in decided if adopted and not good)
        padding = sum(shown.tokens for shown, _, good in decided if not good)
        if prompt.optimising:
            p, (kernel, code) = self._optimise(task, prompt, user, n_useful, n_useless, padding)
        else:
            p = success_probability(self.world, prompt.operator, prompt.level, n_useful, n_useless, padding)
            if draw(self.world.seed, "success", prompt.operator, prompt.round) < p:
                kernel, code = _variant(task, self.world.slow)
            else:
                name, code = _wrong_kernel(task, self.world.seed, prompt.round)
                kernel = f"wrong:{name}"
        lines = ["DIAGNOSIS: " + ("the kernel is correct; trying to make it faster" if prompt.optimising
                                  else "rewriting the kernel from the reference semantics")]
        if decided:
            lines.append("ADOPTION:")
        freeform = []
        for shown, adopted, _ in decided:
            if (shown.ref.startswith("E") and (not prompt.optimising or self.world.slow > 1)
                    and draw(self.world.seed, "freeform", prompt.operator, prompt.round, shown.ref)
                    < self.world.freeform):
                lines.append(_freeform_line(shown.ref, adopted, self.world.seed, prompt))
                freeform.append(shown.ref)
            else:
                lines.append(_line(shown.ref, adopted))
        text = "\n".join(lines) + f"\n```c\n{code.strip()}\n```\n"
        chance = "p_faster" if prompt.optimising else "p_correct"
        return text, {"operator": prompt.operator, "round": prompt.round, chance: round(p, 4),
                      "kernel": kernel, "useful_adopted": n_useful, "useless_adopted": n_useless,
                      "padding_tokens": padding, "freeform": freeform,
                      "truth": {s.ref: {"adopted": a, "useful": g} for s, a, g in decided}}

    def _optimise(self, task: Any, prompt: RoundPrompt, user: str, n_useful: int,
                  n_useless: int, padding: int) -> tuple[float, tuple[str, str]]:
        """An optimisation round: (P(faster), (kernel name, source)). The kernel it starts from is
        the one the prompt shows (its repeat count, read back); with P(faster) it writes the
        expert kernel (no repeats), else a correct variant that repeats twice as often. Which is
        faster is for the harness's timing to find; the generator only chooses the source. Without
        a speed model (slow = 1), or from the expert kernel itself, it resubmits what it has."""
        current = read_repeats(user)
        if self.world.slow == 1 or current <= 1:
            return 0.0, _variant(task, 1)
        p = faster_probability(self.world, n_useful, n_useless, padding)
        if draw(self.world.seed, "faster", prompt.operator, prompt.round) < p:
            return p, _variant(task, 1)
        return p, _variant(task, min(MAX_REPEATS, 2 * current))

    def _reask(self, system: str, messages: tuple[Message, ...], last: str) -> tuple[str, dict[str, Any]]:
        round_user = next((m.content for m in messages if m.role == "user"
                           and "## Reply in exactly this format" in m.content), None)
        prompt = read_round(system, round_user) if round_user else None
        if prompt is None:
            raise ModelError("oracle: a re-ask without the round prompt it follows")
        asked = set()
        for line in last.splitlines():
            if "no valid adoption decision for:" in line:
                asked |= {part.strip().rstrip(".") for part in line.split(":", 1)[1].split(",")}
        lines = [_line(shown.ref, adopted) for shown, adopted, _ in self.decisions(prompt)
                 if shown.ref in asked]
        text = "\n".join(lines)
        if "It has no kernel source" in last:  # never happens with this generator's rounds; answer anyway
            expert = _task(prompt.operator).reference_kernels["cpu"].read_text(encoding="utf-8")
            text += f"\n```c\n{expert.strip()}\n```"
        return text + "\n", {"operator": prompt.operator, "round": prompt.round, "reasked": sorted(asked)}

    def _rule(self, title: str) -> str:
        """A resident rule the length abstract_rule.j2 asks for (1 to 3 sentences, then a code idiom of
        at most `rule_lines` lines; the spec's cap is 300 tokens): the title alone on the first line
        (so the rule names its item), the rest drawn from the title. Its text is labelled filler: the
        rule's use is in the hidden truth, and its length is what the hot budget B pays for."""
        seed = self.world.seed
        sentences = [_SENTENCES[int(draw(seed, "rule-sentence", title, n) * len(_SENTENCES))]
                     for n in range(int(draw(seed, "rule-sentences", title) * 3))]
        lines = int(draw(seed, "rule-lines", title) * (self.world.rule_lines + 1))
        idiom = [_IDIOM[(int(draw(seed, "rule-idiom", title) * len(_IDIOM)) + n) % len(_IDIOM)]
                 for n in range(lines)]
        text = f"{title}."
        if sentences:
            text += "\n" + " ".join(sentences)
        if idiom:
            text += "\n```c\n" + "\n".join(idiom) + "\n```"
        return text

    # -- distillation --------------------------------------------------------------------------
    def _distill(self, user: str) -> tuple[str, dict[str, Any]]:
        read = read_distill(user)
        if read is None:
            raise ModelError("oracle: a distillation prompt without its operator, count or types")
        operator, category, most, types = read
        # a lesson is what was learned from which changes of which operator, not from the numbers the
        # prompt quotes: the harness draws fresh inputs and measures fresh times in every run, so
        # one world's lessons (and their truth) are the same in every run of it
        changes = _CHANGE.findall(user)
        identity = json.dumps([operator, category, most, types, changes])
        digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
        count = min(most, self.world.lessons)
        count = max(1, count - int(draw(self.world.seed, "lessons", digest) < 0.5)) if count else 0
        blocks, titles = [], []
        for n in range(count):
            tag = "".join(_LETTERS[int(draw(self.world.seed, "tag", digest, n, i) * 26)] for i in range(5))
            phrase = _PHRASES[int(draw(self.world.seed, "phrase", digest, n) * len(_PHRASES))]
            title = f"{phrase} in {category} kernels ({tag})"
            kind = (types[int(draw(self.world.seed, "type", digest, n) * len(types))] if types
                    else "correctness")
            titles.append(title)
            blocks.append(f"LESSON\ntitle: {title}\ntype: {kind}\ncategory: {category}\n"
                          f"error_message: synthetic lesson {tag} of the oracle generator\n"
                          f"wrong_code:\n```c\nacc = acc + v;\n```\n"
                          f"correct_code:\n```c\nacc = acc + v; /* oracle lesson {tag} */\n```")
        truth = {t: {c: useful(self.world, t, c) for c in (category,)} for t in titles}
        return "\n\n".join(blocks) + "\n", {"operator": operator, "lessons": titles, "truth": truth}


#: The slowest variant the generator writes (repeats of the expert's work).
MAX_REPEATS = 64
_REPEATS = re.compile(r"volatile int64_t sage_repeat = (?P<n>\d+);")
_ONCE = "sage_oracle_once"


def read_repeats(text: str) -> int:
    """How many times the kernel in `text` (a prompt showing it) repeats the expert's work:
    the generator's own variants say so in one line; anything else counts as the expert's."""
    match = _REPEATS.search(text)
    return int(match.group("n")) if match else 1


def _variant(task: Any, repeats: int) -> tuple[str, str]:
    """(name, C source): the suite's hand-written kernel, or (repeats > 1) a correct variant that
    computes the same outputs `repeats` times over (a kernel is a pure function of its inputs, so
    the last pass leaves exactly the expert's result). `volatile` keeps the compiler from folding
    the passes into one: the harness must measure the cost."""
    from sagekernel.targets.cpu.contract import KERNEL_SYMBOL, c_parameters

    expert = task.reference_kernels["cpu"].read_text(encoding="utf-8")
    if repeats <= 1:
        return "expert", expert
    definition = f"void {KERNEL_SYMBOL}("
    if expert.count(definition) != 1:
        raise ModelError(f"oracle: the hand-written kernel of {task.name} does not define "
                         f"{KERNEL_SYMBOL} exactly once")
    params = c_parameters(task)
    args = ", ".join(p.split()[-1] for p in params)
    body = expert.replace(definition, f"static void {_ONCE}(")
    wrapper = (f"\n/* oracle variant: the expert kernel's work, repeated */\n"
               f"void {KERNEL_SYMBOL}({', '.join(params)}) {{\n"
               f"    volatile int64_t sage_repeat = {repeats};\n"
               f"    for (int64_t r = 0; r < sage_repeat; ++r) {_ONCE}({args});\n}}\n")
    return f"slow:{repeats}", body.rstrip() + "\n" + wrapper


def _line(ref: str, adopted: bool) -> str:
    why = ("the kernel follows this lesson" if adopted else "it does not apply to this kernel")
    return f"- {ref}: {'ADOPTED' if adopted else 'NOT ADOPTED'} - {why}"


def _freeform_line(ref: str, adopted: bool, seed: int, prompt: RoundPrompt) -> str:
    form = _FREEFORM[int(draw(seed, "form", prompt.operator, prompt.round, ref) * len(_FREEFORM))]
    return form.format(ref=ref, yes="yes" if adopted else "no", word="ADOPTED" if adopted else "NOT ADOPTED",
                       lower="adopted" if adopted else "not adopted",
                       why="the kernel follows it" if adopted else "does not apply here")


def make_oracle(spec: str, *, config: ModelConfig | None = None, log: ExchangeLog | None = None,
                budget: Budget | None = None) -> OracleModel:
    """The model for `oracle[:key=value,...]` (settings: models/oracle_world.OracleConfig)."""
    _, _, rest = spec.strip().partition(":")
    return OracleModel(OracleConfig.parse(rest), name=spec.strip(), model_config=config, log=log,
                       budget=budget)
