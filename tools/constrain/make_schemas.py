#!/usr/bin/env python3
"""Writes the JSON Schema test corpus (tests/data/constrain/schemas/*.json).

App-shaped schemas built from a fixed list of shapes with deterministic
variations: intents with slots, forms, product/catalogue entries, nested
arrays, enums, recursion ($ref), string formats, unions, tuples. Run it again
after changing a shape; the files are committed so tests need no Python.
"""
import json
import os
import random
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../tests/data/constrain/schemas")
rng = random.Random(20261204)

INTENTS = [
    ["play_music", "pause", "next_track", "set_volume"],
    ["book_flight", "cancel_booking", "check_status"],
    ["set_alarm", "cancel_alarm", "snooze"],
    ["order_food", "track_order", "rate_order", "contact_support"],
    ["turn_on", "turn_off", "dim", "set_color"],
    ["查询天气", "设置提醒", "播放音乐"],
]
SLOT_TYPES = [
    {"type": "string", "maxLength": 24},
    {"type": "integer", "minimum": 0, "maximum": 100},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "time"},
    {"type": "boolean"},
    {"type": ["string", "null"]},
    {"enum": ["low", "medium", "high"]},
    {"type": "number", "minimum": 0, "maximum": 5},
]
FIELD_NAMES = ["name", "city", "date", "count", "level", "note", "room", "artist", "time", "when", "amount", "device",
               "姓名", "地址", "label", "email", "phone", "id"]


def intent(i):
    names = INTENTS[i % len(INTENTS)]
    slots = {}
    for k in range(1 + i % 4):
        slots[FIELD_NAMES[(i * 3 + k) % len(FIELD_NAMES)]] = SLOT_TYPES[(i + k * 5) % len(SLOT_TYPES)]
    req = list(slots)[: 1 + i % 2] if i % 3 else []
    s = {"type": "object", "properties": {"intent": {"enum": names},
                                          "slots": {"type": "object", "properties": slots, "required": req,
                                                    "additionalProperties": False},
                                          "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
         "required": ["intent", "slots"] + (["confidence"] if i % 2 else []), "additionalProperties": False}
    return s


def form(i):
    fields = {}
    for k in range(2 + i % 5):
        name = FIELD_NAMES[(i + k * 7) % len(FIELD_NAMES)]
        kind = (i + k) % 7
        fields[name] = [
            {"type": "string", "minLength": 1, "maxLength": 40},
            {"type": "string", "format": "email"},
            {"type": "string", "pattern": "^\\+?[0-9]{7,12}$"},
            {"type": "integer", "minimum": 18, "maximum": 99},
            {"type": "string", "format": "date-time"},
            {"type": "boolean"},
            {"type": "string", "enum": ["male", "female", "other", "prefer not to say"]},
        ][kind]
    return {"title": f"form {i}", "type": "object", "properties": fields,
            "required": list(fields)[: len(fields) - i % 2], "additionalProperties": i % 4 == 3}


def product(i):
    s = {"type": "object", "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "title": {"type": "string", "maxLength": 60},
        "price": {"type": "number", "minimum": 0},
        "currency": {"enum": ["USD", "EUR", "CNY", "JPY"]},
        "in_stock": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 2 + i % 4},
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
    }, "required": ["sku", "title", "price"][: 1 + i % 3], "additionalProperties": False}
    if i % 2:
        s["properties"]["variants"] = {"type": "array", "minItems": 1, "maxItems": 3, "items": {
            "type": "object", "properties": {"color": {"type": "string", "maxLength": 10},
                                             "size": {"enum": ["S", "M", "L", "XL"]}},
            "required": ["size"], "additionalProperties": False}}
    if i % 3 == 0:
        s = {"type": "object", "properties": {"items": {"type": "array", "items": s, "maxItems": 3},
                                              "page": {"type": "integer", "minimum": 1}},
             "required": ["items"], "additionalProperties": False}
    return s


def nested(i):
    depth = 1 + i % 3
    leaf = [{"type": "integer", "minimum": -50, "maximum": 50}, {"type": "string", "maxLength": 8},
            {"enum": [True, False, None]}, {"type": "number"}][i % 4]
    s = leaf
    for d in range(depth):
        s = {"type": "array", "items": s, "minItems": d % 2, "maxItems": 3}
    return {"type": "object", "properties": {"grid": s, "label": {"type": "string", "maxLength": 16}},
            "required": ["grid"], "additionalProperties": False}


