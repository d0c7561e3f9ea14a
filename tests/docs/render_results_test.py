#!/usr/bin/env python3
"""bench/render_results.py --check fails when it should: on a copy of the
tree's README.md, docs/performance.md and bench/results/, an edited table
is named as stale, re-rendering repairs it, and malformed results files are
refused naming the file and field.

usage: render_results_test.py SOURCE_DIR
"""

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = None


class RenderResultsCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.tmp.name)
        (self.root / "docs").mkdir()
        shutil.copy(SOURCE / "README.md", self.root / "README.md")
        shutil.copy(SOURCE / "docs" / "performance.md", self.root / "docs")
        shutil.copytree(SOURCE / "bench" / "results", self.root / "bench" / "results")
        shutil.copy(SOURCE / "bench" / "render_results.py", self.root / "bench")

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args):
        return subprocess.run(
            [sys.executable, str(self.root / "bench" / "render_results.py"),
             "--root", str(self.root), *args],
            capture_output=True, text=True, check=False)

    def edit(self, relative, old, new):
        path = self.root / relative
        text = path.read_text(encoding="utf-8")
        self.assertIn(old, text)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    def results_file(self, name):
        return self.root / "bench" / "results" / name

    def assert_check_fails(self, returncode, *expected):
        """Runs --check, which must exit `returncode` naming each of `expected`;
        returns what it printed."""
        r = self.run_script("--check")
        self.assertEqual(r.returncode, returncode, r.stderr)
        for text in expected:
            self.assertIn(text, r.stderr)
        return r.stderr

    def test_the_tree_as_committed_passes(self):
        r = self.run_script("--check")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_an_edited_readme_table_is_named_and_rerendering_repairs_it(self):
        self.edit("README.md", "| decode after 2048 positions |",
                  "| decode after 2048 positions (edited) |")
        stderr = self.assert_check_fails(1, "README.md: section 'readme'")
        self.assertNotIn("docs/performance.md", stderr)
        self.assertEqual(self.run_script().returncode, 0)
        self.assertEqual(self.run_script("--check").returncode, 0)

    def test_a_changed_result_makes_both_docs_stale(self):
        self.edit("bench/results/2026-12-01-amd-epyc-zen5-targets.json",
                  '"values": [78.9, 81.7]', '"values": [78.9, 81.8]')
        stderr = self.assert_check_fails(
            1, "README.md: section 'readme'",
            "docs/performance.md: section 'host=amd-epyc-zen5'")
        self.assertNotIn("host=amd-epyc-zen4", stderr)

    def test_decimals_render_as_written(self):
        self.edit("docs/performance.md", "| 4.12, 4.02, 4.03×", "| 4.12, 4.02, 4.030×")
        self.assertEqual(self.run_script("--check").returncode, 1)
        self.assertEqual(self.run_script().returncode, 0)
        text = (self.root / "docs" / "performance.md").read_text(encoding="utf-8")
        self.assertIn("| 4.12, 4.02, 4.03×", text)

    def test_a_missing_host_section_is_refused(self):
        self.edit("docs/performance.md", "<!-- results:begin host=intel-xeon-m207 -->",
                  "<!-- nothing -->")
        self.assert_check_fails(2, "host=intel-xeon-m207")

    def test_an_unknown_field_is_refused_naming_file_and_field(self):
        path = self.results_file("2026-12-02-intel-xeon-m167-link-latency.json")
        session = json.loads(path.read_text(encoding="utf-8"))
        session["figures"][0]["valeus"] = [1]
        path.write_text(json.dumps(session), encoding="utf-8")
        self.assert_check_fails(
            2, "2026-12-02-intel-xeon-m167-link-latency.json.figures[0]", "'valeus'")

    def test_bad_values_unknown_ids_and_duplicate_keys_are_refused(self):
        cases = [
            ('"values": [[3.0, 2.0]]', "values[0]"),
            ('"values": ["fast"]', "values[0]"),
            ('"values": []', ".values"),
            ('"figure": "no_such_figure", "values": [1]', "no_such_figure"),
            ('"values": [1], "values": [2]', "duplicate key 'values'"),
        ]
        for values, expected in cases:
            with self.subTest(values=values):
                path = self.results_file("zz-bad.json")
                path.write_text(
                    '{"date": "2026-12-03", "host": "amd-epyc-zen5", "cpu": "c", '
                    '"commit": null, "figures": [{"name": "n", "command": null, '
                    '"unit": "", ' + values + '}]}', encoding="utf-8")
                self.assert_check_fails(2, "zz-bad.json", expected)

    def test_two_same_day_results_of_one_figure_need_a_time(self):
        for name in ("zz-a.json", "zz-b.json"):
            self.results_file(name).write_text(json.dumps({
                "date": "2026-12-03", "host": "amd-epyc-zen4", "cpu": "c",
                "commit": None, "figures": [{"figure": "decode_tok_s", "name": "n",
                                             "command": "x", "values": [1], "unit": ""}]}),
                encoding="utf-8")
        self.assert_check_fails(2, "zz-a.json and zz-b.json")

    def test_a_newer_result_replaces_the_shown_one(self):
        self.results_file("zz-new.json").write_text(json.dumps({
            "date": "2027-01-01", "host": "amd-epyc-zen4", "cpu": "c", "commit": None,
            "figures": [{"figure": "decode_after_2048_tok_s", "name": "n",
                         "command": "lockstep bench ...", "values": [[70, 71]],
                         "unit": "tok/s"}]}), encoding="utf-8")
        self.assertEqual(self.run_script("--check").returncode, 1)
        self.assertEqual(self.run_script().returncode, 0)
        text = (self.root / "docs" / "performance.md").read_text(encoding="utf-8")
        self.assertIn("| 70-71 tok/s | ≥ 60 tok/s | [2027-01-01](../bench/results/zz-new.json) |",
                      text)


if __name__ == "__main__":
    SOURCE = pathlib.Path(sys.argv.pop(1)).resolve()
    unittest.main()
