"""The public Python API of a reference wheel (nccl4py, nccl-extensions), read from its
sources with `ast`: nothing of the wheel is imported or installed.

A package's public names are its `__all__`, each resolved to where it is defined (through
`from M import *` and `from M import name`, and the lazy `__getattr__` submodules); each is
an `Item`: a class (its members, its constructor, its enum members), a function (its
signature), a module (its own public items) or a constant.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str                # "positional" (or keyword), "keyword_only", "var_positional", "var_keyword"
    default: str | None      # the default's source text, None when it has none


@dataclass(frozen=True)
class Signature:
    parameters: tuple[Parameter, ...]

    def __str__(self) -> str:
        out, star = [], False
        for p in self.parameters:
            if p.kind == "keyword_only" and not star:
                out.append("*")
                star = True
            prefix = {"var_positional": "*", "var_keyword": "**"}.get(p.kind, "")
            star = star or p.kind == "var_positional"
            out.append(prefix + p.name + ("" if p.default is None else "=" + p.default))
        return "(" + ", ".join(out) + ")"


@dataclass
class Item:
    name: str
    kind: str                          # class, function, module, constant
    where: str                         # file:line in the wheel
    signature: Signature | None = None  # a function's, or a class's constructor
    members: dict[str, str] = field(default_factory=dict)           # class: name -> method/property/classmethod/staticmethod
    member_signatures: dict[str, Signature] = field(default_factory=dict)
    enum_members: dict[str, str] = field(default_factory=dict)      # enum class: name -> value source
    items: dict[str, Item] = field(default_factory=dict)            # module: its public items
    value: str | None = None           # a constant's defining expression


ENUM_BASES = {"Enum", "IntEnum", "IntFlag", "Flag", "StrEnum"}


def _signature(args: ast.arguments, drop_first: bool) -> Signature:
    params = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults):
        params.append(Parameter(arg.arg, "positional", None if default is None else ast.unparse(default)))
    if args.vararg:
        params.append(Parameter(args.vararg.arg, "var_positional", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(Parameter(arg.arg, "keyword_only", None if default is None else ast.unparse(default)))
    if args.kwarg:
        params.append(Parameter(args.kwarg.arg, "var_keyword", None))
    return Signature(tuple(params[1:] if drop_first and params else params))


def _decorators(node) -> list[str]:
    return [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]


# Decorators that make a class a dataclass, with their kw_only default (nccl-extensions'
# binding_dataclass is a dataclass_transform with kw_only_default=True).
DATACLASS_DECORATORS = {"dataclass": False, "binding_dataclass": True}


def _dataclass_options(node: ast.ClassDef) -> dict | None:
    for d in node.decorator_list:
        name = ast.unparse(d.func if isinstance(d, ast.Call) else d).split(".")[-1]
        if name in DATACLASS_DECORATORS:
            opts = {"kw_only": DATACLASS_DECORATORS[name]}
            if isinstance(d, ast.Call):
                for kw in d.keywords:
                    opts[kw.arg] = ast.literal_eval(kw.value)
            return opts
    return None


def _field_default(value: ast.expr | None) -> str | None:
    if value is None:
        return None
    # Field(default=X, ...) / field(default=X) / field(default_factory=F)
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("Field", "field"):
        for kw in value.keywords:
            if kw.arg == "default":
                return ast.unparse(kw.value)
            if kw.arg == "default_factory":
                return ast.unparse(kw.value) + "()"
        return None
    return ast.unparse(value)


class Package:
    """The modules of one package root (the folder holding `nccl/`)."""

    def __init__(self, root: Path):
        self.root = root
        self._trees: dict[str, ast.Module] = {}

    def path(self, module: str) -> Path:
        base = self.root / Path(*module.split("."))
        return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            self._trees[module] = ast.parse(self.path(module).read_text(), str(self.path(module)))
        return self._trees[module]

    def where(self, module: str, node: ast.AST) -> str:
        return f"{self.path(module).relative_to(self.root)}:{getattr(node, 'lineno', 0)}"

    def _absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = module.split(".")
        is_package = self.path(module).name == "__init__.py"  # a module resolves against its package
        base = parts[: len(parts) - node.level + (1 if is_package else 0)]
        return ".".join(base + ([node.module] if node.module else []))

    def all_names(self, module: str) -> list[str] | None:
        """The module's __all__: a list of strings, where `*sub.__all__` (a submodule's) counts as
        that submodule's names."""
        for node in self.tree(module).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                    for t in node.targets):
                names = []
                for element in node.value.elts:
                    if (isinstance(element, ast.Starred) and isinstance(element.value, ast.Attribute)
                            and element.value.attr == "__all__" and isinstance(element.value.value, ast.Name)):
                        names += self.all_names(f"{module}.{element.value.value.id}") or []
                    else:
                        names.append(ast.literal_eval(element))
                return names
        return None

    def _lazy_modules(self, module: str) -> dict[str, str]:
        """name -> module a package-level __getattr__ imports and returns for it."""
        out = {}
        for node in self.tree(module).body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                for sub in ast.walk(node):
                    if isinstance(sub, ast.If) and isinstance(sub.test, ast.Compare):
                        name = sub.test.comparators[0]
                        imports = [n for n in sub.body if isinstance(n, ast.Import)]
                        if isinstance(name, ast.Constant) and imports:
                            out[name.value] = imports[0].names[0].name
        return out

    def find(self, module: str, name: str, seen=()) -> tuple[str, ast.AST] | None:
        """(module, defining node) of `name` as `module` exposes it."""
        if (module, name) in seen:
            return None
        seen = (*seen, (module, name))
        tree = self.tree(module)
        star = []
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
                return module, node
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    return module, node
            if isinstance(node, ast.ImportFrom):
                source = self._absolute(module, node)
                for alias in node.names:
                    if alias.name == "*":
                        star.append(source)
                    elif (alias.asname or alias.name) == name and self._exists(source):
                        return self.find(source, alias.name, seen) or (source, node)
        for source in star:
            if self._exists(source) and (self.all_names(source) is None or name in self.all_names(source)):
                found = self.find(source, name, seen)
                if found:
                    return found
        lazy = self._lazy_modules(module).get(name)
        if lazy:
            return lazy, self.tree(lazy)
        return None

    def _exists(self, module: str) -> bool:
        return bool(module) and self.path(module).exists()

    def item(self, module: str, name: str) -> Item:
        found = self.find(module, name)
        if found is None:
            raise LookupError(f"{module}.{name}: in __all__ but defined nowhere the reader can follow")
        where_module, node = found
        where = self.where(where_module, node)
        if isinstance(node, ast.Module):
            sub = Item(name, "module", where)
            for public in self.all_names(where_module) or []:
                sub.items[public] = self.item(where_module, public)
            return sub
        if isinstance(node, ast.FunctionDef):
            return Item(name, "function", where, signature=_signature(node.args, drop_first=False))
        if isinstance(node, ast.ClassDef):
            return self._class(where_module, node, where)
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        return Item(name, "constant", where, value=None if value is None else ast.unparse(value))

    def _class(self, module: str, node: ast.ClassDef, where: str) -> Item:
        item = Item(node.name, "class", where)
        bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
        is_enum = bool(bases & ENUM_BASES)
        dataclass_opts = _dataclass_options(node)
        fields = []
        for member in node.body:
            if isinstance(member, ast.FunctionDef):
                if member.name.startswith("_") and member.name != "__init__":
                    continue
                decorators = _decorators(member)
                if any(d.endswith(".setter") or d.endswith(".deleter") for d in decorators):
                    continue
                if "overload" in {d.split(".")[-1] for d in decorators}:
                    continue
                kind = ("property" if "property" in decorators else "classmethod" if "classmethod" in decorators
                        else "staticmethod" if "staticmethod" in decorators else "method")
                if member.name == "__init__":
                    item.signature = _signature(member.args, drop_first=True)
                    continue
                item.members[member.name] = kind
                if kind != "property":
                    item.member_signatures[member.name] = _signature(member.args, drop_first=kind != "staticmethod")
            elif is_enum and isinstance(member, ast.Assign):
                for target in member.targets:
                    if isinstance(target, ast.Name) and not target.id.startswith("_"):
                        item.enum_members[target.id] = ast.unparse(member.value)
            elif dataclass_opts is not None and isinstance(member, ast.AnnAssign) \
                    and isinstance(member.target, ast.Name) and "ClassVar" not in ast.unparse(member.annotation):
                if not member.target.id.startswith("_"):
                    fields.append((member.target.id, _field_default(member.value)))
        if dataclass_opts is not None and item.signature is None:
            kind = "keyword_only" if dataclass_opts.get("kw_only") else "positional"
            item.signature = Signature(tuple(Parameter(n, kind, d) for n, d in fields))
            for n, _ in fields:
                item.members.setdefault(n, "field")
        return item


def read_package(root: Path, module: str) -> dict[str, Item]:
    """The public items of `module` (e.g. "nccl.core"), by name."""
    package = Package(root)
    names = package.all_names(module)
    if names is None:
        raise LookupError(f"{module} has no __all__")
    return {name: package.item(module, name) for name in names if not name.startswith("__")}
