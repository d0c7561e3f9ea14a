#!/usr/bin/env python3
"""Renders the measured figures in the docs from bench/results/*.json.

bench/results/catalogue.json names the host kinds and the figures that the
docs show; every other bench/results/*.json file is one measurement session
(the schema is in docs/performance.md, "Adding a result"). This script fills
the sections between marker comments:

  docs/performance.md  <!-- results:begin host=ID --> ... <!-- results:end -->
                       one per host kind the catalogue renders: for each
                       catalogue figure, the latest result on that host kind
  README.md            <!-- results:begin readme --> ... <!-- results:end -->
                       the catalogue's README figures: the latest result on
                       the catalogue's readme_host, else the latest elsewhere

usage: bench/render_results.py [--check] [--root DIR]
  without --check the sections are rewritten in place;
  --check changes nothing and exits 1 naming every stale section.
Exits 2 on a malformed results file, naming the file and field. Python 3
standard library only.
"""

import argparse
import decimal
import json
import pathlib
import re
import sys

BEGIN = re.compile(r"<!-- results:begin (\S+) -->\n")
END = "<!-- results:end -->"
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
TIME = re.compile(r"^\d{2}:\d{2}$")

SESSION_KEYS = {
    "date": True, "time": False, "host": True, "cpu": True, "commit": False,
    "recorded_in": False, "conditions": False, "models": False, "notes": False,
    "figures": True,
}
FIGURE_KEYS = {
    "figure": False, "name": True, "command": True, "values": True,
    "unit": True, "approximate": False, "target": False, "status": False,
    "build": False, "notes": False,
}


class Invalid(Exception):
    """A results file that does not follow the schema."""


def load_json(path):
    """Parses `path`, keeping decimals as written (4.00 stays 4.00)."""
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        for k in keys:
            if keys.count(k) > 1:
                raise Invalid(f"{path}: duplicate key {k!r}")
        return dict(pairs)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, parse_float=decimal.Decimal,
                             object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise Invalid(f"{path}: not JSON: {e}") from e


def check_keys(obj, allowed, where):
    if not isinstance(obj, dict):
        raise Invalid(f"{where}: expected an object")
    for key in obj:
        if key not in allowed:
            raise Invalid(f"{where}: unknown field {key!r}")
    for key, required in allowed.items():
        if required and key not in obj:
            raise Invalid(f"{where}: missing field {key!r}")


def check_text(obj, key, where, nullable=False):
    value = obj.get(key)
    if value is None and (nullable or key not in obj):
        return
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"{where}.{key}: expected a non-empty string")


def is_number(v):
    return isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool)


def check_values(values, where):
    if not isinstance(values, list) or not values:
        raise Invalid(f"{where}.values: expected a non-empty list")
    for i, v in enumerate(values):
        if is_number(v) or isinstance(v, bool):
            continue
        if (isinstance(v, list) and len(v) == 2 and all(map(is_number, v))
                and v[0] <= v[1]):
            continue
        raise Invalid(f"{where}.values[{i}]: expected a number, true/false "
                      f"or a range [low, high]")


def check_figure(fig, where, figure_ids):
    check_keys(fig, FIGURE_KEYS, where)
    for key in ("name", "command", "target", "status", "build", "notes"):
        check_text(fig, key, where, nullable=(key == "command"))
    if not isinstance(fig["unit"], str):
        raise Invalid(f"{where}.unit: expected a string (may be empty)")
    if "approximate" in fig and not isinstance(fig["approximate"], bool):
        raise Invalid(f"{where}.approximate: expected true or false")
    if "figure" in fig and fig["figure"] not in figure_ids:
        raise Invalid(f"{where}.figure: {fig['figure']!r} is not in "
                      f"bench/results/catalogue.json")
    check_values(fig["values"], where)