def recursive(i):
    kinds = i % 4
    if kinds == 0:
        return {"$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["name"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
    if kinds == 1:
        return {"definitions": {"comment": {"type": "object", "properties": {
            "author": {"type": "string", "maxLength": 10}, "text": {"type": "string", "maxLength": 30},
            "replies": {"type": "array", "items": {"$ref": "#/definitions/comment"}, "maxItems": 2}},
            "required": ["author", "text"], "additionalProperties": False}},
            "type": "object", "properties": {"thread": {"$ref": "#/definitions/comment"}}, "required": ["thread"],
            "additionalProperties": False}
    if kinds == 2:
        return {"$defs": {"expr": {"anyOf": [
            {"type": "integer", "minimum": 0, "maximum": 99},
            {"type": "object", "properties": {"op": {"enum": ["+", "-", "*"]}, "args": {
                "type": "array", "items": {"$ref": "#/$defs/expr"}, "minItems": 2, "maxItems": 2}},
             "required": ["op", "args"], "additionalProperties": False}]}}, "$ref": "#/$defs/expr"}
    return {"$defs": {"menu": {"type": "object", "properties": {
        "label": {"type": "string", "maxLength": 10},
        "submenu": {"anyOf": [{"$ref": "#/$defs/menu"}, {"type": "null"}]}},
        "required": ["label", "submenu"], "additionalProperties": False}}, "$ref": "#/$defs/menu"}


def formats(i):
    fmts = ["date", "time", "date-time", "email", "uuid", "ipv4"]
    props = {f"f{k}": {"type": "string", "format": fmts[(i + k) % len(fmts)]} for k in range(1 + i % 4)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def union(i):
    variants = [
        {"type": "object", "properties": {"kind": {"const": "text"}, "body": {"type": "string", "maxLength": 40}},
         "required": ["kind", "body"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "image"}, "url": {"type": "string", "pattern": "^https://[a-z]{3,10}\\.com/[a-z0-9]{1,12}\\.png$"},
                                          "width": {"type": "integer", "minimum": 1, "maximum": 4096}},
         "required": ["kind", "url"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "location"}, "lat": {"type": "number", "minimum": -90, "maximum": 90},
                                          "lon": {"type": "number", "minimum": -180, "maximum": 180}},
         "required": ["kind", "lat", "lon"], "additionalProperties": False},
    ]
    key = "oneOf" if i % 2 else "anyOf"
    s = {key: variants[: 2 + i % 2]}
    if i % 3 == 0:
        s = {"type": "object", "properties": {"messages": {"type": "array", "items": s, "minItems": 1, "maxItems": 3}},
             "required": ["messages"], "additionalProperties": False}
    return s


def misc(i):
    k = i % 10
    if k == 0:
        return {"type": "array", "items": {"type": "string", "maxLength": 10}, "minItems": 1, "maxItems": 5}
    if k == 1:
        return {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}, {"enum": ["N", "S", "E", "W"]}],
                "items": False}
    if k == 2:
        return {"allOf": [{"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]},
                          {"properties": {"name": {"type": "string", "maxLength": 20}}, "required": ["name"]}]}
    if k == 3:
        return {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}}
    if k == 4:
        return {"type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]},
                                                 "reason": {"type": "string", "minLength": 3, "maxLength": 50}},
                "required": ["answer", "reason"]}
    if k == 5:
        return {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["work", "home", "urgent", "later", "家庭"]},
                                                          "maxItems": 4}}, "required": ["tags"], "additionalProperties": False}
    if k == 6:
        return {"type": ["integer", "null"], "minimum": -1000, "maximum": 1000}
    if k == 7:
        return {"type": "object", "properties": {"version": {"const": 2}, "ok": {"type": "boolean"},
                                                 "data": {}}, "required": ["version", "ok"], "additionalProperties": False}
    if k == 8:
        return {"type": "object", "properties": {"known": {"type": "string", "maxLength": 5}},
                "additionalProperties": {"type": "boolean"}}
    return {"type": "object", "properties": {"summary": {"type": "string", "maxLength": 80},
                                             "keywords": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,10}$"}, "maxItems": 5},
                                             "sentiment": {"type": "number", "minimum": -1, "maximum": 1}},
            "required": ["summary", "keywords", "sentiment"], "additionalProperties": False}


SHAPES = [("intent", intent, 18), ("form", form, 16), ("product", product, 14), ("nested", nested, 12),
          ("recursive", recursive, 12), ("formats", formats, 10), ("union", union, 10), ("misc", misc, 20)]

os.makedirs(OUT, exist_ok=True)
n = 0
for name, fn, count in SHAPES:
    for i in range(count):
        s = fn(i)
        s.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        with open(os.path.join(OUT, f"{name}_{i:02d}.json"), "w", encoding="utf-8") as f:
            json.dump(s, f, ensure_ascii=False, indent=1)
            f.write("\n")
        n += 1
print(f"wrote {n} schemas to {OUT}")
