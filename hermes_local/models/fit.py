"""`--n-gpu-layers auto` and `--n-ctx auto`: the most layers and the largest context that fit, from the header.

`fit(header, n_ctx, n_gpu_layers, free)` takes the requested values (an int, or "auto") and the free memory
the caller measured (`Free`: device and host bytes; the caller asks llama.cpp's devices, tests state figures),
and returns a `Fit`: the numbers to load with and the line to print. It builds on `footprint.estimate_memory`
(llama.cpp's placement of layers, the f16 KV cache per token, compute buffers) with a margin on each side.
Order of preference: every layer on the device, then the largest context up to the model's trained length,
then fewer layers at a context of at least `CTX_FLOOR`. A combination that cannot fit raises `UserError` (one
line, naming the flag to change) before anything is loaded. Reads the header only; never loads a model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hermes_local.errors import UserError
from hermes_local.models.footprint import device_layers, estimate_memory
from hermes_local.models.gguf import GGUFHeader, human_bytes, model_shape

Auto = Literal["auto"]
CTX_STEP = 256  # contexts are chosen in multiples of this
CTX_FLOOR = 4096  # fewer layers are offloaded before the context goes below this (or the trained length)
DEVICE_MARGIN = 512 * 2**20  # left free on the device: CUDA context, cuBLAS workspace, fragmentation
HOST_MARGIN = 1024 * 2**20  # left free on the host: the agent itself, tools, the page cache's churn
DEFAULT_CTX = 4096  # a model whose header gives no trained length


@dataclass(frozen=True)
class Free:
    """Free memory in bytes: `device` None when there is no GPU (or the build cannot offload), `host` None
    when unknown (no limit is then applied on the host side)."""

    device: int | None
    host: int | None


@dataclass(frozen=True)
class Fit:
    """What to load with, and why."""

    n_ctx: int
    n_gpu_layers: int
    layers: int  # layers on the device as llama.cpp counts them (the output layer counts as one)
    total_layers: int
    estimate: dict[str, Any]
    auto: tuple[str, ...]  # which of n_ctx / n_gpu_layers were "auto"

    def line(self) -> str:
        """One line for the terminal and the log."""
        where = "CPU only"
        if self.layers:
            where = f"{self.layers}/{self.total_layers} layers on the GPU, {human_bytes(self.estimate['gpu_bytes'])}"
        chose = " and ".join(f"{name}={getattr(self, name)}" for name in self.auto) or "fixed settings"
        return f"fit: {chose} ({where}; n_ctx {self.n_ctx})"


def _fits(est: dict[str, Any], free: Free) -> bool:
    device_ok = est["gpu_bytes"] == 0 or (free.device is not None and est["gpu_bytes"] + DEVICE_MARGIN <= free.device)
    host_ok = free.host is None or est["cpu_bytes"] + HOST_MARGIN <= free.host
    return device_ok and host_ok


def fit(
    header: GGUFHeader, n_ctx: int | Auto, n_gpu_layers: int | Auto, free: Free, *, n_batch: int = 512,
    sequences: int = 1) -> Fit:  # fmt: skip
    """The load options for `header` under `free` (see the module docstring). `sequences`: contexts of
    `n_ctx` each that share the KV cache (`parallel`); an "auto" context is the largest per sequence."""
    shape = model_shape(header)
    n_layer = shape["n_layer"] or 0
    trained = _trained(header)

    def estimate(layers: int, ctx: int) -> dict[str, Any]:
        return estimate_memory(header, ctx * sequences, layers, n_batch)

    auto = tuple(name for name, value in (("n_gpu_layers", n_gpu_layers), ("n_ctx", n_ctx)) if value == "auto")
    top_layers = n_layer + 1 if free.device is not None else 0
    if not auto:  # fixed values: kept, unless they overflow the device (a CUDA out-of-memory abort)
        est = estimate(_count(int(n_gpu_layers), n_layer, free), int(n_ctx))
        if free.device is not None and est["gpu_bytes"] > free.device:
            raise UserError(_refusal(header, est, free, n_ctx, n_gpu_layers))
        return Fit(int(n_ctx), int(n_gpu_layers), device_layers(est), n_layer + 1, est, ())
    layer_choices = range(top_layers, -1, -1) if n_gpu_layers == "auto" else [_count(int(n_gpu_layers), n_layer, free)]
    if n_ctx == "auto":
        floor = min(CTX_FLOOR, trained)
        ctx_choices: list[int] = list(range(trained, CTX_STEP - 1, -CTX_STEP))
    else:
        floor = int(n_ctx)
        ctx_choices = [int(n_ctx)]

    for layers in layer_choices:
        usable = [c for c in ctx_choices if c >= floor] if layers > 0 and n_gpu_layers == "auto" else ctx_choices
        ctx = _largest(usable, lambda c, n=layers: _fits(estimate(n, c), free))  # type: ignore[misc]
        if ctx is not None:
            return Fit(ctx, layers, min(layers, n_layer + 1), n_layer + 1, estimate(layers, ctx), auto)
    smallest = estimate(layer_choices[-1], ctx_choices[-1])
    raise UserError(_refusal(header, smallest, free, n_ctx, n_gpu_layers))


def _largest(choices: list[int], ok: Callable[[int], bool]) -> int | None:
    """The first of `choices` (descending; `ok` holds for a suffix of them) for which `ok` holds: a bisection."""
    lo, hi = 0, len(choices)
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(choices[mid]):
            hi = mid
        else:
            lo = mid + 1
    return choices[lo] if lo < len(choices) else None


def _count(n_gpu_layers: int, n_layer: int, free: Free) -> int:
    """A fixed `--n-gpu-layers` as a layer count (-1: all); 0 when there is no device."""
    if free.device is None:
        return 0
    return n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layer + 1)


def _trained(header: GGUFHeader) -> int:
    value = header.arch_value("context_length")
    trained = int(value) if isinstance(value, int) and value > 0 else DEFAULT_CTX
    return max(CTX_STEP, trained - trained % CTX_STEP)


def _refusal(header: GGUFHeader, est: dict[str, Any], free: Free, n_ctx: int | Auto, layers: int | Auto) -> str:
    need_dev, need_host = human_bytes(est["gpu_bytes"] + DEVICE_MARGIN), human_bytes(est["cpu_bytes"] + HOST_MARGIN)
    have_dev = human_bytes(free.device) if free.device is not None else "no device"
    have_host = human_bytes(free.host) if free.host is not None else "unknown"
    fix = "--n-gpu-layers auto" if layers != "auto" else "a smaller quant (hermes-local models list)"
    if n_ctx != "auto":
        fix = f"--n-ctx auto or a smaller --n-ctx, or {fix}"
    return (
        f"{header.path.name} does not fit this machine at n_ctx={n_ctx}, n_gpu_layers={layers}: it needs "
        f"~{need_dev} on the device (free: {have_dev}) and ~{need_host} on the host (free: {have_host}); "
        f"use {fix}"
    )


def host_free() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (None elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
