#!/usr/bin/env python3
"""Spec-exactness cases for the JSON Schema compiler (issue 12): instances
Pocket used to refuse though the spec accepts them, and their neighbours
that must stay refused. The verdict of each case is jsonschema's (with its
format checker), written into tests/data/constrain/spec_cases.json, which
tests/constrain/spec_cases_test.cpp reads. Run with --check to compare the
file's verdicts with jsonschema again (the oracles stage does).
"""
import json
import os
import sys

import jsonschema

OUT = os.path.join(os.path.dirname(__file__), "../../tests/data/constrain/spec_cases.json")

DT = {"type": "string", "format": "date-time"}
T = {"type": "string", "format": "time"}
EM = {"type": "string", "format": "email"}
I = {"type": "integer", "minimum": -5, "maximum": 5}
I0 = {"type": "integer", "minimum": 0, "maximum": 9}
INEG = {"type": "integer", "minimum": -9, "maximum": -1}
N0 = {"type": "number", "minimum": 0, "maximum": 3}
OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TUP = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}, {"type": "boolean"}]}
TUPMIN = dict(TUP, minItems=2, items=False)
TUPMAX = dict(TUP, maxItems=2)

CASES = [
    (DT, '"2024-05-01T10:20:30Z"'), (DT, '"2024-05-01t10:20:30z"'), (DT, '"2024-05-01t10:20:30+02:00"'),
    (DT, '"2024-05-01 10:20:30Z"'), (DT, '"2024-05-01T10:20:30"'),
    (T, '"10:20:30z"'), (T, '"10:20:30Z"'),
    (EM, '"a.b@example.com"'), (EM, '"o\'brien@example.com"'), (EM, '"x!#$%&*+/=?^_`{|}~-y@example.org"'),
    (EM, '"user+tag@mail.example.co"'),
    (I, "-0"), (I, "0"), (I, "-5"), (I, "-6"), (I0, "-0"), (I0, "0"), (INEG, "-0"), (INEG, "-1"),
    ({"type": "number"}, "-0"), ({"type": "number"}, "-0.0"), (N0, "-0"), (N0, "-0.0"), (N0, "-0.5"),
    (OBJ, '{"a":1}'), (OBJ, '{"a":1,"b":2}'), (OBJ, '{"a":1,"zz":[true]}'), (OBJ, '{"b":2}'),
    (TUP, "[]"), (TUP, "[1]"), (TUP, '[1,"x"]'), (TUP, '[1,"x",true]'), (TUP, '[1,"x",true,null]'), (TUP, '["x"]'),
    (TUPMIN, "[1]"), (TUPMIN, '[1,"x"]'), (TUPMIN, '[1,"x",false]'), (TUPMIN, '[1,"x",false,2]'),
    (TUPMAX, '[1,"x"]'), (TUPMAX, '[1,"x",true]'), (TUPMAX, "[1]"),
]


def verdict(schema, text):
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return v.is_valid(json.loads(text))


def main():
    cases = [{"schema": s, "instance": i, "valid": verdict(s, i)} for s, i in CASES]
    if "--check" in sys.argv:
        stored = json.load(open(OUT, encoding="utf-8"))
        bad = [c for c in stored if verdict(c["schema"], c["instance"]) != c["valid"]]
        for c in bad:
            print("spec_cases: jsonschema disagrees with the stored verdict:", json.dumps(c))
        print("spec_cases: %d cases, %d disagree with jsonschema %s" % (len(stored), len(bad), jsonschema.__version__ if hasattr(jsonschema, "__version__") else ""))
        return 1 if bad else 0
    with open(OUT + ".tmp", "w", encoding="utf-8") as f:
        json.dump(cases, f, indent=0)
        f.write("\n")
    os.replace(OUT + ".tmp", OUT)
    print("wrote %d cases, %d valid" % (len(cases), sum(c["valid"] for c in cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
