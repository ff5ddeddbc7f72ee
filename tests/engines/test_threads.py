"""Auto threads (issue 28.6): the cores this process may use minus those other programs keep busy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hermes_local.engines.threads import (
    CpuReading,
    ThreadChooser,
    busy_by_others,
    describe_threads,
    read_proc_stat,
    threads_for,
    usable_cores,
)


class Readings:
    """Scripted readings: each `step(busy, own, wall)` advances the cumulative counters."""

    def __init__(self) -> None:
        self.now = CpuReading(1000.0, 5.0, 100.0)
        self.queue: list[CpuReading] = []
        self.slept: list[float] = []

    def step(self, busy_cores: float, own_cores: float, wall: float) -> None:
        n = self.now
        self.now = CpuReading(n.busy_s + busy_cores * wall, n.own_s + own_cores * wall, n.at_s + wall)
        self.queue.append(self.now)

    def read(self) -> CpuReading:
        return self.queue.pop(0) if self.queue else self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_threads_for_counts_a_core_taken_when_others_use_more_than_half() -> None:
    assert threads_for(2, 0.0) == 2
    assert threads_for(2, 0.4) == 2
    assert threads_for(2, 0.6) == 1
    assert threads_for(2, 1.0) == 1
    assert threads_for(2, 2.0) == 1  # never below one
    assert threads_for(8, 2.7) == 5
    assert threads_for(1, 0.0) == 1


def test_busy_by_others_subtracts_this_process_own_cpu_time() -> None:
    before = CpuReading(busy_s=100.0, own_s=10.0, at_s=0.0)
    after = CpuReading(busy_s=104.0, own_s=12.0, at_s=2.0)  # 2 cores busy, 1 of them ours
    assert busy_by_others(before, after) == pytest.approx(1.0)
    assert busy_by_others(after, after) == 0.0
    assert busy_by_others(before, CpuReading(100.5, 11.0, 1.0)) == 0.0  # never negative


def test_chooser_samples_first_then_rechecks_per_call_from_the_interval() -> None:
    r = Readings()
    chooser = ThreadChooser(cores=[0, 1], read=r.read, sleep=r.sleep, sample_s=0.1, stale_s=3.0)
    r.queue = [r.now]
    r.step(busy_cores=1.0, own_cores=0.0, wall=0.1)  # one competing CPU-bound process during the sample
    assert chooser.choose() == 1 and r.slept == [0.1]
    assert "1 of 2 cores" in chooser.describe() and "1.0 busy" in chooser.describe()
    r.step(busy_cores=2.0, own_cores=1.0, wall=1.0)  # our one thread plus the other process
    assert chooser.choose() == 1 and r.slept == [0.1]  # no new sample: the interval since the last call
    r.step(busy_cores=1.0, own_cores=1.0, wall=1.0)  # the other process ended; only we were busy
    assert chooser.choose() == 2
    r.step(busy_cores=0.0, own_cores=0.0, wall=10.0)  # a long pause: stale, so a fresh sample first
    r.step(busy_cores=1.0, own_cores=0.0, wall=0.1)
    assert chooser.choose() == 1 and r.slept == [0.1, 0.1]


def test_the_real_reading_and_the_lines() -> None:
    cores = usable_cores()
    assert cores and set(cores) <= set(range(os.cpu_count() or 1))
    if Path("/proc/stat").exists():
        a = read_proc_stat(cores)
        b = read_proc_stat(cores)
        assert b.busy_s >= a.busy_s and b.at_s >= a.at_s
    chooser = ThreadChooser(sample_s=0.05)
    assert 1 <= chooser.choose() <= len(cores)
    assert describe_threads(None, chooser).startswith("threads auto: ")
    assert describe_threads(3) == "threads 3 (set by n_threads)"


@pytest.mark.real_model
def test_llama_cpp_follows_the_auto_choice_between_calls(embedded_model_path: Path) -> None:
    import llama_cpp

    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.llm import CallOptions

    r = Readings()
    r.queue = [r.now]
    r.step(busy_cores=1.0, own_cores=0.0, wall=0.1)  # busy at load: one thread
    chooser = ThreadChooser(cores=[0, 1], read=r.read, sleep=r.sleep)
    llm = LlamaCppLLM(embedded_model_path, LlamaParams(n_ctx=512, n_gpu_layers=0, seed=1), threads=chooser)
    assert llm.n_threads == 1 and llama_cpp.llama_n_threads(llm._llama.ctx) == 1
    assert llm.threads_line.startswith("threads auto: 1 of 2 cores")
    r.step(busy_cores=0.2, own_cores=0.2, wall=1.0)  # the other program ended
    llm.complete(llm.tokenize("Hello", special=False), CallOptions(max_tokens=2, temperature=0.0))
    assert llm.n_threads == 2 and llama_cpp.llama_n_threads(llm._llama.ctx) == 2
    explicit = LlamaCppLLM(embedded_model_path, LlamaParams(n_ctx=512, n_gpu_layers=0, n_threads=1, vocab_only=True))
    assert explicit.threads is None and explicit.threads_line == "threads 1 (set by n_threads)"