def check_session(session, where, catalogue):
    check_keys(session, SESSION_KEYS, where)
    if not isinstance(session["date"], str) or not DATE.match(session["date"]):
        raise Invalid(f"{where}.date: expected YYYY-MM-DD")
    if "time" in session and not (isinstance(session["time"], str)
                                  and TIME.match(session["time"])):
        raise Invalid(f"{where}.time: expected HH:MM (UTC)")
    if session["host"] not in catalogue["host_ids"]:
        raise Invalid(f"{where}.host: {session['host']!r} is not a host in "
                      f"bench/results/catalogue.json")
    for key in ("cpu", "commit", "recorded_in", "conditions", "notes"):
        check_text(session, key, where, nullable=(key == "commit"))
    models = session.get("models", {})
    if not isinstance(models, dict) or not all(
            isinstance(v, str) for v in models.values()):
        raise Invalid(f"{where}.models: expected an object of strings")
    figures = session["figures"]
    if not isinstance(figures, list) or not figures:
        raise Invalid(f"{where}.figures: expected a non-empty list")
    for i, fig in enumerate(figures):
        check_figure(fig, f"{where}.figures[{i}]", catalogue["figure_ids"])


def load_catalogue(results_dir):
    path = results_dir / "catalogue.json"
    cat = load_json(path)
    check_keys(cat, {"readme_host": True, "hosts": True, "figures": True},
               str(path))
    for i, h in enumerate(cat["hosts"]):
        check_keys(h, {"id": True, "name": True, "render": True, "cpu": True},
                   f"{path}: hosts[{i}]")
    for i, f in enumerate(cat["figures"]):
        check_keys(f, {"id": True, "name": True, "target": True,
                       "readme": True}, f"{path}: figures[{i}]")
    cat["host_ids"] = {h["id"]: h for h in cat["hosts"]}
    cat["figure_ids"] = {f["id"]: f for f in cat["figures"]}
    if cat["readme_host"] not in cat["host_ids"]:
        raise Invalid(f"{path}: readme_host is not one of its hosts")
    return cat


def load_sessions(results_dir, catalogue):
    sessions = []
    for path in sorted(results_dir.glob("*.json")):
        if path.name == "catalogue.json":
            continue
        session = load_json(path)
        check_session(session, f"bench/results/{path.name}", catalogue)
        session["file"] = path.name
        sessions.append(session)
    return sessions


def latest_results(sessions):
    """{(host, figure id): (session, figure)}, the latest of each pair."""
    latest = {}
    for s in sessions:
        for fig in s["figures"]:
            if "figure" not in fig:
                continue
            key = (s["host"], fig["figure"])
            when = (s["date"], s.get("time", ""))
            if key in latest:
                other = latest[key][0]
                other_when = (other["date"], other.get("time", ""))
                if when == other_when:
                    raise Invalid(
                        f"{other['file']} and {s['file']}: two results for "
                        f"{fig['figure']!r} on {s['host']} at {when[0]} "
                        f"{when[1]}".rstrip() + "; give the sessions a time")
                if when < other_when:
                    continue
            latest[key] = (s, fig)
    return latest


def format_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return f"{v[0]}-{v[1]}"
    return str(v)


def format_measured(fig):
    text = ", ".join(format_value(v) for v in fig["values"])
    if fig.get("approximate"):
        text = "~" + text
    unit = fig["unit"]
    if unit == "x":
        text += "×"
    elif unit:
        text += " " + unit
    if "notes" in fig:
        text += f" ({fig['notes']})"
    return text


def format_target(fig, catalogue):
    target = fig.get("target", catalogue["figure_ids"][fig["figure"]]["target"])
    status = fig.get("status", "")
    if target and status:
        return f"{target}: {status}"
    return target or status


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def row(fig, session, catalogue, link_prefix, host_cell):
    name = catalogue["figure_ids"][fig["figure"]]["name"]
    command = f"`{fig['command']}`" if fig["command"] else "not recorded"
    date = (f"[{session['date']}]({link_prefix}bench/results/"
            f"{session['file']})")
    cells = [name, command, format_measured(fig),
             format_target(fig, catalogue)]
    cells.append(f"{host_cell}, {date}" if host_cell else date)
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def render_host(host, catalogue, latest):
    rows = []
    for f in catalogue["figures"]:
        if (host, f["id"]) in latest:
            session, fig = latest[(host, f["id"])]
            rows.append(row(fig, session, catalogue, "../", None))
    if not rows:
        raise Invalid(f"host {host}: no results name a catalogue figure")
    head = [catalogue["host_ids"][host]["cpu"] + ".", "",
            "| figure | command | measured | target | date |",
            "|---|---|---|---|---|"]
    return "\n".join(head + rows)


