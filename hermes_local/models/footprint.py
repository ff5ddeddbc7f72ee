"""Memory estimates from GGUF metadata: weights + KV cache + compute buffers, split CPU/GPU.

Follows llama.cpp's placement of offloaded layers. Reads the header only; never loads a model, and is
told by its caller whether the llama.cpp build can offload at all.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from hermes_local.models.gguf import GGUFHeader, human_bytes, model_shape, read_header


def estimate_memory(path: str | Path | GGUFHeader, n_ctx: int, n_gpu_layers: int, n_batch: int = 512) -> dict[str, Any]:
    """Approximate bytes for weights, the f16 KV cache at `n_ctx` and compute buffers, split CPU/GPU.

    Follows llama.cpp's placement: the last `n_gpu_layers` repeating layers go to the GPU, the output
    layer too once every repeating layer is offloaded (-1 = everything); token embeddings stay on the CPU.
    """
    header = path if isinstance(path, GGUFHeader) else read_header(path)
    shape = model_shape(header)
    n_layer = shape["n_layer"] or 0
    offload = n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layer + 1)
    first_gpu_layer = n_layer - min(offload, n_layer)
    gpu_weights = cpu_weights = 0
    for t in header.tensors:
        size = t.n_bytes or 0
        match = re.match(r"blk\.(\d+)\.", t.name)
        on_gpu = int(match.group(1)) >= first_gpu_layer if match else (offload > n_layer and "token_embd" not in t.name)
        if on_gpu and offload:
            gpu_weights += size
        else:
            cpu_weights += size
    kv_per_token_layer = (shape["n_head_kv"] or 0) * ((shape["head_dim_k"] or 0) + (shape["head_dim_v"] or 0)) * 2
    kv_bytes = kv_per_token_layer * n_ctx * n_layer
    kv_gpu = kv_per_token_layer * n_ctx * min(offload, n_layer)
    compute = 4 * n_batch * (n_ctx * (shape["n_head"] or 0) + (shape["n_vocab"] or 0))
    weights = gpu_weights + cpu_weights
    gpu_bytes = gpu_weights + kv_gpu + (compute if offload else 0)
    total = weights + kv_bytes + compute
    return {
        "n_ctx": n_ctx,
        "n_layer": n_layer,
        "layers_on_gpu": min(offload, n_layer),
        "output_on_gpu": offload > n_layer,
        "weights_bytes": weights,
        "kv_cache_bytes": kv_bytes,
        "kv_bytes_per_token": kv_per_token_layer * n_layer,
        "compute_bytes": compute,
        "gpu_bytes": gpu_bytes,
        "cpu_bytes": total - gpu_bytes,
        "total_bytes": total,
    }


def device_layers(est: dict[str, Any]) -> int:
    """Layers on the device as llama.cpp counts them ("offloaded 33/33 layers"): the output layer is one."""
    return int(est["layers_on_gpu"]) + int(est["output_on_gpu"])


def format_memory(est: dict[str, Any]) -> str:
    """One line for the terminal, printed before a model is loaded."""
    where = (
        "CPU only"
        if not est["layers_on_gpu"] and not est["output_on_gpu"]
        else f"{device_layers(est)}/{est['n_layer'] + 1} layers on GPU ({human_bytes(est['gpu_bytes'])})"
    )
    return (
        f"memory estimate: {human_bytes(est['total_bytes'])} = weights {human_bytes(est['weights_bytes'])}"
        f" + KV cache {human_bytes(est['kv_cache_bytes'])} at n_ctx={est['n_ctx']}"
        f" + compute ~{human_bytes(est['compute_bytes'])}; {where}"
    )


def physical_memory() -> int | None:
    """Total RAM in bytes, when the OS says."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def memory_line(path: Path | GGUFHeader, n_ctx: int, n_gpu_layers: int, *, gpu_offload: bool) -> str:
    """The estimate to print before loading a model; offload is 0 when the build has no GPU support.

    `gpu_offload` is the build's fact, asked of llama.cpp by the caller (`engines.inprocess.backend`)."""
    if n_gpu_layers != 0 and not gpu_offload:
        line = format_memory(estimate_memory(path, n_ctx, 0))
        return f"{line} (this llama.cpp build has no GPU support; --n-gpu-layers {n_gpu_layers} is ignored)"
    return format_memory(estimate_memory(path, n_ctx, n_gpu_layers))
