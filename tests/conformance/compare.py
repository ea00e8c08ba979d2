"""Compares a reference wheel's public API (reference_api.read_package) with a live module.

`differences(reference, module, prefix)` yields (qualified name, what differs) pairs; the
rules, for a program written against the reference to run unchanged on ours:
  * every public name exists, of the same kind (class, function, module);
  * a property (or dataclass field) is a readable attribute, a method is callable and not a
    property, a classmethod or staticmethod is callable on the class;
  * a signature takes the reference's positional parameters at the same places with the same
    names, each keyword-only parameter by name, *args / **kwargs where the reference has them,
    the same defaults (the reference's default, evaluated among our module's names, equals
    ours); ours may add parameters that have defaults, and defaults where it has none;
  * every enum member exists with the reference's value; a constant defined by an expression
    equals that expression evaluated among our names.
Run as a program to print the report: python3 tests/conformance/compare.py [REFERENCE_DIR]
"""
from __future__ import annotations

import ast
import builtins
import enum
import inspect
import types
from dataclasses import dataclass

from reference_api import Item, Signature

_MISSING = object()


@dataclass(frozen=True)
class Difference:
    name: str   # the reference's qualified name: nccl.core.Communicator.reduce
    what: str

    def __str__(self) -> str:
        return f"{self.name}: {self.what}"


def _namespace(module) -> dict:
    names = dict(vars(builtins))
    for name in dir(module):
        try:
            names[name] = getattr(module, name)
        except Exception:  # a lazy name that cannot load here (a missing optional package)
            pass
    return names


def _evaluate(source: str, namespace: dict):
    try:
        return eval(compile(ast.parse(source, mode="eval"), "<reference default>", "eval"), namespace)
    except Exception as exc:  # noqa: BLE001 - reported as a difference
        return _Unevaluable(f"{type(exc).__name__}: {exc}")


class _Unevaluable:
    def __init__(self, why: str):
        self.why = why


def _same_value(theirs, ours) -> bool:
    try:
        if theirs == ours:
            return True
    except Exception:  # noqa: BLE001
        return False
    # an instance of a dataclass default (AllocConfig()) against ours of the same class
    return type(theirs) is type(ours) and repr(theirs) == repr(ours)


def _our_signature(obj) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def compare_signatures(name: str, ref: Signature, obj, namespace: dict):
    sig = _our_signature(obj)
    if sig is None:
        yield Difference(name, f"has no signature to compare with {ref}")
        return
    ours = list(sig.parameters.values())
    if ours and ours[0].name in ("self", "cls") and ref.parameters[:1] != ours[:1]:
        ours = ours[1:]
    positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    our_positional = [p for p in ours if p.kind in positional_kinds]
    by_name = {p.name: p for p in ours}
    has_var = {k: any(p.kind == k for p in ours) for k in (inspect.Parameter.VAR_POSITIONAL,
                                                           inspect.Parameter.VAR_KEYWORD)}
    shown = f"(reference {ref}; ours {sig})"
    index = 0
    missing_keywords = []
    for p in ref.parameters:
        if p.kind == "positional":
            if index >= len(our_positional) or our_positional[index].name != p.name:
                got = our_positional[index].name if index < len(our_positional) else "nothing"
                yield Difference(name, f"positional parameter {index + 1} is {got!r}, reference {p.name!r} {shown}")
                return
            index += 1
        elif p.kind == "keyword_only":
            mine = by_name.get(p.name)
            if mine is None or mine.kind == inspect.Parameter.POSITIONAL_ONLY:
                missing_keywords.append(p.name)
                continue
        elif p.kind == "var_positional":
            if not has_var[inspect.Parameter.VAR_POSITIONAL]:
                yield Difference(name, f"no *{p.name} {shown}")
            continue
        else:
            if not has_var[inspect.Parameter.VAR_KEYWORD]:
                yield Difference(name, f"no **{p.name} {shown}")
            continue
        mine = by_name[p.name]
        if p.default is not None:
            if mine.default is inspect.Parameter.empty:
                yield Difference(name, f"{p.name} has no default, reference {p.default} {shown}")
                continue
            theirs = _evaluate(p.default, namespace)
            if isinstance(theirs, _Unevaluable):
                yield Difference(name, f"{p.name}'s default {p.default} cannot be evaluated here ({theirs.why})")
            elif not _same_value(theirs, mine.default):
                yield Difference(name, f"{p.name} defaults to {mine.default!r}, reference {p.default} {shown}")
    if missing_keywords:
        yield Difference(name, f"no keyword parameter {', '.join(missing_keywords)} {shown}")
    named = {p.name for p in ref.parameters}
    for mine in ours:
        if mine.name not in named and mine.default is inspect.Parameter.empty and mine.kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            yield Difference(name, f"our parameter {mine.name!r} is required and the reference has none {shown}")


def _member_form(cls, member: str, instance=_MISSING):
    for klass in inspect.getmro(cls):
        if member in vars(klass):
            return vars(klass)[member]
    if member in getattr(cls, "__dataclass_fields__", {}):
        return "field"
    if instance is not _MISSING:
        try:
            getattr(instance, member)
            return "field"
        except Exception:  # noqa: BLE001 - AttributeError, or a class that raises its own error
            pass
    return _MISSING


