"""One `LlamaCppLLM.complete()` call's decode state and its steps (`Generation`).

Sample (confirming drafted tokens), emit, watch the thought (a thought over budget gets its closing marker),
switch the lazy grammar on at its trigger and off after the call's closing tag, draft (grammar-forced text,
prompt-lookup guesses) and decode in one batch, and closing mode. `llamacpp.py` runs the loop over these
steps, owns the model, the KV cache and the batched decode; this module does not load a model, evaluate the
prompt or count usage, and reaches its owner only through `GenerationOwner` (it never imports `llamacpp.py`).
Knows nothing of tools, prompts or parsing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hermes_local.engines.inprocess.automaton import TokenTexts
from hermes_local.engines.inprocess.decoding import ForcedMemo, GrammarTracker, ThoughtWatch, draft_for
from hermes_local.engines.inprocess.drafting import PromptLookup
from hermes_local.engines.inprocess.draftmodel import DraftModel
from hermes_local.engines.inprocess.sampling import Output, SamplerOwner, TokenSampler
from hermes_local.llm import CallOptions, Completion, TokenCallback


class GenerationOwner(SamplerOwner, Protocol):
    """What a call's decode steps need of the engine that owns the model (`LlamaCppLLM`): its context size,
    switches and counters, the forced-text memo, the end-of-generation test, grammar trackers and the batched
    decode. Typed here so this module never imports its owner."""

    n_ctx: int
    drafting: bool
    fast_forward: bool
    draft_counts: dict[str, int]
    _forced_memo: ForcedMemo
    _token_texts: TokenTexts | None
    draft_model: DraftModel | None

    def detokenize(self, tokens: Sequence[int]) -> str: ...

    def _is_end_of_generation(self, token: int) -> bool: ...

    def _tracker(self, grammar: str) -> GrammarTracker | None: ...

    def _decode(self, batch: list[int], draft: list[int]) -> int: ...

    def _drop_ahead(self, ahead: list[int]) -> list[int]: ...


class Generation:
    """One `complete()` call's decode state and its steps: sample (confirming drafted tokens), emit, the
    lazy-grammar switch, drafting with the batched decode, and closing mode.

    Drafted tokens (grammar-forced text, prompt-lookup guesses) are evaluated in one batch with the last
    sampled token; the sampler then draws every position from its own logits row as plain decoding
    would, and a drafted token is kept only while it equals that draw.
    """

    def __init__(
        self, owner: GenerationOwner, prompt: list[int], options: CallOptions, on_token: TokenCallback | None
    ) -> None:
        self.owner, self.options = owner, options
        self.constrained = options.constrained
        self.sampler = TokenSampler(owner, options.temperature, options.grammar if self.constrained else None)
        self.tracker = owner._tracker(options.grammar) if self.constrained and options.grammar else None
        self.out = Output(owner, options.stop, on_token)
        self.finish = "length"
        self.truncated: str | None = None
        self.search_from = 0  # where to look for the grammar trigger next
        self.budget = min(options.max_tokens, owner.n_ctx - len(prompt))
        self.lookup = PromptLookup(prompt) if owner.drafting else None
        self.prompt = prompt
        self.ahead: list[int] = []  # drafted tokens in the KV cache, not yet confirmed
        self.source, self.proposed, self.confirmed = "", 0, 0  # the pending draft: where from, length, confirmed
        self.spans: list[tuple[int, str]] = []  # (output index, forced text) for the forced-text memo
        self.row = -1  # which logits row of the last decode the next token is sampled from
        tail = owner.detokenize(prompt[-8:]) if options.thoughts else ""  # the prompt may open the thought
        self.thought = ThoughtWatch.start(options.thoughts, options.reasoning_budget, tail)

    @property
    def room(self) -> int:
        """Tokens the budget has left."""
        return self.budget - len(self.out.tokens)

    def closing_reason(self) -> str | None:
        """Why closing mode takes over now ("budget", "loop", "max_length"), or None."""
        return self.tracker.closing_reason(self.room) if self.tracker is not None else None

    def close(self, reason: str) -> None:
        """Closing mode: append the shortest valid completion instead of sampling; the call ends with it."""
        assert self.tracker is not None
        self.ahead = self.owner._drop_ahead(self.ahead)
        batch = self.sampler.force(self.tracker.completion_tokens()[: self.room])
        self.truncated = reason
        if batch and not self.out.add(batch, self.tracker) and self.tracker.finished:
            self.finish = "stop"

    def sample(self) -> tuple[int, list[int]]:
        """The next token, and what is left to evaluate: nothing when it confirms the draft's next token
        (already in the KV cache), else the token itself (and the rest of the draft is dropped)."""
        token = self.sampler.sample(self.row)
        if self.ahead and token == self.ahead[0]:
            self.ahead.pop(0)
            self.row += 1
            batch = []
            self.confirmed += 1
            self.owner.draft_counts["accepted"] += 1
            if self.source == "model" and self.owner.draft_model is not None:
                self.owner.draft_model.counts["accepted"] += 1
        else:
            self.ahead = self.owner._drop_ahead(self.ahead)
            batch = [token]
        if self.source in ("lookup", "model") and not self.ahead:
            learner = self.lookup if self.source == "lookup" else self.owner.draft_model
            if learner is not None:
                learner.record(self.proposed, self.confirmed)
            self.source = ""
        return token, batch

    def emit(self, token: int) -> bool:
        """Add `token` to the output; True when the call ends with it (end of generation, a stop string,
        a grammar that allows only the end now, the budget)."""
        if self.owner._is_end_of_generation(token) or self.out.add([token], self.tracker):
            self.finish = "stop"
            return True
        if self.lookup is not None:
            self.lookup.extend([token])
        if self.tracker is not None and self.options.grammar_trigger is None and self.tracker.finished:
            self.finish = "stop"
            return True
        return self.room <= 0

    def watch_thought(self, batch: list[int]) -> list[int]:
        """`batch`, plus the thought's closing marker when the open thought has used its reasoning budget."""
        watch = self.thought
        if watch is not None and self.constrained:
            watch.skip(len(self.out.text))  # inside a call: no thought opens there
        if watch is None or self.constrained:
            return batch
        close = watch.update(self.out.text, len(self.out.tokens))
        if close is None or self.room <= 0:
            return batch
        self.ahead = self.owner._drop_ahead(self.ahead)  # a confirmed draft token is already evaluated
        forced = self.sampler.force(self.owner.tokenize(close, special=True)[: self.room])
        self.out.add(forced, None)
        watch.update(self.out.text, len(self.out.tokens))
        return batch + forced

    def switch_grammar(self) -> None:
        """The lazy grammar: on once the trigger appears anywhere in the output (even mid-token: the text
        after it is replayed into the grammar) after any thought, off again after the call's closing tag."""
        if self.thought is not None and not self.constrained:
            if self.thought.inside:
                return  # a call rehearsed in a thought is not constrained (nor run)
            self.search_from = max(self.search_from, self.thought.closed_at)
        grammar, trigger = self.options.grammar or "", self.options.grammar_trigger or ""
        text = self.out.text
        at = -1 if self.constrained else text.find(trigger, self.search_from)
        # off after the call: its closing tag, or (a family whose call ends otherwise: `<tool_call|>`, a JSON
        # object, `</minimax:tool_call>`) the grammar read a whole call, so a second call can trigger it again
        finished = self.tracker is not None and self.tracker.finished
        switch_off = self.constrained and (text.rstrip().endswith("</tool_call>") or finished)
        if at >= 0 or switch_off:
            self.constrained = at >= 0
            self.search_from = len(text)
            self.sampler.close()
            self.sampler = TokenSampler(self.owner, self.options.temperature, grammar if self.constrained else None)
            rest = text[at + len(trigger) :] if self.constrained else ""
            self.tracker = self.owner._tracker(grammar) if self.constrained and not rest else None
            if self.constrained and not self.sampler.feed(rest):
                self.constrained = False  # already off-grammar: leave it to the parser
                self.sampler.close()
                self.sampler = TokenSampler(self.owner, self.options.temperature, None)
        elif not self.constrained:
            self.search_from = max(self.search_from, len(text) - len(trigger) + 1)

    def draft_and_decode(self, batch: list[int]) -> None:
        """Evaluate `batch` with a draft behind it (forced text or a prompt-lookup guess) in one decode."""
        room = self.room - 1
        forcing = self.tracker if self.owner.fast_forward and self.out.whole_chars() else None
        memo, lookup = self.owner._forced_memo, self.lookup
        self.source, guess = draft_for(forcing, memo, lookup, room) if room > 0 else ("", [])
        if not guess and room > 0 and self.owner.draft_model is not None:  # the draft model (`--draft-model`)
            self.source, guess = (
                "model",
                self.owner.draft_model.propose(self.prompt + self.out.tokens, room, self.out.tokens),
            )
        if self.source == "forced" and self.tracker is not None:
            self.spans.append((len(self.out.tokens), self.tracker.forced_text()))
        self.row = self.owner._decode(batch, guess)
        self.owner.draft_counts["proposed"] += len(guess)
        self.ahead, self.proposed, self.confirmed = guess, len(guess), 0

    def completion(self) -> Completion:
        """What the call produced (the caller adds usage); the forced-text memo learns the model's splits."""
        if self.spans and self.owner._token_texts is not None:
            self.owner._forced_memo.learn(self.out.tokens, self.owner._token_texts, self.spans)
        text = self.out.finish()
        return Completion(text=text, tokens=self.out.tokens, finish_reason=self.finish, truncated=self.truncated)
