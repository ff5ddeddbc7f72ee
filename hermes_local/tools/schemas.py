"""Tool schemas given as is (MCP tools): which ones we use, and validation that fetches nothing and cannot hang.

`check_schema` refuses, in one line naming the tool, a schema that is not a valid JSON schema, that has a
`$ref` (or `$dynamicRef`, `$recursiveRef`) pointing outside itself (`http://...`, `other.json`: validation
would fetch it, before approval and outside any sandbox), a `$ref` that does not resolve or that refers back
to itself (a recursive schema: the grammar and the prompt cannot unfold it), or one nested past
`MAX_DEPTH`. `bounded_validator` is a jsonschema validator with an empty `referencing.Registry` (local refs
only, never a retrieval) whose `pattern`, `patternProperties` and `additionalProperties` match with the
`regex` engine under a time limit, and `validation_errors` stops the whole check at `VALIDATION_BUDGET`
seconds, so that a pattern like `^(a|aa)+$` cannot hold a run for minutes. `ToolRegistry.register` runs
`check_refs` on every schema given as is. Does not build the pydantic model or talk to servers (see
`mcp/results.py`, `mcp/manager.py`) and knows nothing of MCP listings (`mcp/listing.py`).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 64  # nesting of a schema (objects and lists) past which it is refused
MAX_NODES = 50_000  # schema nodes visited, refs unfolded included
PATTERN_TIMEOUT = 0.5  # seconds one pattern match may take
VALIDATION_BUDGET = 2.0  # seconds one call's arguments may take to validate
REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


class SchemaRefused(ValueError):
    """A tool schema we will not use; the message is one line that names the tool."""


def check_schema(tool: str, schema: Any) -> None:
    """Raise `SchemaRefused` when `schema` is not one we validate against safely (see the module docstring)."""
    from jsonschema import SchemaError, ValidationError, validators  # type: ignore[import-untyped]
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    check_refs(tool, schema)
    try:
        error = best_match(_meta_validator(validators.validator_for(schema)).iter_errors(schema))
        if error is not None:
            raise error
    except (SchemaError, ValidationError) as exc:
        where = "/".join(str(p) for p in exc.path) or "the schema"
        message = " ".join(str(exc.message).split())[:200]
        raise SchemaRefused(f"tool {tool}: its input schema is invalid at {where}: {message}") from None
    except RecursionError:
        raise SchemaRefused(f"tool {tool}: its input schema is nested too deeply") from None


def check_refs(tool: str, schema: Any) -> None:
    """Raise `SchemaRefused` for a non-object schema or a remote, dangling or recursive ref (no meta-schema check)."""
    if not isinstance(schema, dict):
        raise SchemaRefused(f"tool {tool}: its input schema is not a JSON object")
    _walk(tool, schema, schema, 0, [], set(), [0])


def _walk(
    tool: str, node: Any, root: dict[str, Any], depth: int, active: list[str], done: set[str], count: list[int]
) -> None:
    """Depth-first through `node`, unfolding local refs; refuses remote, dangling and recursive refs."""
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > MAX_NODES:
        raise SchemaRefused(f"tool {tool}: its input schema is nested too deeply or too large")
    if isinstance(node, list):
        for item in node:
            _walk(tool, item, root, depth + 1, active, done, count)
        return
    if not isinstance(node, dict):
        return
    for key in REF_KEYS:
        if key not in node:
            continue
        ref = node[key]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaRefused(
                f"tool {tool}: its input schema has a non-local {key} {str(ref)[:120]!r} "
                "(only refs inside the schema, #/..., are followed; nothing is fetched)"
            )
        if ref in active:
            raise SchemaRefused(f"tool {tool}: its input schema has a recursive {key} {ref!r}")
        if ref not in done:
            target = _resolve(root, ref)
            if target is None:
                raise SchemaRefused(f"tool {tool}: its input schema's {key} {ref!r} does not resolve inside the schema")
            active.append(ref)
            _walk(tool, target, root, depth + 1, active, done, count)
            active.pop()
            done.add(ref)
    for key, value in node.items():
        if key in ("enum", "const", "default", "examples") or key in REF_KEYS:
            continue  # values, not schemas
        _walk(tool, value, root, depth + 1, active, done, count)


def _resolve(root: dict[str, Any], ref: str) -> Any:
    """The node a local JSON-pointer ref (`#`, `#/a/b`) names, or None."""
    from urllib.parse import unquote

    pointer = unquote(ref[1:])
    if pointer == "":
        return root
    if not pointer.startswith("/"):
        return None  # an anchor (#name): not followed
    node: Any = root
    for part in pointer[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


_deadline = threading.local()


def _search(pattern: str, text: str) -> bool:
    """`re.search` semantics with the `regex` engine under the pattern time limit and the call's budget."""
    import regex  # type: ignore[import-untyped]
    from jsonschema import ValidationError

    remaining = getattr(_deadline, "at", time.monotonic() + VALIDATION_BUDGET) - time.monotonic()
    try:
        return regex.search(pattern, text, timeout=max(0.01, min(PATTERN_TIMEOUT, remaining))) is not None
    except TimeoutError:
        raise ValidationError(
            f"pattern {pattern[:80]!r} took too long to check; send a shorter or simpler value"
        ) from None
    except regex.error as exc:
        raise ValidationError(f"pattern {pattern[:80]!r} is not a usable regular expression ({exc})") from None


def _pattern(validator: Any, patrn: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance[:80]!r} does not match {patrn[:80]!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in properties and not any(_search(p, k) for p in patterns)]
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif ap is False and extras:
        yield ValidationError(
            f"Additional properties are not allowed ({', '.join(map(repr, sorted(extras)))} unexpected)"
        )


@functools.cache
def _bounded_class(base: Any) -> Any:
    """`base` (a jsonschema validator class) with our pattern keywords; made once per class, not per tool."""
    from jsonschema import validators

    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties}
    return validators.extend(base, {**keywords, "additionalProperties": _additional_properties})


@functools.cache
def _meta_validator(cls: Any) -> Any:
    """A validator of schemas written for `cls` (its meta-schema), made once per class."""
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped] # the bundled meta-schemas: nothing is retrieved either

    return cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER, registry=REGISTRY)


def bounded_validator(schema: dict[str, Any]) -> Any:
    """A jsonschema validator for `schema` that resolves only local refs and matches patterns under a time limit."""
    from jsonschema import validators
    from referencing import Registry

    cls = _bounded_class(validators.validator_for(schema))
    return cls(schema, registry=Registry())  # empty: `$ref`s resolve within the schema, nothing is retrieved


def validation_errors(validator: Any, data: Any) -> list[Any]:
    """The validation errors of `data` (sorted by path); one error when the check ran past its budget."""
    from jsonschema import ValidationError
    from referencing.exceptions import Unresolvable

    _deadline.at = time.monotonic() + VALIDATION_BUDGET
    errors: list[Any] = []
    try:
        for error in validator.iter_errors(data):
            errors.append(error)
            if time.monotonic() > _deadline.at:
                errors.append(
                    ValidationError(f"the arguments took over {VALIDATION_BUDGET:g} s to check; send smaller values")
                )
                break
    except ValidationError as exc:  # a pattern that timed out or does not compile
        errors.append(exc)
    except (Unresolvable, RecursionError) as exc:
        errors.append(ValidationError(f"the tool's schema could not be applied ({type(exc).__name__})"))
    finally:
        del _deadline.at
    return sorted(errors, key=lambda e: [str(p) for p in e.path])
