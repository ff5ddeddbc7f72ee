"""Issue 43 item 6 (templates): a GGUF whose embedded chat template does not parse used to crash with a Jinja
traceback inside llama.cpp's model load, whatever `--dialect` said. Now it is one line naming the model, the key and
the template's line, before anything loads; `--dialect NAME` (and only that) falls back to that format's own
template. The GGUFs are the embedded SmolLM2 rewritten by gguf-py with a broken template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from typer.testing import CliRunner

from hermes_local.cli.app import app

BROKEN = "{% for m in messages %}\n{{ m.content }\n{% endfor %}"  # line 2: a `}` short


def with_template(src: Path, dst: Path, template: str, *, tensors: bool) -> Path:
    """`src` rewritten with `template` as its tokenizer.chat_template (vocabulary only unless `tensors`)."""
    reader = GGUFReader(src)
    writer = GGUFWriter(dst, str(reader.fields["general.architecture"].contents()))
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment", "tokenizer.chat_template"):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    writer.add_key_value("tokenizer.chat_template", template, GGUFValueType.STRING)
    kept = reader.tensors if tensors else []
    for t in kept:  # as gguf-py's own gguf_new_metadata.py copies them
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in kept:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    return dst


@pytest.fixture(scope="module")
def broken_vocab(embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return with_template(embedded_model_path, tmp_path_factory.mktemp("gguf") / "smol-broken.gguf", BROKEN,
                         tensors=False)  # fmt: skip


@pytest.mark.parametrize("extra", [[], ["--dialect", "gguf"]])
def test_a_template_that_does_not_parse_is_one_line_before_the_model_loads(
    broken_vocab: Path, workspace: Path, extra: list[str]
) -> None:
    res = CliRunner().invoke(
        app, ["run", "Say hi", "--model", str(broken_vocab), "--workspace", str(workspace), *extra]
    )
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output
    assert "model smol-broken.gguf: its chat template does not parse" in res.stderr
    assert "(tokenizer.chat_template line 2: unexpected '}')" in res.stderr and "pass --dialect hermes|" in res.stderr


def test_dialect_falls_back_to_that_formats_own_template(broken_vocab: Path) -> None:
    res = CliRunner().invoke(app, ["prompt", "Say hi", "--model", str(broken_vocab), "--dialect", "hermes"])
    assert res.exit_code == 0, res.output
    assert "<|im_start|>user\nSay hi<|im_end|>" in res.stdout and "dialect hermes" in res.stderr


def test_a_gguf_whose_template_parses_is_not_refused(embedded_model_path: Path, tmp_path: Path) -> None:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    fine = with_template(embedded_model_path, tmp_path / "fine.gguf", template, tensors=False)
    res = CliRunner().invoke(app, ["prompt", "Say hi", "--model", str(fine)])
    assert res.exit_code == 0, res.output


@pytest.mark.real_model
def test_a_run_with_dialect_on_the_real_weights_says_which_template_it_used(
    embedded_model_path: Path, tmp_path: Path, workspace: Path
) -> None:
    model = with_template(embedded_model_path, tmp_path / "smol-broken-full.gguf", BROKEN, tensors=True)
    args = ["run", "Say hello.", "--model", str(model), "--workspace", str(workspace), "--dialect", "hermes"]
    res = CliRunner().invoke(app, [*args, "--json", "--max-steps", "1", "--tool-choice", "none", "--n-ctx", "2048"])
    assert "Traceback" not in res.output
    out = json.loads(res.stdout)
    assert out["steps"] == 1 and out["error"] is None, res.stderr
    assert "the model's chat template does not parse (tokenizer.chat_template line 2" in res.stderr
    assert "using the hermes format's own" in res.stderr
