"""`hermes-local doctor --gpu`: is the GPU really used? The build's backend, its devices, what `auto` picks, speed.

`gpu_report(path, header, settings, show, speed=...)` prints its lines through `show` (doctor's label/value
printer) and returns the problems found: a CPU-only build (the most common silent fallback: the CUDA wheel was
not what got installed), a GPU build that registered no device, a fit that offloads nothing. With `speed`, the
model is loaded with the fitted layers and measured after a warm-up call (the first call pays CUDA and cuBLAS
set-up), with drafting off (prompt lookup and fast-forward count accepted guesses as decoded tokens) and on,
and then on the CPU alone for the ratio. Holds no fitting or loading logic of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hermes_local.config import Settings

SPEED_PROMPT = "Count from 1 to 300, separated by commas: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"
DECODE_TOKENS = 64
SPEED_SECONDS = 4.0


def gpu_report(
    path: Path, header: Any, settings: Settings, show: Callable[[str, str], None], *, speed: bool = True
) -> list[str]:
    """Print the GPU lines; return the problems (doctor exits 1 on any)."""
    from hermes_local.engines.inprocess.backend import backend_info, backend_name, device_free, devices
    from hermes_local.engines.inprocess.preflight import REINSTALL
    from hermes_local.models.fit import Free, fit, host_free
    from hermes_local.models.gguf import human_bytes

    problems: list[str] = []
    try:
        offload, found = bool(backend_info()["gpu_offload"]), devices()
    except ImportError as exc:
        return [f"llama-cpp-python is not usable ({exc}); fix: {REINSTALL}"]
    backend = backend_name(found)
    show("gpu build", f"{backend} backend" + ("" if offload else " only: this llama.cpp build cannot offload"))
    for dev in found:
        memory = f"{human_bytes(dev['free'])} free of {human_bytes(dev['total'])}"
        show(f"device {dev['name']}", f"{dev['description']} ({dev['type']}), {memory}")
    gpus = [d for d in found if d["type"] != "cpu"]
    if not offload:
        problems.append(f"GPU requested but this llama-cpp-python build is CPU-only; fix: {REINSTALL}")
    elif not gpus:
        problems.append("this build has GPU support but found no GPU (driver missing or too old?); fix: nvidia-smi")
    try:
        chosen = fit(header, "auto", "auto", Free(device_free(settings.main_gpu), host_free()))
        show("auto fit", chosen.line().removeprefix("fit: "))
    except Exception as exc:  # noqa: BLE001 - a refusal is the finding
        problems.append(str(exc))
        return problems
    if offload and gpus and not chosen.layers:
        problems.append("no layer fits the free device memory; fix: free the GPU or pick a smaller quant")
    if speed and offload and gpus and chosen.layers:
        gpu_on = measure(path, settings, chosen.n_gpu_layers, chosen.n_ctx, drafting=True)
        gpu_off = measure(path, settings, chosen.n_gpu_layers, chosen.n_ctx, drafting=False)
        cpu = measure(path, settings, 0, chosen.n_ctx, drafting=False)
        show("gpu speed", f"{gpu_off['line']}; with drafting: decode {gpu_on['decode_tps']:.1f} tok/s")
        show("cpu speed", cpu["line"])
        ratio = gpu_off["decode_tps"] / max(cpu["decode_tps"], 1e-9)
        show("gpu vs cpu", f"decode {ratio:.1f}x, prompt {gpu_off['prompt_tps'] / max(cpu['prompt_tps'], 1e-9):.1f}x")
        if ratio < 1.2:
            problems.append(f"the GPU decodes only {ratio:.1f}x the CPU: offload is not working; fix: {REINSTALL}")
    return problems


def measure(
    path: Path,
    settings: Settings,
    n_gpu_layers: int,
    n_ctx: int,
    *,
    drafting: bool,
    seconds: float = SPEED_SECONDS,
    threads: Sequence[int] = (),
) -> dict[str, Any]:
    """Prompt and decode tokens/s after a warm-up call (the first call pays set-up: CUDA, cuBLAS, page faults),
    decoding about `seconds` worth of tokens; `drafting` off: every decoded token is one decode step (prompt lookup
    and fast-forward would count accepted guesses). Also `doctor`'s plain speed line.

    With `threads`, the same model (loaded once) is then measured again at each of these fixed thread counts:
    `threads` maps each count to its prompt and decode tok/s, and `busy_others` is how many cores other processes
    kept busy meanwhile (`engines/threads.py`): figures taken beside a busy program favour fewer threads."""
    from hermes_local.config import settings_for
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.engines.threads import ThreadChooser
    from hermes_local.llm import CallOptions

    params = settings_for(LlamaParams, settings, n_ctx=min(n_ctx, 2048), n_gpu_layers=n_gpu_layers)
    start = time.perf_counter()
    llm = LlamaCppLLM(path, params)
    load_s = time.perf_counter() - start
    llm.drafting = llm.fast_forward = drafting
    bos = llm.bos_tokens()
    warm = llm.complete(
        bos + llm.tokenize("Warm up: say hello.", special=False), CallOptions(max_tokens=4, temperature=0.0)
    )
    rough = warm.usage.completion_tokens / max(warm.usage.seconds - (warm.usage.prompt_seconds or 0.0), 1e-9)
    prompt = bos + llm.tokenize(SPEED_PROMPT * 4, special=False)
    wanted = int(min(DECODE_TOKENS, max(8, rough * seconds * 0.6)))
    prompt_tps, decode_tps, decoded = _speed(llm, prompt, wanted)
    line = (
        f"prompt {prompt_tps:.0f} tok/s ({len(prompt)} tokens), decode {decode_tps:.1f} tok/s "
        f"({decoded} tokens), load {load_s:.1f}s"
    )
    result: dict[str, Any] = {"prompt_tps": prompt_tps, "decode_tps": decode_tps, "load_s": load_s, "line": line}
    if threads:
        others = ThreadChooser(stale_s=float("inf"))  # the interval is the whole sweep, however long
        others.choose()
        table: dict[int, dict[str, float]] = {}
        for n in threads:
            llm.use_threads(n)
            n_prompt, n_decode, _ = _speed(llm, prompt, wanted)
            table[n] = {"prompt_tps": n_prompt, "decode_tps": n_decode}
        others.choose()
        result |= {"threads": table, "busy_others": others.busy_others}
    return result


def _speed(llm: Any, prompt: list[int], wanted: int) -> tuple[float, float, int]:
    """(prompt tok/s, decode tok/s, tokens decoded) of `prompt` evaluated whole (the KV cache forgotten first),
    then `wanted` tokens decoded after it."""
    from hermes_local.llm import CallOptions

    llm.reset_cache()
    first = llm.complete(prompt, CallOptions(max_tokens=1, temperature=0.0))
    prompt_tps = first.usage.prompt_tokens_evaluated / max(first.usage.prompt_seconds or first.usage.seconds, 1e-9)
    decoded = llm.complete(prompt, CallOptions(max_tokens=wanted, temperature=0.0))
    decode_s = decoded.usage.seconds - (decoded.usage.prompt_seconds or 0.0)
    return prompt_tps, decoded.usage.completion_tokens / max(decode_s, 1e-9), decoded.usage.completion_tokens
