"""Deterministic JSON form of IR dataclasses: empty fields are left out."""
import dataclasses


def to_json(obj):
    if dataclasses.is_dataclass(obj):
        out = {}
        for f in dataclasses.fields(obj):
            v = to_json(getattr(obj, f.name))
            if v is None or v == [] or v == {} or (v is False and f.default is False):
                continue
            out[f.name] = v
        return out
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in sorted(obj.items())}
    return obj