def _default_instance(cls):
    """cls() where every constructor parameter has a default (a record), else _MISSING: its
    fields are read from it."""
    sig = _our_signature(cls)
    if sig is None or any(p.default is inspect.Parameter.empty and p.kind not in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) for p in sig.parameters.values()):
        return _MISSING
    try:
        return cls()
    except Exception:  # noqa: BLE001 - a class that needs a live library or device
        return _MISSING


def compare_class(name: str, ref: Item, cls, namespace: dict):
    if not isinstance(cls, type):
        yield Difference(name, f"is a {type(cls).__name__}, reference a class")
        return
    if ref.signature is not None:
        yield from compare_signatures(name, ref.signature, cls, namespace)
    instance = _default_instance(cls) if "field" in ref.members.values() else _MISSING
    missing_fields = []
    for member, kind in ref.members.items():
        qualified = f"{name}.{member}"
        found = _member_form(cls, member, instance)
        if found is _MISSING and kind == "field":
            missing_fields.append(member)
            continue
        if found is _MISSING:
            yield Difference(qualified, f"missing (a {kind})")
            continue
        if kind in ("property", "field"):
            if isinstance(found, (types.FunctionType, classmethod, staticmethod)):
                yield Difference(qualified, f"is a method, reference a {kind}")
            continue
        if isinstance(found, property) or (kind != "method") != isinstance(found, (classmethod, staticmethod)):
            form = ("a property" if isinstance(found, property) else
                    "a class/static method" if isinstance(found, (classmethod, staticmethod)) else "a method")
            yield Difference(qualified, f"is {form}, reference a {kind}")
            continue
        yield from compare_signatures(qualified, ref.member_signatures[member], getattr(cls, member), namespace)
    if missing_fields:
        yield Difference(name, f"no field {', '.join(missing_fields)}")
    for member, value in ref.enum_members.items():
        qualified = f"{name}.{member}"
        ours = getattr(cls, member, _MISSING)
        if ours is _MISSING:
            yield Difference(qualified, f"missing (an enum member, {value})")
            continue
        theirs = _evaluate(value, {**namespace, **{k: getattr(cls, k, None) for k in ref.enum_members}})
        if not isinstance(theirs, _Unevaluable) and not _same_value(theirs, int(ours)):
            yield Difference(qualified, f"is {int(ours)}, reference {value}")


def compare_item(name: str, ref: Item, ours, namespace: dict):
    if ref.kind == "class":
        yield from compare_class(name, ref, ours, namespace)
    elif ref.kind == "function":
        if isinstance(ours, type) or not callable(ours):
            yield Difference(name, f"is a {type(ours).__name__}, reference a function")
        else:
            yield from compare_signatures(name, ref.signature, ours, namespace)
    elif ref.kind == "module":
        yield from differences(ref.items, ours, name)
    elif ref.kind == "constant" and ref.value is not None:
        theirs = _evaluate(ref.value, namespace)
        if not isinstance(theirs, _Unevaluable) and not isinstance(theirs, (type, types.GenericAlias)) \
                and not _same_value(theirs, ours) and not _is_type_expression(theirs):
            yield Difference(name, f"is {ours!r}, reference {ref.value}")


def _is_type_expression(value) -> bool:
    return type(value).__module__ in ("typing", "types") or isinstance(value, enum.EnumMeta)


def differences(reference: dict[str, Item], module, prefix: str):
    """Every Difference between the reference's items and `module`'s."""
    namespace = _namespace(module)
    for name, ref in reference.items():
        qualified = f"{prefix}.{name}"
        try:
            ours = getattr(module, name)
        except AttributeError:
            yield Difference(qualified, f"missing (a {ref.kind}, {ref.where})")
            continue
        except Exception as exc:  # noqa: BLE001 - a lazy name whose import fails
            yield Difference(qualified, f"cannot be loaded: {type(exc).__name__}: {exc}")
            continue
        yield from compare_item(qualified, ref, ours, namespace)


def count_names(reference: dict[str, Item]) -> int:
    """Public names: each item, each class member and enum member, each module's items."""
    total = 0
    for item in reference.values():
        total += 1 + len(item.members) + len(item.enum_members)
        if item.items:
            total += count_names(item.items)
    return total


def reference_modules(reference_dir):
    """(reference module, our module name, its items) for each module of reference_wheels.toml."""
    import pathlib
    import tomllib

    from reference_api import read_package
    here = pathlib.Path(__file__).resolve().parent
    table = tomllib.loads((here / "reference_wheels.toml").read_text())
    for wheel in table["wheel"]:
        root = pathlib.Path(reference_dir) / wheel["pin"].replace("==", "-")
        for module in wheel["modules"]:
            yield module["reference"], module["ours"], read_package(root, module["reference"])


def report(reference_dir) -> list[Difference]:
    import importlib
    found = []
    for reference, ours, items in reference_modules(reference_dir):
        module = importlib.import_module(ours)
        diffs = list(differences(items, module, reference))
        names = {d.name for d in diffs}
        print(f"{reference} -> {ours}: {count_names(items)} public names, {len(names)} differ")
        found += diffs
    return found


if __name__ == "__main__":
    import pathlib
    import sys
    default = pathlib.Path(__file__).resolve().parents[2] / ".cache" / "api_reference"
    for d in report(sys.argv[1] if len(sys.argv) > 1 else default):
        print(d)
