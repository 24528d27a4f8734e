#!/usr/bin/env python3
"""Checks what a dragstrip tool wrote with --json against docs/result.schema.json.

result_check.py SCHEMA FILE [--intervals N] [--finals N]
    Every line of FILE must be one JSON object the schema takes: at least N interval
    objects (those with an "interval" member; default 0) and exactly --finals final
    objects (default 1), the last line a final one. Prints what is wrong and exits 1.
result_check.py SCHEMA --self-test
    The check must refuse an object that lacks a core member or has one of the wrong
    type, so that a schema or validator gone lax cannot pass every tool.
"""
import argparse
import json
import sys

import jsonschema

CORE = ["tool", "role", "link", "version", "start", "msg_size", "messages", "bytes",
        "seconds", "MB_per_s", "Gbit_per_s", "cpu_user_s", "cpu_sys_s", "errors"]


def validator(schema_path):
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def problems(check, obj):
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in check.iter_errors(obj)]


def check_file(check, path, intervals, finals):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines:
        return [f"{path}: no JSON at all"]
    errors, seen_intervals, seen_finals, last_is_final = [], 0, 0, False
    for number, line in enumerate(lines, 1):
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            errors.append(f"{where}: not JSON ({e}): {line[:120]}")
            continue
        if not isinstance(obj, dict):
            errors.append(f"{where}: not an object")
            continue
        errors += [f"{where}: {p}" for p in problems(check, obj)]
        if "interval" in obj:
            seen_intervals += 1
        else:
            seen_finals += 1
        last_is_final = "interval" not in obj
    if not last_is_final:
        errors.append(f"{path}: ends with an interval object, not a final one")
    if seen_intervals < intervals:
        errors.append(f"{path}: {seen_intervals} interval objects, expected {intervals} at least")
    if seen_finals != finals:
        errors.append(f"{path}: {seen_finals} final objects, expected {finals}")
    return errors


def self_test(check):
    good = {"tool": "ttcp", "role": "send", "link": "tcp", "version": "1.2.3",
            "start": "2026-01-31T12:00:00.000Z", "msg_size": 8192, "messages": 1, "bytes": 8192,
            "seconds": 0.5, "MB_per_s": 0.016384, "Gbit_per_s": 0.000131072,
            "cpu_user_s": 0, "cpu_sys_s": 0.001,
            "errors": {"lost": 0, "dup": 0, "reordered": 0, "corrupt": 0, "malformed": 0},
            "params": {"interval_s": 0}}
    errors = [f"self-test: a good object refused: {p}" for p in problems(check, good)]
    wrong = {"tool": 7, "role": None, "link": ["tcp"], "version": 1, "start": "yesterday",
             "msg_size": -1, "messages": 1.5, "bytes": "8192", "seconds": None,
             "MB_per_s": "fast", "Gbit_per_s": -1, "cpu_user_s": True, "cpu_sys_s": {},
             "errors": []}
    for key in CORE:
        missing = {k: v for k, v in good.items() if k != key}
        if not problems(check, missing):
            errors.append(f"self-test: an object without {key} passed")
        if not problems(check, dict(good, **{key: wrong[key]})):
            errors.append(f"self-test: {key} = {json.dumps(wrong[key])} passed")
    for bad in ({"params": None}, {"errors": dict(good["errors"], lost=None)}):
        if not problems(check, dict(good, **bad)):
            errors.append(f"self-test: {json.dumps(bad)} passed")
    final_without_params = {k: v for k, v in good.items() if k != "params"}
    if not problems(check, final_without_params):
        errors.append("self-test: a final object without params passed")
    return errors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("schema")
    parser.add_argument("file", nargs="?")
    parser.add_argument("--intervals", type=int, default=0)
    parser.add_argument("--finals", type=int, default=1)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    check = validator(args.schema)
    if args.self_test:
        errors = self_test(check)
    elif args.file:
        errors = check_file(check, args.file, args.intervals, args.finals)
    else:
        parser.error("a FILE or --self-test")
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
