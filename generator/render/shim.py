"""The interposition library (the shim): one C file of wrappers per NCCL release.

Each wrapper is named as NCCL's function, forwards to the next definition in the process
(the real libnccl), translates virtual communicator handles in checkpoint mode, and hands
what the call meant to the hand-written recorder in shim/src/. Which parameter is the
communicator, a buffer, the count, the data type, the op, the root or peer and the stream
comes from the semantic policy (policy/nccl.toml); what the shim alone needs (bytes per
element, how communicators are made, group boundaries, bus-bandwidth factors) from
policy/nccl_shim.toml.

One source for every release (bindings/shim/src/nccl_shim.c), built once per release with
-DNB_SHIM_RELEASE_CODE: an exported wrapper is always visible to dlsym(RTLD_DEFAULT, name), so a
program that gates on dlsym to find what its libnccl has would see every release's functions
through a single library; each release's library exports its own. In the source each release
has its tables, and each wrapper stands once under the releases whose wrapper reads the same
(`#if NB_SHIM_RELEASE_CODE ...`), so a reader sees what differs between releases. The launcher
(ncclbind.trace) preloads the variant of the release the process loads.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field

from . import RenderContext, environment, render_files
from .c import PREFIX, CTypes
from ..policy.common import POLICY_DIR, PolicyError
from ..policy.nccl import MethodPolicy, load_policy
from ..policy.vocabulary import load_collectives, load_vocabulary

SHIM_POLICY = POLICY_DIR / "nccl_shim.toml"
MADE_FIELDS = {"lineage", "out", "out_count", "nranks", "rank", "unique_id", "config", "parent", "color", "key",
               "exclude", "exclude_count", "flags"}
LINEAGES = ("init", "init_config", "init_scalable", "init_all", "split", "shrink", "grow")
DECODE_ROLES = {"send", "recv", "count", "dtype", "op", "root", "peer", "comm", "stream"}
RECORDER_NAME_BYTES = 56  # NAME_BYTES in shim/src/recorder.c


@dataclass
class Wrapper:
    """What the template needs of one function in one release."""
    name: str
    index: int
    result: str                     # the C result type
    result_kind: str                # nccl_result | void | value
    failure: str                    # what it returns when libnccl lacks it
    params: list[str]               # declarators
    names: list[str]
    types: list[str]                # for the next-function pointer type
    comms: list[str]                # ncclComm_t parameters, translated in checkpoint mode
    decode: dict = field(default_factory=dict)   # recorder field -> C expression
    made: dict | None = None        # nb_shim_made field -> C expression
    ends: str | None = None
    group: str | None = None
    registers: str | None = None


def load_shim_policy(api, policy) -> dict:
    """nccl_shim.toml, checked against the merged API and the semantic policy."""
    with open(SHIM_POLICY, "rb") as f:
        raw = tomllib.load(f)
    functions = {fn.name: fn for fn in api.functions}
    where = SHIM_POLICY.name

    def fail(message):
        raise PolicyError(f"{where}: {message}")

    if "element_bytes" in raw:
        fail("[element_bytes] moved to policy/vocabulary.toml (bytes of each [data_types] entry)")
    if "bus" in raw:
        fail("[bus] moved to policy/vocabulary.toml (bus_factor of each [collectives] entry)")
    # each collective's bus factor, by its nccl.toml method, from vocabulary.toml [collectives]:
    # {"factor": "2(n-1)/n", "total": the operation's bytes are n times the count's}
    raw["bus"] = {c.method: {"factor": c.bus_factor, "total": c.whole_operation}
                  for c in load_collectives() if c.method is not None}
    # bytes per element of every ncclDataType_t enumerator, from policy/vocabulary.toml
    # (load_vocabulary refuses a type of the headers it lacks)
    raw["element_bytes"] = {name: t.bytes for t in load_vocabulary(api) for name in t.names}
    for fname, table in raw.get("made", {}).items():
        fn = functions.get(fname)
        if fn is None:
            fail(f"[made.{fname}] is not a function of the headers")
        params = {p.name for p in fn.params}
        for key, value in table.items():
            if key not in MADE_FIELDS:
                fail(f"[made.{fname}] unknown key {key!r} (known: {sorted(MADE_FIELDS)})")
            if key == "lineage":
                if value not in LINEAGES:
                    fail(f"[made.{fname}] lineage {value!r} is not one of {LINEAGES}")
            elif value not in params:
                fail(f"[made.{fname}] {key} = {value!r}: {fname} has no such parameter")
    for table in ("ends", "group", "registers"):
        for fname in raw.get(table, {}):
            if fname not in functions:
                fail(f"[{table}] {fname} is not a function of the headers")
    methods = {m.name for m in policy.methods}
    for fname, table in raw.get("decode", {}).items():
        fn = functions.get(fname)
        if fn is None:
            fail(f"[decode.{fname}] is not a function of the headers")
        if fname in policy.functions():
            fail(f"[decode.{fname}]: nccl.toml describes {fname} already")
        params = {p.name for p in fn.params}
        given = table.get("params", {})
        if set(given) != params:
            fail(f"[decode.{fname}.params] must give a role to exactly {sorted(params)}")
        for pname, role in given.items():
            if role not in DECODE_ROLES:
                fail(f"[decode.{fname}.params] {pname}: role {role!r} is not one of {sorted(DECODE_ROLES)}")
        if "count" not in given.values() or "dtype" not in given.values():
            fail(f"[decode.{fname}] needs a count and a dtype parameter")
        if table.get("bus") is not None and table["bus"] not in raw["bus"]:
            fail(f"[decode.{fname}] bus = {table['bus']!r} is no method of vocabulary.toml's [collectives]")
    for name in raw["bus"]:
        if name not in methods:
            fail(f"vocabulary.toml [collectives]: method {name!r} is no method of nccl.toml")
    return raw


def _decode(roles: list[tuple[str, str]]) -> dict:
    """Recorder fields -> the parameter holding them, from [(parameter, role)]."""
    out = {}
    for param, role in roles:
        if role == "send":
            out["send"] = param
        elif role == "recv":
            out.setdefault("recv", param)
        elif role in ("count", "dtype", "op", "stream"):
            out[role] = param
        elif role in ("root", "peer"):
            out["rank_arg"] = param
            out["rank_kind"] = role
    out.setdefault("send", "NULL")  # a receive has no send buffer, a send no receive buffer
    out.setdefault("recv", "NULL")
    return out


def wrappers(api, release: str, policy, shim: dict, ct: CTypes) -> list[Wrapper]:
    by_function = policy.functions()
    out = []
    for fn in sorted((f for f in api.functions if release in f.versions), key=lambda f: f.name):
        versions = [release]
        names = [p.name for p in fn.params]
        r = fn.result
        if r.kind == "enum" and r.name == "ncclResult_t":
            kind, failure = "nccl_result", f"{PREFIX}ncclInvalidUsage"
        elif r.kind == "void":
            kind, failure = "void", ""
        else:
            kind = "value"
            failure = ("NULL" if r.kind == "pointer" else
                       f"({ct.type(r, versions)}){{0}}" if r.kind == "record" else f"({ct.type(r, versions)})0")
        method = by_function.get(fn.name)
        made = shim.get("made", {}).get(fn.name)
        if made is not None:
            params = {p.name: p for p in fn.params}
            made = {k: v if k == "lineage" else
                    (f"&{v}" if params[v].type.kind == "record" else v) for k, v in made.items()}
        out.append(Wrapper(
            name=fn.name, index=len(out), result=ct.type(r, versions), result_kind=kind, failure=failure,
            params=[ct.decl(p.type, p.name, versions) for p in fn.params] or ["void"], names=names,
            types=[ct.type(p.type, versions) for p in fn.params] or ["void"],
            comms=[p.name for p in fn.params if p.type.kind == "typedef" and p.type.name == "ncclComm_t"],
            decode=_decode([(p.param, p.role) for p in method.params] if isinstance(method, MethodPolicy) else
                           list(shim.get("decode", {}).get(fn.name, {}).get("params", {}).items())), made=made,
            ends=shim.get("ends", {}).get(fn.name), group=shim.get("group", {}).get(fn.name),
            registers=shim.get("registers", {}).get(fn.name)))
    return out


def outputs(ctx: RenderContext, ct: CTypes, env):
    api = ctx.api("nccl")
    policy = load_policy(api)
    shim = load_shim_policy(api, policy)
    dtype = next(e for e in api.enums if e.name == "ncclDataType_t")
    op = next(e for e in api.enums if e.name == "ncclRedOp_t")
    result = next(e for e in api.enums if e.name == "ncclResult_t")

    def names_by_value(enum, release):
        """One name per value that `release`'s header has (the first it gives), the highest value + 1
        long: a value the release does not know is left unnamed, as the recorder writes any unknown one."""
        code = api.version_codes[release]
        values = {}
        for v in enum.values:
            known = (v.since is None or api.version_codes[v.since] <= code) and \
                (v.until is None or code < api.version_codes[v.until])
            if known and not v.name.startswith("ncclNum") and v.name != "ncclMaxRedOp":
                values.setdefault(v.value, v.name)
        return [values.get(i, "") for i in range(max(values) + 1)]

    def tables_of(release):
        names = names_by_value(dtype, release)
        return {"dtype_names": names, "op_names": names_by_value(op, release),
                "result_names": names_by_value(result, release),
                "dtype_bytes": [shim["element_bytes"].get(n, 0) for n in names]}

    # The recorder copies each name into a record with one fixed-size move (shim/src/recorder.c).
    newest = tables_of(api.versions[-1])
    longest = max([fn.name for fn in api.functions] + newest["dtype_names"] + newest["op_names"] +
                  newest["result_names"], key=len)
    if len(longest) >= RECORDER_NAME_BYTES:
        raise PolicyError(f"{longest} is {len(longest)} characters: the recorder's names hold fewer than "
                        f"{RECORDER_NAME_BYTES} (NAME_BYTES in shim/src/recorder.c and RECORDER_NAME_BYTES here)")
    bus = {}
    for m in policy.methods:
        if m.name in shim.get("bus", {}):
            for fname in (m.function, m.config_variant):
                if fname:
                    bus[fname] = shim["bus"][m.name]
    for fname, table in shim.get("decode", {}).items():
        if table.get("bus"):
            bus[fname] = shim["bus"][table["bus"]]
    # each text once (a release's tables; a function's wrapper), under the releases it is theirs
    tables: dict[str, list[str]] = {}
    texts: dict[tuple[str, str], list[str]] = {}
    for release in api.versions:
        ws = wrappers(api, release, policy, shim, ct)
        text = env.get_template("shim/release_tables.c.j2").render(wrappers=ws, bus=bus, **tables_of(release))
        tables.setdefault(text, []).append(release)
        for w in ws:
            texts.setdefault((w.name, env.get_template("shim/wrapper.c.j2").render(w=w)), []).append(release)
    return [("bindings/shim/src/nccl_shim.c", "shim/nccl_shim.c.j2",
             {"releases": [{"release": r, "code": api.version_codes[r]} for r in api.versions],
              "tables": [{"text": text, "releases": releases, "guard": release_guard(releases, api)}
                         for text, releases in tables.items()],
              "wrappers": [{"text": text, "guard": release_guard(releases, api)}
                           for (_, text), releases in texts.items()],
              "sources": ctx.source_line(api.header_sets)})]


def release_guard(releases: list[str], api) -> str:
    """The #if condition that holds for exactly `releases` (every release: none), as ranges of
    consecutive releases over NB_SHIM_RELEASE_CODE (a code outside the releases stops at #error)."""
    if releases == api.versions:
        return ""
    runs, run = [], []
    for v in api.versions:
        if v in releases:
            run.append(v)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    code = api.version_codes
    terms = [f"NB_SHIM_RELEASE_CODE == {code[r[0]]}" if len(r) == 1 else
             f"NB_SHIM_RELEASE_CODE >= {code[r[0]]}" if r[-1] == api.versions[-1] else
             f"(NB_SHIM_RELEASE_CODE >= {code[r[0]]} && NB_SHIM_RELEASE_CODE <= {code[r[-1]]})" for r in runs]
    return " || ".join(terms)


def render(ctx: RenderContext) -> dict[str, str]:
    ct = CTypes(ctx.conventions, {n: vs for a in ctx.apis for n, vs in a.record_variants.items()})
    env = environment({})
    env.globals["P"] = PREFIX
    return render_files(env, outputs(ctx, ct, env))