def readme_pick(fid, catalogue, latest):
    home = (catalogue["readme_host"], fid)
    if home in latest:
        return latest[home]
    picks = [latest[(h["id"], fid)] for h in catalogue["hosts"]
             if h["render"] and (h["id"], fid) in latest]
    if not picks:
        return None
    return max(picks, key=lambda p: (p[0]["date"], p[0].get("time", "")))


def render_readme(catalogue, latest):
    lines = ["| figure | command | measured | target | host, date |",
             "|---|---|---|---|---|"]
    for f in catalogue["figures"]:
        pick = readme_pick(f["id"], catalogue, latest) if f["readme"] else None
        if pick is not None:
            session, fig = pick
            host = catalogue["host_ids"][session["host"]]["name"]
            lines.append(row(fig, session, catalogue, "", host))
    return "\n".join(lines)


def sections(text, path):
    """[(key, start, end)] of each marked section's body in `text`."""
    found = []
    for m in BEGIN.finditer(text):
        end = text.find(END, m.end())
        if end < 0:
            raise Invalid(f"{path}: '{m.group(0).strip()}' has no {END}")
        found.append((m.group(1), m.end(), end))
    return found


def render_section(key, catalogue, latest, path):
    if key == "readme":
        return render_readme(catalogue, latest)
    host = key[len("host="):] if key.startswith("host=") else None
    if host not in catalogue["host_ids"] or not catalogue["host_ids"][host]["render"]:
        raise Invalid(f"{path}: section {key!r} names no rendered host of "
                      f"bench/results/catalogue.json")
    return render_host(host, catalogue, latest)


def update_file(path, catalogue, latest, wanted):
    """Returns (new text, [stale section keys]); `wanted` lists the keys
    that must appear exactly once."""
    text = path.read_text(encoding="utf-8")
    found = sections(text, path)
    keys = [k for k, _, _ in found]
    for key in wanted:
        if keys.count(key) != 1:
            raise Invalid(f"{path}: needs exactly one section "
                          f"'<!-- results:begin {key} -->' (found "
                          f"{keys.count(key)})")
    out, stale, pos = [], [], 0
    for key, start, end in found:
        body = "\n" + render_section(key, catalogue, latest, path) + "\n\n"
        if text[start:end] != body:
            stale.append(key)
        out += [text[pos:start], body]
        pos = end
    out.append(text[pos:])
    return "".join(out), stale


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a section is stale")
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[1],
                        type=pathlib.Path, help="the source tree (default: this one)")
    args = parser.parse_args(argv)
    root = args.root
    try:
        catalogue = load_catalogue(root / "bench" / "results")
        latest = latest_results(load_sessions(root / "bench" / "results", catalogue))
        hosts = [f"host={h['id']}" for h in catalogue["hosts"] if h["render"]]
        docs = [(root / "docs" / "performance.md", hosts),
                (root / "README.md", ["readme"])]
        updates = [(p, *update_file(p, catalogue, latest, w)) for p, w in docs]
    except Invalid as e:
        print(f"render_results: {e}", file=sys.stderr)
        return 2
    stale = [f"{p.relative_to(root)}: section '{k}'" for p, _, keys in updates
             for k in keys]
    if args.check:
        for s in stale:
            print(f"render_results: stale: {s} differs from what "
                  f"bench/results renders; run bench/render_results.py",
                  file=sys.stderr)
        return 1 if stale else 0
    for path, text, keys in updates:
        if keys:
            path.write_text(text, encoding="utf-8")
    for s in stale:
        print(f"rendered {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
